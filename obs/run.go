package obs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/store"
)

// RunRecorder turns one invocation into metrics: it is the job.Observer of the run's pushes and
// commits, wraps the run's sources so their streams count what they yield, and, with
// Metrics.RecordReport, records the run report. Its methods are safe for concurrent use.
type RunRecorder struct {
	m     *Metrics
	lease string
	now   func() time.Time

	mu      sync.Mutex
	streams map[string]*pushStream // by the entries' canonical label string
	counted []*countingStream
	dests   map[string]bool // destinations pushed to
}

var _ job.Observer = (*RunRecorder)(nil)

// pushStream is what the recorder knows of one label set.
type pushStream struct {
	s        Stream
	lag      *LagRecorder
	accepted uint64 // entries accepted so far (for the lag sampling)
}

// lagSampleEvery is the ingest-lag sampling: the lag of one accepted entry in this many, per
// stream, is observed. An observation costs ~200 ns in the OpenTelemetry SDK (its attribute
// handling), about 4% of the EventLogFile path's CPU when every entry is observed.
const lagSampleEvery = 16

// Instrument attaches a new run recorder to an invocation of the job whose lease is named lease:
// the job reports its pushes and commits to it, and every source's streams count what they
// yield. A nil *Metrics returns nil and changes nothing.
func (m *Metrics) Instrument(lease string, deps *job.Deps, opts *job.Options) *RunRecorder {
	if m == nil {
		return nil
	}
	r := m.NewRunRecorder(lease)
	opts.Observer = r
	for i := range deps.Bindings {
		b := &deps.Bindings[i]
		b.Source = r.Source(b.Source, b.Org)
	}
	return r
}

// NewRunRecorder returns the recorder of one invocation of the job whose lease is named lease.
func (m *Metrics) NewRunRecorder(lease string) *RunRecorder {
	return &RunRecorder{m: m, lease: lease, now: time.Now, streams: map[string]*pushStream{}, dests: map[string]bool{}}
}

// Source wraps src (of org) so that its streams count what they yield.
func (r *RunRecorder) Source(src source.Source, org string) source.Source {
	return &countingSource{Source: src, org: org, rec: r}
}

// stream returns the push-side state of an entry's label set.
func (r *RunRecorder) stream(l loki.Labels) *pushStream {
	key := l.String()
	ps := r.streams[key]
	if ps == nil {
		org, _ := l.Get("org")
		src, _ := l.Get("source")
		typ, _ := l.Get("event_type")
		s := Stream{Lease: r.lease, Org: org, Source: src, EventType: typ}
		ps = &pushStream{s: s, lag: r.m.Lag(s)}
		r.streams[key] = ps
	}
	return ps
}

// Pushed implements job.Observer.
func (r *RunRecorder) Pushed(dest string, entries []loki.Entry, res *loki.Result, took time.Duration) {
	ctx := context.Background()
	result := ResultOK
	switch {
	case len(res.NotDelivered) > 0:
		result = ResultFailed
	case len(res.Rejected) > 0:
		result = ResultPartial
	}
	retries := map[string]int{}
	if res.Retries > 0 {
		retries[retryStatus(res)] = res.Retries
	}
	r.m.RecordPush(ctx, PushFacts{Lease: r.lease, Destination: dest, Took: took, Result: result, Requests: res.Requests,
		Splits: res.Splits, Resent: res.Resent, Truncated: res.Truncated, RetriesByStatus: retries, WireBytes: res.WireBytes,
		EncodedBytes: res.EncodedBytes})

	r.mu.Lock()
	defer r.mu.Unlock()
	r.dests[dest] = true
	now := r.now()
	var (
		prev         string
		ps           *pushStream
		shipped, byt int64
	)
	flush := func() {
		if ps != nil && shipped > 0 {
			r.m.AddShipped(ctx, ps.s, shipped, byt)
		}
		shipped, byt = 0, 0
	}
	for i := range entries {
		if i >= len(res.Outcomes) || res.Outcomes[i] != loki.Accepted {
			continue
		}
		e := &entries[i]
		// Entries of one stream come in runs; the label string is shared, so this compare is
		// a pointer check.
		if ps == nil || e.Labels.String() != prev {
			flush()
			prev = e.Labels.String()
			ps = r.stream(e.Labels)
		}
		shipped++
		byt += int64(len(e.Line))
		if ps.accepted%lagSampleEvery == 0 {
			ps.lag.Observe(ctx, now.Sub(e.Timestamp))
		}
		ps.accepted++
	}
	flush()
	for _, rej := range res.Rejected {
		if rej.Index >= 0 && rej.Index < len(entries) {
			r.m.AddRejected(ctx, r.stream(entries[rej.Index].Labels).s, string(rej.Reason), 1)
		}
	}
}

