package obs

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instruments are the OpenTelemetry instruments of the catalog.
type instruments struct {
	build                               metric.Int64Gauge
	runs                                metric.Int64Counter
	lastRun, lastSuccess                metric.Float64Gauge
	runDuration                         metric.Float64Histogram
	lastRunDuration, runBudget          metric.Float64Gauge
	epoch, epochJump                    metric.Int64Gauge
	leaseWait                           metric.Float64Histogram
	casRetries, casConflicts, lostAcks  metric.Int64Counter
	commits                             metric.Int64Counter
	commitDuration                      metric.Float64Histogram
	cursorTime                          metric.Float64Gauge
	frozenKeys                          metric.Int64Gauge
	ingested, shipped, shippedBytes     metric.Int64Counter
	rejected, dropped, restamped        metric.Int64Counter
	labelOverflow                       metric.Int64Counter
	sampledOut, filtered, skipped       metric.Int64Counter
	uncommitted                         metric.Int64Counter
	lag                                 metric.Float64Histogram
	pushes                              metric.Int64Counter
	pushDuration                        metric.Float64Histogram
	requests, retries, splits, resent   metric.Int64Counter
	pushedBytes, encodedBytes, truncate metric.Int64Counter
	budgetUsed, budgetLimit             metric.Int64Gauge
	apiCalls                            metric.Int64Counter
	apiRemaining, apiLimit              metric.Int64Gauge
	limitMax, limitRemaining            metric.Int64Gauge
	replayAge                           metric.Float64Gauge
	sourceEvents                        metric.Int64Counter
}

// builder creates instruments from their catalog entries and notices any entry left out.
type builder struct {
	m     metric.Meter
	err   error
	built map[string]bool
}

