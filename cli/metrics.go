package cli

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

// processMetrics are the metrics of one process: one invocation for run-once, every tick for
// schedule. A nil *processMetrics records nothing.
type processMetrics struct {
	m       *obs.Metrics
	log     *slog.Logger
	timeout time.Duration
}

// newProcessMetrics sets up the process's metrics from the metrics section; serve says whether
// this process serves /metrics (schedule mode).
func newProcessMetrics(ctx context.Context, mc config.Metrics, log *slog.Logger, serve bool) (*processMetrics, error) {
	m, err := obs.NewMetrics(ctx, mc.MetricsOptions(Version().Version, serve))
	if err != nil {
		return nil, err
	}
	t := mc.OTLP.Timeout.D()
	if t <= 0 {
		t = obs.DefaultOTLPTimeout
	}
	return &processMetrics{m: m, log: log, timeout: t}, nil
}

// handler serves /metrics (404 when the Prometheus endpoint is off).
func (pm *processMetrics) handler() http.Handler {
	if pm == nil {
		return http.NotFoundHandler()
	}
	return pm.m.Handler()
}

// shutdown pushes the metrics a last time and waits for the answer (at most the OTLP timeout):
// a run-once process calls it after printing its report, right before it exits. A failed push
// is logged; it never changes the run's outcome.
func (pm *processMetrics) shutdown(ctx context.Context) {
	if pm == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pm.timeout)
	defer cancel()
	if err := pm.m.Shutdown(ctx); err != nil {
		pm.log.Warn("metrics push failed", "err", err)
	}
}

// orgClient is one org's Salesforce client, kept by buildInvocation so the metrics can read the
// org's daily API usage (Sforce-Limit-Info) after the run.
type orgClient struct {
	org    string
	client *salesforce.Client
}

// runRecorder is the metrics of one invocation: the job.Observer of its pushes and commits and
// the counting wrappers of its sources.
type runRecorder struct {
	m     *obs.Metrics
	lease string
	now   func() time.Time

	mu      sync.Mutex
	streams map[string]*pushStream // by the entries' canonical label string
	counted []*countingStream
}

// pushStream is what the recorder knows of one label set.
type pushStream struct {
	s        obs.Stream
	lag      *obs.LagRecorder
	accepted uint64 // entries accepted so far (for the lag sampling)
}

// lagSampleEvery is the ingest-lag sampling: the lag of one accepted entry in this many, per
// stream, is observed. An observation costs ~200 ns in the OpenTelemetry SDK (its attribute
// handling), about 4% of the EventLogFile path's CPU when every entry is observed.
const lagSampleEvery = 16

// instrument attaches a fresh run recorder to an invocation's parts: the job reports its
// pushes and commits to it, and every source's streams count what they yield.
func (pm *processMetrics) instrument(cfg *config.Config, p *invocationParts) *runRecorder {
	if pm == nil {
		return nil
	}
	r := &runRecorder{m: pm.m, lease: cfg.Lease.Name, now: time.Now, streams: map[string]*pushStream{}}
	p.opts.Observer = r
	for i := range p.deps.Bindings {
		b := &p.deps.Bindings[i]
		b.Source = &countingSource{Source: b.Source, org: b.Org, rec: r}
	}
	return r
}

// stream returns the push-side state of an entry's label set.
func (r *runRecorder) stream(l loki.Labels) *pushStream {
	key := l.String()
	ps := r.streams[key]
	if ps == nil {
		org, _ := l.Get("org")
		src, _ := l.Get("source")
		typ, _ := l.Get("event_type")
		s := obs.Stream{Lease: r.lease, Org: org, Source: src, EventType: typ}
		ps = &pushStream{s: s, lag: r.m.Lag(s)}
		r.streams[key] = ps
	}
	return ps
}