// retryStatus names the status class of a push's retries. The client reports only their
// number; the final error's status is the best evidence of what was retried.
func retryStatus(res *loki.Result) string {
	var se *loki.StatusError
	if errors.As(res.Err, &se) {
		return statusClass(se.StatusCode)
	}
	return "unknown"
}

func statusClass(code int) string {
	switch {
	case code == 0:
		return "transport"
	case code == 429:
		return "429"
	case code >= 500:
		return "5xx"
	}
	return "unknown"
}

// Committed implements job.Observer.
func (r *RunRecorder) Committed(took time.Duration, err error) {
	result := ResultOK
	switch {
	case errors.Is(err, store.ErrFenced):
		result = ResultFenced
	case err != nil:
		result = ResultFailed
	}
	r.m.RecordCommit(context.Background(), r.lease, took, result)
}

// Zero series created for every lease and stream, so that rate() and increase() see the first
// occurrence of a rare event.
var (
	zeroOutcomes = []job.Outcome{job.OutcomeOK, job.OutcomeBusy, job.OutcomeFenced, job.OutcomeUnavailable,
		job.OutcomePartial, job.OutcomeIntegrity, job.OutcomeConfig, job.OutcomeInternal, job.OutcomeBudgetPaused}
	zeroRejections = []loki.Reason{loki.ReasonInvalidLabels, loki.ReasonBadRequest, loki.ReasonTooFarBehind, loki.ReasonTooOld, loki.ReasonLineTooLong}
	zeroDrops      = append(reasonNames(loki.Reasons()), "budget")
	zeroRestamps   = []loki.Reason{loki.ReasonTooFarBehind, loki.ReasonTooOld, loki.ReasonTooNew}
)