func (b *builder) spec(name string, kind InstrumentKind) Instrument {
	in, ok := lookupInstrument(name)
	if !ok || in.Kind != kind {
		b.fail(fmt.Errorf("instrument %s: not in the catalog as a %s", name, kind))
	}
	b.built[name] = true
	return in
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *builder) counter(name string) metric.Int64Counter {
	in := b.spec(name, KindCounter)
	c, err := b.m.Int64Counter(name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	if err != nil {
		b.fail(err)
	}
	return c
}

func (b *builder) gauge(name string) metric.Int64Gauge {
	in := b.spec(name, KindGauge)
	g, err := b.m.Int64Gauge(name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	if err != nil {
		b.fail(err)
	}
	return g
}

func (b *builder) floatGauge(name string) metric.Float64Gauge {
	in := b.spec(name, KindGauge)
	g, err := b.m.Float64Gauge(name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit))
	if err != nil {
		b.fail(err)
	}
	return g
}

func (b *builder) histogram(name string) metric.Float64Histogram {
	in := b.spec(name, KindHistogram)
	h, err := b.m.Float64Histogram(name, metric.WithDescription(in.Description), metric.WithUnit(in.Unit),
		metric.WithExplicitBucketBoundaries(in.Buckets...))
	if err != nil {
		b.fail(err)
	}
	return h
}

func newInstruments(m metric.Meter) (*instruments, error) {
	b := &builder{m: m, built: map[string]bool{}}
	in := &instruments{
		build:           b.gauge("sf2loki_build_info"),
		runs:            b.counter("sf2loki_runs"),
		lastRun:         b.floatGauge("sf2loki_last_run_timestamp_seconds"),
		lastSuccess:     b.floatGauge("sf2loki_last_success_timestamp_seconds"),
		runDuration:     b.histogram("sf2loki_run_duration_seconds"),
		lastRunDuration: b.floatGauge("sf2loki_last_run_duration_seconds"),
		runBudget:       b.floatGauge("sf2loki_run_budget_seconds"),
		epoch:           b.gauge("sf2loki_epoch"),
		epochJump:       b.gauge("sf2loki_epoch_jump"),
		leaseWait:       b.histogram("sf2loki_lease_wait_seconds"),
		casRetries:      b.counter("sf2loki_store_cas_retries"),
		casConflicts:    b.counter("sf2loki_store_cas_conflicts"),
		lostAcks:        b.counter("sf2loki_store_lost_ack_recoveries"),
		commits:         b.counter("sf2loki_commits"),
		commitDuration:  b.histogram("sf2loki_commit_duration_seconds"),
		cursorTime:      b.floatGauge("sf2loki_cursor_timestamp_seconds"),
		frozenKeys:      b.gauge("sf2loki_frozen_keys"),
		ingested:        b.counter("sf2loki_records_ingested"),
		shipped:         b.counter("sf2loki_records_shipped"),
		shippedBytes:    b.counter("sf2loki_records_shipped_bytes"),
		rejected:        b.counter("sf2loki_records_rejected"),
		dropped:         b.counter("sf2loki_records_dropped"),
		restamped:       b.counter("sf2loki_records_restamped"),
		labelOverflow:   b.counter("sf2loki_records_label_overflow"),
		sampledOut:      b.counter("sf2loki_records_sampled_out"),
		filtered:        b.counter("sf2loki_records_filtered"),
		skipped:         b.counter("sf2loki_records_skipped"),
		uncommitted:     b.counter("sf2loki_records_uncommitted"),
		lag:             b.histogram("sf2loki_ingest_lag_seconds"),
		pushes:          b.counter("sf2loki_loki_pushes"),
		pushDuration:    b.histogram("sf2loki_loki_push_duration_seconds"),
		requests:        b.counter("sf2loki_loki_requests"),
		retries:         b.counter("sf2loki_loki_retries"),
		splits:          b.counter("sf2loki_loki_splits"),
		resent:          b.counter("sf2loki_loki_resent_entries"),
		pushedBytes:     b.counter("sf2loki_loki_pushed_bytes"),
		encodedBytes:    b.counter("sf2loki_loki_encoded_bytes"),
		truncate:        b.counter("sf2loki_loki_truncated_lines"),
		budgetUsed:      b.gauge("sf2loki_egress_budget_used_bytes"),
		budgetLimit:     b.gauge("sf2loki_egress_budget_limit_bytes"),
		apiCalls:        b.counter("sf2loki_salesforce_api_calls"),
		apiRemaining:    b.gauge("sf2loki_salesforce_api_remaining"),
		apiLimit:        b.gauge("sf2loki_salesforce_api_limit"),
		limitMax:        b.gauge("sf2loki_salesforce_limit_max"),
		limitRemaining:  b.gauge("sf2loki_salesforce_limit_remaining"),
		replayAge:       b.floatGauge("sf2loki_pubsub_replay_id_age_seconds"),
		sourceEvents:    b.counter("sf2loki_source_events"),
	}
	for _, c := range catalog {
		if !b.built[c.Name] {
			b.fail(fmt.Errorf("instrument %s is in the catalog but never created", c.Name))
		}
	}
	return in, b.err
}

func withAttrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

func leaseAttr(lease string) attribute.KeyValue { return attribute.String(LabelLease, lease) }

func destAttr(dest string) attribute.KeyValue { return attribute.String(LabelDestination, dest) }

// Stream is the label set of the record instruments.
type Stream struct {
	Lease, Org, Source, EventType string
}

func (s Stream) attrs(more ...attribute.KeyValue) metric.MeasurementOption {
	kv := append([]attribute.KeyValue{leaseAttr(s.Lease), attribute.String(LabelOrg, s.Org),
		attribute.String(LabelSource, s.Source), attribute.String(LabelEventType, s.EventType)}, more...)
	return withAttrs(kv...)
}

// RunFacts are the totals of one invocation.
type RunFacts struct {
	Lease   string
	Outcome string
	// Success marks a run that did its job (outcome ok): it sets the last-success time.
	Success bool
	// End is the wall time the run ended.
	End time.Time
	// Duration is the run's wall time and Budget its time budget (run.max_duration).
	Duration, Budget time.Duration
	// Claimed reports that the run claimed the document with Epoch after waiting LeaseWait.
	Claimed   bool
	Epoch     uint64
	LeaseWait time.Duration
	// CASRetries, Uncommitted and FrozenKeys come from the run report.
	CASRetries  int64
	Uncommitted int64
	FrozenKeys  int
}

// RecordRun records an invocation's outcome and totals.
func (m *Metrics) RecordRun(ctx context.Context, f RunFacts) {
	if m == nil {
		return
	}
	lease := withAttrs(leaseAttr(f.Lease))
	m.runs.Add(ctx, 1, withAttrs(leaseAttr(f.Lease), attribute.String(LabelOutcome, f.Outcome)))
	end := float64(f.End.UnixNano()) / 1e9
	m.lastRun.Record(ctx, end, lease)
	if f.Success {
		m.lastSuccess.Record(ctx, end, lease)
	}
	m.runDuration.Record(ctx, f.Duration.Seconds(), withAttrs(leaseAttr(f.Lease), attribute.String(LabelOutcome, f.Outcome)))
	m.lastRunDuration.Record(ctx, f.Duration.Seconds(), lease)
	if f.Budget > 0 {
		m.runBudget.Record(ctx, f.Budget.Seconds(), lease)
	}
	if f.Claimed {
		m.epoch.Record(ctx, int64(f.Epoch), lease) //nolint:gosec // epochs stay far below 2^63
		m.leaseWait.Record(ctx, f.LeaseWait.Seconds(), lease)
	}
	m.casRetries.Add(ctx, f.CASRetries, lease)
	m.uncommitted.Add(ctx, f.Uncommitted, lease)
	m.frozenKeys.Record(ctx, int64(f.FrozenKeys), lease)
}

// SetEpochJump records how far the claimed epoch is above the document's previous fence.
func (m *Metrics) SetEpochJump(ctx context.Context, lease string, jump int64) {
	if m == nil {
		return
	}
	m.epochJump.Record(ctx, jump, withAttrs(leaseAttr(lease)))
}

// AddStoreWrites adds a run's precondition conflicts and lost-acknowledgement recoveries.
func (m *Metrics) AddStoreWrites(ctx context.Context, lease string, conflicts, lostAcks int64) {
	if m == nil {
		return
	}
	a := withAttrs(leaseAttr(lease))
	m.casConflicts.Add(ctx, conflicts, a)
	m.lostAcks.Add(ctx, lostAcks, a)
}

// Commit results.
const (
	ResultOK      = "ok"
	ResultPartial = "partial"
	ResultFailed  = "failed"
	ResultFenced  = "fenced"
)

// RecordCommit records one checkpoint commit and its result (ResultOK, ResultFenced,
// ResultFailed).
func (m *Metrics) RecordCommit(ctx context.Context, lease string, took time.Duration, result string) {
	if m == nil {
		return
	}
	m.commits.Add(ctx, 1, withAttrs(leaseAttr(lease), attribute.String(LabelResult, result)))
	m.commitDuration.Record(ctx, took.Seconds(), withAttrs(leaseAttr(lease)))
}

// SetCursorTime records the time position of a key's committed cursor.
func (m *Metrics) SetCursorTime(ctx context.Context, lease, key string, t time.Time) {
	if m == nil || t.IsZero() {
		return
	}
	m.cursorTime.Record(ctx, float64(t.UnixNano())/1e9, withAttrs(leaseAttr(lease), attribute.String(LabelKey, key)))
}

// StreamCounts are what one key's records became in a run, apart from the push outcomes.
type StreamCounts struct {
	// Ingested counts every record the stream yielded.
	Ingested int64
	// SampledOut counts records removed by sampling.
	SampledOut int64
	// Filtered counts records removed by drop_row rules, by rule name.
	Filtered map[string]int64
	// Skipped counts the other cursor-only records, by reason.
	Skipped map[string]int64
}

// AddStream adds a stream's record counts. Ingested and SampledOut are recorded even when
// zero, so their series exist from the first run.
func (m *Metrics) AddStream(ctx context.Context, s Stream, c StreamCounts) {
	if m == nil {
		return
	}
	m.ingested.Add(ctx, c.Ingested, s.attrs())
	m.sampledOut.Add(ctx, c.SampledOut, s.attrs())
	for rule, n := range c.Filtered {
		m.filtered.Add(ctx, n, s.attrs(attribute.String(LabelRule, rule)))
	}
	for reason, n := range c.Skipped {
		m.skipped.Add(ctx, n, s.attrs(attribute.String(LabelReason, reason)))
	}
}

// AddShipped adds entries the receiver accepted and their line bytes.
func (m *Metrics) AddShipped(ctx context.Context, s Stream, records, bytes int64) {
	if m == nil {
		return
	}
	a := s.attrs()
	m.shipped.Add(ctx, records, a)
	m.shippedBytes.Add(ctx, bytes, a)
}

// AddRejected adds entries rejected for good, by reason.
func (m *Metrics) AddRejected(ctx context.Context, s Stream, reason string, n int64) {
	if m == nil {
		return
	}
	m.rejected.Add(ctx, n, s.attrs(attribute.String(LabelReason, reason)))
}

// AddDropped adds entries the run discarded, by reason ("budget" for the egress budget).
func (m *Metrics) AddDropped(ctx context.Context, lease, reason string, n int64) {
	if m == nil {
		return
	}
	m.dropped.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelReason, reason)))
}

