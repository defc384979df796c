package obs

// InstrumentKind is the kind of an instrument.
type InstrumentKind string

// Instrument kinds.
const (
	KindCounter   InstrumentKind = "counter"
	KindGauge     InstrumentKind = "gauge"
	KindHistogram InstrumentKind = "histogram"
)

// Instrument describes one sf2loki instrument: the catalog docs/metrics.md, the dashboards and
// their tests are checked against.
type Instrument struct {
	// Name is the OpenTelemetry instrument name (already in Prometheus form, without the
	// suffixes the exporters add).
	Name string
	Kind InstrumentKind
	// Unit is the UCUM unit ("s", "By" or "" for counts).
	Unit string
	// Labels are the attribute names the instrument is recorded with, all low-cardinality.
	Labels      []string
	Description string
	// Buckets are a histogram's explicit bucket boundaries.
	Buckets []float64
}

// PrometheusName is the name the instrument has in Prometheus (scraped from /metrics, or
// translated from OTLP with suffixes): counters end in _total.
func (i Instrument) PrometheusName() string {
	if i.Kind == KindCounter {
		return i.Name + "_total"
	}
	return i.Name
}

// PrometheusSeries lists every series name the instrument produces in Prometheus: a
// histogram's _bucket, _sum and _count.
func (i Instrument) PrometheusSeries() []string {
	if i.Kind == KindHistogram {
		return []string{i.Name + "_bucket", i.Name + "_sum", i.Name + "_count"}
	}
	return []string{i.PrometheusName()}
}

var (
	lagBuckets      = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 259200}
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	runBuckets      = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300, 600, 1200}
)

// Label names of the instruments.
const (
	LabelLease     = "lease"      // the lease name: one per job group and backfill
	LabelOutcome   = "outcome"    // a run's outcome (ok, busy, fenced, ...)
	LabelOrg       = "org"        // the org's name in the orgs list (absent for the single-org form)
	LabelSource    = "source"     // eventlogfile, soql, apexlog, pubsub
	LabelEventType = "event_type" // the records' event_type label (EventLogFile type, object, topic)
	LabelReason    = "reason"
	LabelRule      = "rule"   // a drop_row rule's name
	LabelResult    = "result" // ok, partial, failed, fenced
	LabelStatus    = "status" // an HTTP status code, or "transport"
	LabelKey       = "key"    // a checkpoint key (one per configured type, object or topic)
	LabelKind      = "kind"   // a Salesforce request kind (query, describe, eventlogfile_download, ...)
	LabelTopic     = "topic"
	LabelEvent     = "event" // a source's named event (late_rows, cursor_reset, file_abandoned, ...)
	LabelVersion   = "version"
	LabelLimit     = "limit" // an org limit of /limits (DailyApiRequests, DataStorageMB, ...)
	// LabelDestination names the receiver and tenant of a push ("default" for sink.loki without
	// a tenant; see docs/configuration.md, per-org destinations).
	LabelDestination = "destination"
	// LabelLabel names a promoted stream label (the label cardinality guard).
	LabelLabel = "label"
)

var streamLabels = []string{LabelLease, LabelOrg, LabelSource, LabelEventType}