func reasonNames(rs []loki.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// RecordReport records an invocation's report for the job whose lease is named lease and whose
// budget is run.max_duration. rec is the run's recorder, nil when the invocation could not be
// built.
func (m *Metrics) RecordReport(ctx context.Context, lease string, budget time.Duration, rep *job.Report, rec *RunRecorder) {
	if m == nil || rep == nil {
		return
	}
	for _, o := range zeroOutcomes {
		if o != rep.Outcome {
			m.AddRunOutcome(ctx, lease, string(o), 0)
		}
	}
	end := rep.StartedAt.Add(time.Duration(rep.Duration))
	if rep.StartedAt.IsZero() {
		end = time.Now()
	}
	m.RecordRun(ctx, RunFacts{
		Lease: lease, Outcome: string(rep.Outcome), Success: rep.Outcome == job.OutcomeOK, End: end,
		Duration: time.Duration(rep.Duration), Budget: budget,
		Claimed: rep.Epoch > 0, Epoch: rep.Epoch, LeaseWait: time.Duration(rep.LeaseWait),
		CASRetries: int64(rep.CASRetries), Uncommitted: rep.Uncommitted, FrozenKeys: len(rep.Frozen),
	})
	if rep.Epoch > 0 {
		m.SetEpochJump(ctx, lease, int64(rep.Epoch)-int64(rep.PreviousEpoch))
		m.AddStoreWrites(ctx, lease, int64(rep.CASConflicts), int64(rep.LostAcks))
	}
	for _, r := range zeroDrops {
		m.AddDropped(ctx, lease, r, rep.Dropped[r])
	}
	for r, n := range rep.Dropped {
		if !slices.Contains(zeroDrops, r) {
			m.AddDropped(ctx, lease, r, n)
		}
	}
	for _, r := range zeroRestamps {
		m.AddRestamped(ctx, lease, string(r), rep.Restamped[string(r)])
	}
	for label, n := range rep.LabelOverflow {
		m.AddLabelOverflow(ctx, lease, label, n)
	}
	for key, c := range rep.Cursors {
		if !c.At.IsZero() {
			m.SetCursorTime(ctx, lease, key, c.At)
		}
	}
	if e := rep.Egress; e != nil {
		m.SetBudget(ctx, lease, e.Used, e.Budget)
	}
	for _, s := range rep.Limits {
		for name, l := range s.Limits {
			m.SetOrgLimit(ctx, s.Org, name, l.Max, l.Remaining)
		}
	}
	for _, sr := range rep.Sources {
		for kind, n := range sr.APICalls {
			m.AddAPICalls(ctx, lease, sr.Org, sr.Source, kind, n)
		}
		for ev, n := range sr.Events {
			if topic, ok := pubsub.ReplayAgeTopic(ev); ok {
				m.SetReplayAge(ctx, lease, sr.Org, topic, time.Duration(n)*time.Second)
				continue
			}
			m.AddSourceEvent(ctx, lease, sr.Org, sr.Source, ev, n)
		}
	}
	if rec != nil {
		rec.finish(ctx)
	}
}

// finish records what the run's streams counted and the zero series of its streams.
func (r *RunRecorder) finish(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[Stream]bool{}
	for _, cs := range r.counted {
		s := Stream{Lease: r.lease, Org: cs.org, Source: cs.source, EventType: cs.eventType()}
		r.m.AddStream(ctx, s, cs.counts)
		seen[s] = true
	}
	for _, ps := range r.streams {
		seen[ps.s] = true
	}
	for s := range seen {
		r.m.AddShipped(ctx, s, 0, 0)
		for _, reason := range zeroRejections {
			r.m.AddRejected(ctx, s, string(reason), 0)
		}
	}
	dests := maps.Clone(r.dests)
	if len(dests) == 0 {
		dests = map[string]bool{job.DefaultDestination: true}
	}
	for dest := range dests {
		for _, status := range []string{"429", "5xx", "transport"} {
			r.m.AddRetries(ctx, r.lease, dest, status, 0)
		}
		for _, res := range []string{ResultOK, ResultPartial, ResultFailed} {
			r.m.AddPushes(ctx, r.lease, dest, res, 0)
		}
	}
	for _, res := range []string{ResultOK, ResultFenced, ResultFailed} {
		r.m.AddCommits(ctx, r.lease, res, 0)
	}
}

// countingSource wraps a source so that its streams count what they yield.
type countingSource struct {
	source.Source
	org string
	rec *RunRecorder
}

// Open implements source.Source.
func (c *countingSource) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	streams, err := c.Source.Open(ctx, req)
	for i, s := range streams {
		cs := &countingStream{Stream: s, org: c.org, source: c.Name()}
		c.rec.mu.Lock()
		c.rec.counted = append(c.rec.counted, cs)
		c.rec.mu.Unlock()
		streams[i] = cs
	}
	return streams, err
}

// countingStream counts the records of one key. It is used by one goroutine (the job's puller)
// and read after the run.
type countingStream struct {
	source.Stream
	org, source string
	typ         string // the event_type label of the key's entries, once one was seen
	counts      StreamCounts
}

// Next implements source.Stream.
func (c *countingStream) Next(ctx context.Context, rec *source.Record) error {
	if err := c.Stream.Next(ctx, rec); err != nil {
		return err
	}
	c.counts.Ingested++
	if !rec.Skip {
		if c.typ == "" {
			c.typ, _ = rec.Entry.Labels.Get("event_type")
		}
		return nil
	}
	if rec.SkipReason == shape.SkipSampled {
		c.counts.SampledOut++
	} else if rule, ok := shape.DropRule(rec.SkipReason); ok {
		if c.counts.Filtered == nil {
			c.counts.Filtered = map[string]int64{}
		}
		c.counts.Filtered[rule]++
	} else {
		if c.counts.Skipped == nil {
			c.counts.Skipped = map[string]int64{}
		}
		c.counts.Skipped[rec.SkipReason]++
	}
	return nil
}

// eventType is the key's event_type: its entries' label, else the key's name.
func (c *countingStream) eventType() string {
	if c.typ != "" {
		return c.typ
	}
	return source.EventType(c.Key())
}