// AddLabelOverflow adds entries shipped with a promoted label set to the overflow value.
func (m *Metrics) AddLabelOverflow(ctx context.Context, lease, label string, n int64) {
	if m == nil {
		return
	}
	m.labelOverflow.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelLabel, label)))
}

// AddRestamped adds entries shipped with another timestamp, by Loki's reason for the refusal
// the move avoided.
func (m *Metrics) AddRestamped(ctx context.Context, lease, reason string, n int64) {
	if m == nil {
		return
	}
	m.restamped.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelReason, reason)))
}

// LagRecorder records ingest lags of one stream; its Observe is cheap enough for every entry.
type LagRecorder struct {
	h    metric.Float64Histogram
	opts []metric.RecordOption
}

// Lag returns the ingest-lag recorder of a stream.
func (m *Metrics) Lag(s Stream) *LagRecorder {
	if m == nil {
		return nil
	}
	return &LagRecorder{h: m.lag, opts: []metric.RecordOption{s.attrs()}}
}

// Observe records one entry's lag.
func (l *LagRecorder) Observe(ctx context.Context, lag time.Duration) {
	if l == nil {
		return
	}
	l.h.Record(ctx, lag.Seconds(), l.opts...)
}

// PushFacts describe one push.
type PushFacts struct {
	Lease string
	// Destination names the receiver and tenant pushed to (job.DestinationLabel).
	Destination string
	Took        time.Duration
	// Result is ResultOK, ResultPartial (some entries rejected) or ResultFailed (some not
	// delivered).
	Result string
	// Requests, Splits, Resent and Truncated are the client's counts; RetriesByStatus counts
	// retries by status class ("429", "5xx", "transport").
	Requests, Splits, Resent, Truncated int
	RetriesByStatus                     map[string]int
	// WireBytes are the request bytes sent (all attempts); EncodedBytes the uncompressed size.
	WireBytes, EncodedBytes int64
}