// Pushed implements job.Observer.
func (r *runRecorder) Pushed(entries []loki.Entry, res *loki.Result, took time.Duration) {
	ctx := context.Background()
	result := obs.ResultOK
	switch {
	case len(res.NotDelivered) > 0:
		result = obs.ResultFailed
	case len(res.Rejected) > 0:
		result = obs.ResultPartial
	}
	retries := map[string]int{}
	if res.Retries > 0 {
		retries[retryStatus(res)] = res.Retries
	}
	r.m.RecordPush(ctx, obs.PushFacts{Lease: r.lease, Took: took, Result: result, Requests: res.Requests,
		Splits: res.Splits, Resent: res.Resent, Truncated: res.Truncated, RetriesByStatus: retries, WireBytes: res.WireBytes,
		EncodedBytes: res.EncodedBytes})

	r.mu.Lock()
	defer r.mu.Unlock()
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
func (r *runRecorder) Committed(took time.Duration, err error) {
	result := obs.ResultOK
	switch {
	case errors.Is(err, store.ErrFenced):
		result = obs.ResultFenced
	case err != nil:
		result = obs.ResultFailed
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

// finish records an invocation's report. rec is nil when the invocation could not be built;
// orgs are the run's Salesforce clients (for the API usage gauges).
func (pm *processMetrics) finish(cfg *config.Config, rec *runRecorder, rep *job.Report, orgs []orgClient) {
	if pm == nil || rep == nil {
		return
	}
	ctx := context.Background()
	m, lease := pm.m, cfg.Lease.Name
	for _, o := range zeroOutcomes {
		if o != rep.Outcome {
			m.AddRunOutcome(ctx, lease, string(o), 0)
		}
	}
	end := rep.StartedAt.Add(time.Duration(rep.Duration))
	if rep.StartedAt.IsZero() {
		end = time.Now()
	}
	m.RecordRun(ctx, obs.RunFacts{
		Lease: lease, Outcome: string(rep.Outcome), Success: rep.Outcome == job.OutcomeOK, End: end,
		Duration: time.Duration(rep.Duration), Budget: cfg.Run.MaxDuration.D(),
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
	for key, c := range rep.Cursors {
		if t, ok := cursorTime(c.After); ok {
			m.SetCursorTime(ctx, lease, key, t)
		}
	}
	if e := rep.Egress; e != nil {
		m.SetBudget(ctx, lease, e.Used, e.Budget)
	}
	pm.recordSources(ctx, lease, rep)
	for _, o := range orgs {
		if u, ok := o.client.APIUsage(); ok {
			m.SetAPIUsage(ctx, o.org, u.Used, u.Limit)
		}
	}
	if rec != nil {
		rec.finish(ctx)
	}
}

// recordSources records the per-source API calls and named events of the report.
func (pm *processMetrics) recordSources(ctx context.Context, lease string, rep *job.Report) {
	m := pm.m
	for name, sr := range rep.Sources {
		org, src := splitBindingName(name)
		for kind, n := range sr.APICalls {
			m.AddAPICalls(ctx, lease, org, src, kind, n)
		}
		prefix := name + "."
		for ev, n := range rep.Events {
			rest, ok := strings.CutPrefix(ev, prefix)
			if !ok {
				continue
			}
			if topic, ok := strings.CutPrefix(rest, "replay_id_age_seconds:"); ok {
				m.SetReplayAge(ctx, lease, org, topic, time.Duration(n)*time.Second)
				continue
			}
			m.AddSourceEvent(ctx, lease, org, src, rest, n)
		}
	}
}

// finish records what the run's streams counted and the zero series of its streams.
func (r *runRecorder) finish(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[obs.Stream]bool{}
	for _, cs := range r.counted {
		s := obs.Stream{Lease: r.lease, Org: cs.org, Source: cs.source, EventType: cs.eventType()}
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
	for _, status := range []string{"429", "5xx", "transport"} {
		r.m.AddRetries(ctx, r.lease, status, 0)
	}
	for _, res := range []string{obs.ResultOK, obs.ResultFenced, obs.ResultFailed} {
		r.m.AddCommits(ctx, r.lease, res, 0)
	}
	for _, res := range []string{obs.ResultOK, obs.ResultPartial, obs.ResultFailed} {
		r.m.AddPushes(ctx, r.lease, res, 0)
	}
}

// countingSource wraps a source so that its streams count what they yield.
type countingSource struct {
	source.Source
	org string
	rec *runRecorder
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
	counts      obs.StreamCounts
}

// Next implements source.Stream.
func (c *countingStream) Next(ctx context.Context) (source.Record, error) {
	rec, err := c.Stream.Next(ctx)
	if err != nil {
		return rec, err
	}
	c.counts.Ingested++
	switch {
	case !rec.Skip:
		if c.typ == "" {
			c.typ, _ = rec.Entry.Labels.Get("event_type")
		}
	case rec.SkipReason == "sampled":
		c.counts.SampledOut++
	case strings.HasPrefix(rec.SkipReason, "drop_row:"):
		if c.counts.Filtered == nil {
			c.counts.Filtered = map[string]int64{}
		}
		c.counts.Filtered[strings.TrimPrefix(rec.SkipReason, "drop_row:")]++
	default:
		if c.counts.Skipped == nil {
			c.counts.Skipped = map[string]int64{}
		}
		c.counts.Skipped[rec.SkipReason]++
	}
	return rec, nil
}

// eventType is the key's event_type: its entries' label, else the key's name after the source
// (an EventLogFile type, an object, a topic without its /event/ or /data/ prefix).
func (c *countingStream) eventType() string {
	if c.typ != "" {
		return c.typ
	}
	k := c.Key()
	if _, rest, ok := strings.Cut(k, ":"); ok {
		k = rest
	}
	return k[strings.LastIndexByte(k, '/')+1:]
}

// splitBindingName splits a report source name ("org=prod:eventlogfile" or "eventlogfile").
func splitBindingName(name string) (org, src string) {
	rest, ok := strings.CutPrefix(name, "org=")
	if !ok {
		return "", name
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", name
	}
	return rest[:i], rest[i+1:]
}

// cursorTimeFields are the cursor members that hold a key's time position, by source:
// EventLogFile created, SOQL ts, ApexLog start_time, Pub/Sub last_event_at / advanced_at.
var cursorTimeFields = []string{"created", "ts", "start_time", "last_event_at", "advanced_at"}

// cursorTime reads the time position of a cursor.
func cursorTime(raw json.RawMessage) (time.Time, bool) {
	if len(raw) == 0 {
		return time.Time{}, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return time.Time{}, false
	}
	for _, f := range cursorTimeFields {
		var s string
		if json.Unmarshal(fields[f], &s) != nil || s == "" {
			continue
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000-0700"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

func reasonNames(rs []loki.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