func with(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

// catalog is every instrument sf2loki records, in the order docs/metrics.md lists them.
var catalog = []Instrument{
	// Runs.
	{Name: "sf2loki_build_info", Kind: KindGauge, Labels: []string{LabelVersion}, Description: "Always 1; the version label names the running build."},
	{Name: "sf2loki_runs", Kind: KindCounter, Labels: []string{LabelLease, LabelOutcome}, Description: "Invocations by outcome (ok, busy, fenced, unavailable, partial, integrity, config_error, internal_error, budget_paused, dry_run)."},
	{Name: "sf2loki_last_run_timestamp_seconds", Kind: KindGauge, Unit: "s", Labels: []string{LabelLease}, Description: "Unix time at which the last invocation ended, whatever its outcome."},
	{Name: "sf2loki_last_success_timestamp_seconds", Kind: KindGauge, Unit: "s", Labels: []string{LabelLease}, Description: "Unix time at which the last invocation with outcome ok ended. Alert on its age (with max_over_time: a job that stops running stops pushing)."},
	{Name: "sf2loki_run_duration_seconds", Kind: KindHistogram, Unit: "s", Labels: []string{LabelLease, LabelOutcome}, Description: "Wall time of an invocation.", Buckets: runBuckets},
	{Name: "sf2loki_last_run_duration_seconds", Kind: KindGauge, Unit: "s", Labels: []string{LabelLease}, Description: "Wall time of the last invocation; compare with sf2loki_run_budget_seconds."},
	{Name: "sf2loki_run_budget_seconds", Kind: KindGauge, Unit: "s", Labels: []string{LabelLease}, Description: "The invocation's time budget (run.max_duration)."},
	// Lease and store.
	{Name: "sf2loki_epoch", Kind: KindGauge, Labels: []string{LabelLease}, Description: "Fencing epoch the last invocation claimed (0 when it claimed none)."},
	{Name: "sf2loki_epoch_jump", Kind: KindGauge, Labels: []string{LabelLease}, Description: "How far the last claimed epoch is above the document's previous fence epoch (1 normally; more after a lease recreation or a raised floor)."},
	{Name: "sf2loki_lease_wait_seconds", Kind: KindHistogram, Unit: "s", Labels: []string{LabelLease}, Description: "Time spent acquiring the lease and claiming the document.", Buckets: durationBuckets},
	{Name: "sf2loki_store_cas_retries", Kind: KindCounter, Labels: []string{LabelLease}, Description: "Conditional writes of the checkpoint document that were repeated (precondition conflicts and writes proven not to have landed)."},
	{Name: "sf2loki_store_cas_conflicts", Kind: KindCounter, Labels: []string{LabelLease}, Description: "Precondition failures of conditional writes (each followed by a re-read)."},
	{Name: "sf2loki_store_lost_ack_recoveries", Kind: KindCounter, Labels: []string{LabelLease}, Description: "Ambiguous writes (timeout, lost answer) that a re-read proved had landed."},
	{Name: "sf2loki_commits", Kind: KindCounter, Labels: []string{LabelLease, LabelResult}, Description: "Checkpoint commits by result (ok, fenced, failed)."},
	{Name: "sf2loki_commit_duration_seconds", Kind: KindHistogram, Unit: "s", Labels: []string{LabelLease}, Description: "Time of one checkpoint commit, verification included.", Buckets: durationBuckets},
	{Name: "sf2loki_cursor_timestamp_seconds", Kind: KindGauge, Unit: "s", Labels: []string{LabelLease, LabelKey}, Description: "Time position of a key's committed cursor (EventLogFile CreatedDate, SOQL timestamp, ApexLog StartTime, Pub/Sub last advance)."},
	{Name: "sf2loki_frozen_keys", Kind: KindGauge, Labels: []string{LabelLease}, Description: "Keys that stopped advancing in the last invocation (push failure or on_permanent_reject: freeze)."},
	// Records.
	{Name: "sf2loki_records_ingested", Kind: KindCounter, Labels: streamLabels, Description: "Records the sources yielded: entries and cursor-only records."},
	{Name: "sf2loki_records_shipped", Kind: KindCounter, Labels: streamLabels, Description: "Entries the receiver accepted."},
	{Name: "sf2loki_records_shipped_bytes", Kind: KindCounter, Unit: "By", Labels: streamLabels, Description: "Line bytes of the entries the receiver accepted."},
	{Name: "sf2loki_records_rejected", Kind: KindCounter, Labels: with(streamLabels, LabelReason), Description: "Entries rejected for good by the receiver or refused by the client before sending, by Loki's reason (too_far_behind, greater_than_max_sample_age, too_far_in_future, line_too_long, disallowed_structured_metadata, structured_metadata_too_large, label_value_too_long, ...; bad_request for a rule the client cannot name, too_large, invalid_labels, invalid_timestamp)."},
	{Name: "sf2loki_records_dropped", Kind: KindCounter, Labels: []string{LabelLease, LabelReason}, Description: "Entries the run discarded: permanent rejections under on_permanent_reject: drop (by Loki's reason, as sf2loki_records_rejected) and the egress budget's drop policy (reason budget)."},
	{Name: "sf2loki_records_label_overflow", Kind: KindCounter, Labels: []string{LabelLease, LabelLabel}, Description: "Entries shipped with a promoted label set to the overflow value because the label had taken shape.label_cardinality.max_values_per_day distinct values today (the own value is in structured metadata <label>_original)."},
	{Name: "sf2loki_records_restamped", Kind: KindCounter, Labels: []string{LabelLease, LabelReason}, Description: "Entries shipped with another timestamp than their own (kept in structured metadata event_time), by Loki's reason for the refusal the move avoided: too_far_behind, greater_than_max_sample_age, too_far_in_future (docs/ordering.md)."},
	{Name: "sf2loki_records_sampled_out", Kind: KindCounter, Labels: streamLabels, Description: "Records removed by deterministic sampling."},
	{Name: "sf2loki_records_filtered", Kind: KindCounter, Labels: with(streamLabels, LabelRule), Description: "Records removed by a drop_row rule."},
	{Name: "sf2loki_records_skipped", Kind: KindCounter, Labels: with(streamLabels, LabelReason), Description: "Other cursor-only records (empty or finished files, oversized rows, keepalives, ...)."},
	{Name: "sf2loki_records_uncommitted", Kind: KindCounter, Labels: []string{LabelLease}, Description: "Entries accepted by the receiver whose cursor could not be committed (shipped again next run)."},
	{Name: "sf2loki_ingest_lag_seconds", Kind: KindHistogram, Unit: "s", Labels: streamLabels, Description: "Age of an entry (now minus its timestamp) when the receiver accepted it, observed for one accepted entry in 16 per stream (so _count is not a record count: use sf2loki_records_shipped_total).", Buckets: lagBuckets},
	// Loki.
	{Name: "sf2loki_loki_pushes", Kind: KindCounter, Labels: []string{LabelLease, LabelDestination, LabelResult}, Description: "Pushes by result: ok (all accepted), partial (some rejected), failed (some not delivered)."},
	{Name: "sf2loki_loki_push_duration_seconds", Kind: KindHistogram, Unit: "s", Labels: []string{LabelLease, LabelDestination}, Description: "Time of one push, retries and splits included.", Buckets: durationBuckets},
	{Name: "sf2loki_loki_requests", Kind: KindCounter, Labels: []string{LabelLease, LabelDestination}, Description: "HTTP requests sent to the receiver, retries included."},
	{Name: "sf2loki_loki_retries", Kind: KindCounter, Labels: []string{LabelLease, LabelDestination, LabelStatus}, Description: "Requests repeated after a 429, a 5xx or a transport error (status transport)."},
	{Name: "sf2loki_loki_splits", Kind: KindCounter, Labels: []string{LabelLease, LabelDestination}, Description: "Requests cut in halves after a 413, a 400 or repeated 429s."},
	{Name: "sf2loki_loki_resent_entries", Kind: KindCounter, Labels: []string{LabelLease, LabelDestination}, Description: "Entries sent again after a 400 the client could not predict: Loki had stored the valid entries of the request, so a receiver that keeps exact duplicates may hold them twice."},
	{Name: "sf2loki_loki_pushed_bytes", Kind: KindCounter, Unit: "By", Labels: []string{LabelLease, LabelDestination}, Description: "Request body bytes sent (compressed, every attempt): the ingest volume Loki bills."},
	{Name: "sf2loki_loki_encoded_bytes", Kind: KindCounter, Unit: "By", Labels: []string{LabelLease, LabelDestination}, Description: "Uncompressed encoded size of the requests built."},
	{Name: "sf2loki_loki_truncated_lines", Kind: KindCounter, Labels: []string{LabelLease, LabelDestination}, Description: "Lines cut by the line cap (sink.loki.line_max_bytes)."},
	// Egress budget.
	{Name: "sf2loki_egress_budget_used_bytes", Kind: KindGauge, Unit: "By", Labels: []string{LabelLease}, Description: "Bytes counted against today's (UTC) egress budget, as committed in the checkpoint document."},
	{Name: "sf2loki_egress_budget_limit_bytes", Kind: KindGauge, Unit: "By", Labels: []string{LabelLease}, Description: "The daily egress budget (0 when none is set)."},
	// Salesforce.
	{Name: "sf2loki_salesforce_api_calls", Kind: KindCounter, Labels: []string{LabelLease, LabelOrg, LabelSource, LabelKind}, Description: "Salesforce requests by kind, attributed to the source that made them."},
	{Name: "sf2loki_salesforce_api_remaining", Kind: KindGauge, Labels: []string{LabelOrg}, Description: "The org's remaining daily API requests (limit minus used, from Sforce-Limit-Info)."},
	{Name: "sf2loki_salesforce_api_limit", Kind: KindGauge, Labels: []string{LabelOrg}, Description: "The org's daily API request limit (Sforce-Limit-Info)."},
	{Name: "sf2loki_salesforce_limit_max", Kind: KindGauge, Labels: []string{LabelOrg, LabelLimit}, Description: "An org limit's maximum, from the last /limits sample (salesforce.limits.interval)."},
	{Name: "sf2loki_salesforce_limit_remaining", Kind: KindGauge, Labels: []string{LabelOrg, LabelLimit}, Description: "An org limit's remaining amount, from the last /limits sample (salesforce.limits.interval)."},
	{Name: "sf2loki_pubsub_replay_id_age_seconds", Kind: KindGauge, Unit: "s", Labels: []string{LabelLease, LabelOrg, LabelTopic}, Description: "How old a topic's stored position was when the run started: since its replay id last advanced, or, for a position holding only latest_at, since that moment (Salesforce keeps about 72 hours)."},
	{Name: "sf2loki_source_events", Kind: KindCounter, Labels: []string{LabelLease, LabelOrg, LabelSource, LabelEvent}, Description: "Named events the sources count (late_rows, cursor_reset, file_abandoned, file_regenerated, timestamp_fallback, ...)."},
}

// Instruments returns the catalog of every instrument sf2loki records.
func Instruments() []Instrument {
	out := make([]Instrument, len(catalog))
	copy(out, catalog)
	return out
}

// lookupInstrument returns the catalog entry called name.
func lookupInstrument(name string) (Instrument, bool) {
	for _, i := range catalog {
		if i.Name == name {
			return i, true
		}
	}
	return Instrument{}, false
}

// SeriesInstrument returns the instrument a Prometheus series name belongs to (a histogram's
// _bucket, _sum and _count included).
func SeriesInstrument(series string) (Instrument, bool) {
	for _, i := range catalog {
		for _, s := range i.PrometheusSeries() {
			if s == series {
				return i, true
			}
		}
	}
	return Instrument{}, false
}