// RecordPush records one push.
func (m *Metrics) RecordPush(ctx context.Context, f PushFacts) {
	if m == nil {
		return
	}
	lease := withAttrs(leaseAttr(f.Lease), destAttr(f.Destination))
	m.pushes.Add(ctx, 1, withAttrs(leaseAttr(f.Lease), destAttr(f.Destination), attribute.String(LabelResult, f.Result)))
	m.pushDuration.Record(ctx, f.Took.Seconds(), lease)
	m.requests.Add(ctx, int64(f.Requests), lease)
	m.splits.Add(ctx, int64(f.Splits), lease)
	m.resent.Add(ctx, int64(f.Resent), lease)
	m.truncate.Add(ctx, int64(f.Truncated), lease)
	m.pushedBytes.Add(ctx, f.WireBytes, lease)
	m.encodedBytes.Add(ctx, f.EncodedBytes, lease)
	for status, n := range f.RetriesByStatus {
		m.retries.Add(ctx, int64(n), withAttrs(leaseAttr(f.Lease), destAttr(f.Destination), attribute.String(LabelStatus, status)))
	}
}

// AddAPICalls adds Salesforce requests of one kind made by one source.
func (m *Metrics) AddAPICalls(ctx context.Context, lease, org, source, kind string, n int64) {
	if m == nil {
		return
	}
	m.apiCalls.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelOrg, org),
		attribute.String(LabelSource, source), attribute.String(LabelKind, kind)))
}

