package obs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/obs/obstest"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/store"
)

// fakeStream yields the given records, then io.EOF.
type fakeStream struct {
	key  string
	recs []source.Record
}

func (f *fakeStream) Key() string  { return f.key }
func (f *fakeStream) Close() error { return nil }
func (f *fakeStream) Next(_ context.Context, rec *source.Record) error {
	if len(f.recs) == 0 {
		return io.EOF
	}
	*rec = f.recs[0]
	f.recs = f.recs[1:]
	return nil
}

type fakeSource struct{ streams []source.Stream }

func (f *fakeSource) Name() string            { return "eventlogfile" }
func (f *fakeSource) Calls() map[string]int64 { return nil }
func (f *fakeSource) CursorTime(string, json.RawMessage) (time.Time, error) {
	return time.Time{}, nil
}
func (f *fakeSource) Open(context.Context, source.OpenRequest) ([]source.Stream, error) {
	return f.streams, nil
}

// TestRunRecorderCountsWhatARunDid drives the recorder the way job.Run and the sources do and
// checks the instruments: records by stream and skip reason, pushes, rejections, commits, the
// run's outcome and gauges, API calls, source events and cursor times.
func TestRunRecorderCountsWhatARunDid(t *testing.T) {
	ctx := context.Background()
	m, err := NewMetrics(ctx, MetricsOptions{Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	labels := loki.NewLabels(loki.Label{Name: "source", Value: "eventlogfile"}, loki.Label{Name: "event_type", Value: "API"}, loki.Label{Name: "org", Value: "prod"})
	entry := func(line string) source.Record {
		return source.Record{Entry: loki.Entry{Timestamp: now.Add(-90 * time.Second), Labels: labels, Line: line}}
	}
	streamRecs := []source.Record{
		entry("aaaa"), entry("bbbbbb"), entry("cc"),
		{Skip: true, SkipReason: shape.SkipSampled},
		{Skip: true, SkipReason: "drop_row:health_checks"},
		{Skip: true, SkipReason: "drop_row:health_checks"},
		{Skip: true, SkipReason: "file_done"},
	}
	rec := m.NewRunRecorder("sf2loki-test")
	rec.now = func() time.Time { return now }
	src := rec.Source(&fakeSource{streams: []source.Stream{
		&fakeStream{key: "eventlogfile:API", recs: streamRecs},
		&fakeStream{key: "eventlogfile:Login", recs: []source.Record{{Skip: true, SkipReason: "empty_file"}}},
	}}, "prod")
	streams, err := src.Open(ctx, source.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []loki.Entry
	for _, s := range streams {
		for {
			var r source.Record
			err := s.Next(ctx, &r)
			if errors.Is(err, io.EOF) {
				break
			}
			if !r.Skip {
				entries = append(entries, r.Entry)
			}
		}
	}
	res := &loki.Result{
		Outcomes: []loki.Outcome{loki.Accepted, loki.Accepted, loki.Rejected},
		Accepted: []uint64{0, 1}, Rejected: []loki.Rejection{{Index: 2, Ref: 2, Reason: loki.ReasonBadRequest, Status: 400}},
		Requests: 3, Retries: 1, Splits: 1, WireBytes: 100, EncodedBytes: 300,
	}
	rec.Pushed("tenant-a", entries, res, 30*time.Millisecond)
	rec.Committed(5*time.Millisecond, nil)
	rec.Committed(5*time.Millisecond, store.ErrFenced)
	rep := &job.Report{
		Outcome: job.OutcomeFenced, Epoch: 12, StartedAt: now.Add(-2 * time.Second), Duration: job.Millis(2 * time.Second),
		LeaseWait: job.Millis(time.Millisecond), CASRetries: 2,
		Sources: map[string]*job.SourceReport{
			"org=prod:eventlogfile": {Org: "prod", Source: "eventlogfile", Records: 2, APICalls: map[string]int64{"query": 1, "eventlogfile_download": 2},
				Events: map[string]int64{"timestamp_fallback": 4}},
			"org=prod:pubsub": {Org: "prod", Source: "pubsub", Events: map[string]int64{pubsub.ReplayAgeEvent("/event/LoginEventStream"): 3600}},
		},
		Cursors:       map[string]job.CursorChange{"org=prod:eventlogfile:API": {At: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}},
		Dropped:       map[string]int64{"bad_request": 1},
		LabelOverflow: map[string]int64{"user_id": 7},
		Egress:        &job.EgressReport{Day: "2026-03-01", Used: 1000, Budget: 5000},
	}
	m.RecordReport(ctx, "sf2loki-test", 3*time.Minute, rep, rec)

	fams := scrape(t, m.Handler())
	api := map[string]string{"lease": "sf2loki-test", "org": "prod", "source": "eventlogfile", "event_type": "API"}
	login := map[string]string{"lease": "sf2loki-test", "org": "prod", "source": "eventlogfile", "event_type": "Login"}
	lease := map[string]string{"lease": "sf2loki-test"}
	dest := merge(lease, "destination", "tenant-a") // the push's destination
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sf2loki_records_ingested_total", api, 7},
		{"sf2loki_records_ingested_total", login, 1},
		{"sf2loki_records_sampled_out_total", api, 1},
		{"sf2loki_records_filtered_total", merge(api, "rule", "health_checks"), 2},
		{"sf2loki_records_skipped_total", merge(api, "reason", "file_done"), 1},
		{"sf2loki_records_skipped_total", merge(login, "reason", "empty_file"), 1},
		{"sf2loki_records_shipped_total", api, 2},
		{"sf2loki_records_shipped_bytes_total", api, 10},
		{"sf2loki_records_shipped_total", login, 0},
		{"sf2loki_records_rejected_total", merge(api, "reason", "bad_request"), 1},
		{"sf2loki_records_rejected_total", merge(api, "reason", "too_far_behind"), 0},
		{"sf2loki_ingest_lag_seconds", api, 1}, // sampled: the first accepted entry of 16
		{"sf2loki_loki_pushes_total", merge(dest, "result", "partial"), 1},
		{"sf2loki_loki_pushes_total", merge(dest, "result", "failed"), 0},
		{"sf2loki_loki_requests_total", dest, 3},
		{"sf2loki_loki_splits_total", dest, 1},
		{"sf2loki_loki_pushed_bytes_total", dest, 100},
		{"sf2loki_loki_encoded_bytes_total", dest, 300},
		{"sf2loki_loki_retries_total", merge(dest, "status", "429"), 0},
		{"sf2loki_commits_total", merge(lease, "result", "ok"), 1},
		{"sf2loki_commits_total", merge(lease, "result", "fenced"), 1},
		{"sf2loki_runs_total", merge(lease, "outcome", "fenced"), 1},
		{"sf2loki_runs_total", merge(lease, "outcome", "ok"), 0},
		{"sf2loki_epoch", lease, 12},
		{"sf2loki_store_cas_retries_total", lease, 2},
		{"sf2loki_last_run_timestamp_seconds", lease, float64(now.Unix())},
		{"sf2loki_run_budget_seconds", lease, 180},
		{"sf2loki_records_dropped_total", merge(lease, "reason", "bad_request"), 1},
		{"sf2loki_records_dropped_total", merge(lease, "reason", "budget"), 0},
		{"sf2loki_records_label_overflow_total", merge(lease, "label", "user_id"), 7},
		{"sf2loki_egress_budget_used_bytes", lease, 1000},
		{"sf2loki_egress_budget_limit_bytes", lease, 5000},
		{"sf2loki_salesforce_api_calls_total", map[string]string{"org": "prod", "source": "eventlogfile", "kind": "eventlogfile_download"}, 2},
		{"sf2loki_source_events_total", map[string]string{"org": "prod", "source": "eventlogfile", "event": "timestamp_fallback"}, 4},
		{"sf2loki_pubsub_replay_id_age_seconds", map[string]string{"org": "prod", "topic": "/event/LoginEventStream"}, 3600},
		{"sf2loki_cursor_timestamp_seconds", map[string]string{"key": "org=prod:eventlogfile:API"}, float64(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Unix())},
	} {
		got, ok := obstest.Sample(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if _, ok := obstest.Sample(fams, "sf2loki_last_success_timestamp_seconds", lease); ok {
		t.Error("a fenced run set the last success time")
	}
}

func merge(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}