// SetAPIUsage records an org's daily API usage reading (Sforce-Limit-Info).
func (m *Metrics) SetAPIUsage(ctx context.Context, org string, used, limit int64) {
	if m == nil {
		return
	}
	a := withAttrs(attribute.String(LabelOrg, org))
	m.apiRemaining.Record(ctx, max(limit-used, 0), a)
	m.apiLimit.Record(ctx, limit, a)
}

// SetOrgLimit records one limit of an org's /limits sample.
func (m *Metrics) SetOrgLimit(ctx context.Context, org, limit string, maxValue, remaining int64) {
	if m == nil {
		return
	}
	a := withAttrs(attribute.String(LabelOrg, org), attribute.String(LabelLimit, limit))
	m.limitMax.Record(ctx, maxValue, a)
	m.limitRemaining.Record(ctx, remaining, a)
}

// SetReplayAge records how long a topic's stored replay id had not advanced.
func (m *Metrics) SetReplayAge(ctx context.Context, lease, org, topic string, age time.Duration) {
	if m == nil {
		return
	}
	m.replayAge.Record(ctx, age.Seconds(), withAttrs(leaseAttr(lease), attribute.String(LabelOrg, org), attribute.String(LabelTopic, topic)))
}

// AddSourceEvent adds to a source's named event counter.
func (m *Metrics) AddSourceEvent(ctx context.Context, lease, org, source, event string, n int64) {
	if m == nil {
		return
	}
	m.sourceEvents.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelOrg, org),
		attribute.String(LabelSource, source), attribute.String(LabelEvent, event)))
}

// SetBudget records the egress budget's use today and its limit (0 = no budget).
func (m *Metrics) SetBudget(ctx context.Context, lease string, used, limit int64) {
	if m == nil {
		return
	}
	a := withAttrs(leaseAttr(lease))
	m.budgetUsed.Record(ctx, used, a)
	m.budgetLimit.Record(ctx, limit, a)
}

// AddRunOutcome adds n invocations with an outcome without the rest of RecordRun (n = 0 creates
// the series, so that increase() sees an outcome's first occurrence).
func (m *Metrics) AddRunOutcome(ctx context.Context, lease, outcome string, n int64) {
	if m == nil {
		return
	}
	m.runs.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelOutcome, outcome)))
}

// AddRetries adds push retries to a destination of a status class ("429", "5xx", "transport").
func (m *Metrics) AddRetries(ctx context.Context, lease, dest, status string, n int64) {
	if m == nil {
		return
	}
	m.retries.Add(ctx, n, withAttrs(leaseAttr(lease), destAttr(dest), attribute.String(LabelStatus, status)))
}

// AddCommits adds commits of a result without a duration (n = 0 creates the series).
func (m *Metrics) AddCommits(ctx context.Context, lease, result string, n int64) {
	if m == nil {
		return
	}
	m.commits.Add(ctx, n, withAttrs(leaseAttr(lease), attribute.String(LabelResult, result)))
}

// AddPushes adds pushes to a destination of a result without the rest of RecordPush (n = 0
// creates the series).
func (m *Metrics) AddPushes(ctx context.Context, lease, dest, result string, n int64) {
	if m == nil {
		return
	}
	m.pushes.Add(ctx, n, withAttrs(leaseAttr(lease), destAttr(dest), attribute.String(LabelResult, result)))
}
