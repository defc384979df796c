package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/obs/obstest"
	"github.com/sf2loki/sf2loki/schedule"
)

// metricsFixture is a simulated org with EventLogFiles (one of them empty), a strict receiver,
// and a configuration shipping them with a drop_row rule, sampling and a daily budget, so that a
// single run exercises the record instruments.
func metricsFixture(t *testing.T, extra string) (cfgPath string, receiver *simloki.Running) {
	t.Helper()
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	org := simsf.New(simsf.Options{Seed: 11, Logger: slog.New(slog.DiscardHandler)})
	org.AddUser("metrics@example.com", simsf.AllPermissions())
	if err := org.AddJWTApp("3MVG9-metrics", keys.Certificate, "metrics@example.com"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	hour := now.Add(-2 * time.Hour).Truncate(time.Hour)
	for _, spec := range []simsf.EventLogFileSpec{
		{EventType: "API", Rows: 300},
		{EventType: "Login", Rows: 200},
		{EventType: "Login", Rows: -1, Sequence: 2}, // empty: a cursor-only record
	} {
		spec.Interval, spec.LogDate, spec.CreatedDate = simsf.IntervalHourly, hour, now.Add(-30*time.Minute)
		if _, err := org.AddEventLogFile(spec); err != nil {
			t.Fatal(err)
		}
	}
	sf, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sf.Close() })
	receiver = simloki.Start(t, simloki.Options{})
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyPath, keys.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`salesforce:
  login_url: %s
  client_id: 3MVG9-metrics
  username: metrics@example.com
  private_key_file: %s
sources:
  eventlogfile:
    enabled: true
    interval: Hourly
    event_types: [API, Login]
    lookback: 6h
shape:
  transforms:
    - op: drop_row
      name: all_logins
      types: [Login]
  types:
    - type: API
      sample_rate: 0.5
sink:
  loki:
    url: %s
state:
  file:
    path: %s
lease:
  name: metrics-test
egress:
  daily_bytes: 1GiB
log:
  level: warn
%s`, sf.URL, keyPath, receiver.PushURL(), filepath.Join(dir, "state.json"), extra)
	cfgPath = filepath.Join(dir, "sf2loki.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, receiver
}

// instrumentsOfARun are the instruments one run of metricsFixture records. The others need
// facts this run does not have: a Pub/Sub topic (replay id age), source events, the org's API
// usage and the store's conflict counts (not yet handed to the metrics, see docs/metrics.md).
var instrumentsOfARun = []string{
	"sf2loki_build_info", "sf2loki_runs", "sf2loki_last_run_timestamp_seconds", "sf2loki_last_success_timestamp_seconds",
	"sf2loki_run_duration_seconds", "sf2loki_last_run_duration_seconds", "sf2loki_run_budget_seconds",
	"sf2loki_epoch", "sf2loki_lease_wait_seconds", "sf2loki_store_cas_retries", "sf2loki_commits",
	"sf2loki_commit_duration_seconds", "sf2loki_cursor_timestamp_seconds", "sf2loki_frozen_keys",
	"sf2loki_records_ingested", "sf2loki_records_shipped", "sf2loki_records_shipped_bytes", "sf2loki_records_rejected",
	"sf2loki_records_dropped", "sf2loki_records_sampled_out", "sf2loki_records_filtered", "sf2loki_records_skipped",
	"sf2loki_records_uncommitted", "sf2loki_ingest_lag_seconds", "sf2loki_loki_pushes", "sf2loki_loki_push_duration_seconds",
	"sf2loki_loki_requests", "sf2loki_loki_retries", "sf2loki_loki_splits", "sf2loki_loki_pushed_bytes",
	"sf2loki_loki_encoded_bytes", "sf2loki_loki_truncated_lines", "sf2loki_egress_budget_used_bytes",
	"sf2loki_egress_budget_limit_bytes", "sf2loki_salesforce_api_calls",
}

// TestRunOncePushesMetricsBeforeExit runs run-once with an OTLP endpoint and checks that the
// push reached an in-process OTLP/HTTP receiver by the time the command returned, with the
// run's outcome and record counts.
func TestRunOncePushesMetricsBeforeExit(t *testing.T) {
	cfgPath, receiver := metricsFixture(t, "")
	rcv := &otlpSink{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", srv.URL+"/v1/metrics")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"sf2loki", "run-once", "--config", cfgPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := rcv.metrics() // read right after the command returned: the push happened before
	var rep job.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	if rep.Outcome != job.OutcomeOK || rep.Records == 0 || int(rep.Records) != receiver.Count() {
		t.Fatalf("run: outcome %s, %d records, receiver has %d", rep.Outcome, rep.Records, receiver.Count())
	}
	for _, name := range instrumentsOfARun {
		if got[name] == nil {
			t.Errorf("instrument %s was not pushed", name)
		}
	}
	if v := sumOf(got["sf2loki_runs"], map[string]string{"lease": "metrics-test", "outcome": "ok"}); v != 1 {
		t.Errorf("sf2loki_runs{outcome=ok} = %v, want 1", v)
	}
	if v := sumOf(got["sf2loki_records_shipped"], nil); v != float64(rep.Records) {
		t.Errorf("sf2loki_records_shipped = %v, want the report's %d", v, rep.Records)
	}
	if v := sumOf(got["sf2loki_records_filtered"], map[string]string{"rule": "all_logins", "event_type": "Login"}); v != 200 {
		t.Errorf("sf2loki_records_filtered{rule=all_logins} = %v, want 200", v)
	}
	shipped, sampled := sumOf(got["sf2loki_records_shipped"], map[string]string{"event_type": "API"}), sumOf(got["sf2loki_records_sampled_out"], map[string]string{"event_type": "API"})
	if shipped+sampled != 300 || sampled == 0 {
		t.Errorf("API: %v shipped + %v sampled out, want 300 with some sampled out", shipped, sampled)
	}
}

// TestScheduleServesMetrics runs the schedule command, waits for its first tick to finish and
// scrapes /metrics on schedule.listen.
func TestScheduleServesMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cfgPath, receiver := metricsFixture(t, "schedule:\n  spec: \"@every 1s\"\n  jitter: 0s\n")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testenv.LockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- NewApp(&stdout, &stderr).RunContext(ctx, []string{"sf2loki", "schedule", "--config", cfgPath, "--listen", addr})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("schedule: %v", err)
		}
	}()
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		var health struct {
			Jobs map[string]schedule.TickState `json:"jobs"`
		}
		if err := getJSON(base+"/healthz", &health); err == nil && health.Jobs["default"].LastOutcome != "" {
			if o := health.Jobs["default"].LastOutcome; o != job.OutcomeOK {
				t.Fatalf("first tick ended %s: %s", o, stderr.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tick finished within a minute: %s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	fams := obstest.Parse(t, resp.Body)
	for _, name := range instrumentsOfARun {
		in, ok := lookupByName(name)
		if !ok {
			t.Fatalf("%s is not in the catalog", name)
		}
		if fams[in.PrometheusName()] == nil {
			t.Errorf("/metrics has no %s", in.PrometheusName())
		}
	}
	if v, ok := obstest.Sample(fams, "sf2loki_runs_total", map[string]string{"lease": "metrics-test", "outcome": "ok"}); !ok || v < 1 {
		t.Errorf("sf2loki_runs_total{outcome=ok} = %v (found %v), want >= 1", v, ok)
	}
	if v, ok := obstest.Sample(fams, "sf2loki_records_shipped_total", map[string]string{"event_type": "API"}); !ok || v == 0 || int(v) > receiver.Count() {
		t.Errorf("sf2loki_records_shipped_total{event_type=API} = %v, receiver has %d", v, receiver.Count())
	}
}

func lookupByName(name string) (obs.Instrument, bool) {
	for _, in := range obs.Instruments() {
		if in.Name == name {
			return in, true
		}
	}
	return obs.Instrument{}, false
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url) //nolint:gosec,noctx // test helper on loopback
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// otlpSink is an in-process OTLP/HTTP metrics receiver.
type otlpSink struct {
	mu   sync.Mutex
	reqs []*colmetricpb.ExportMetricsServiceRequest
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/metrics" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-protobuf") {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var msg colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.reqs = append(o.reqs, &msg)
	o.mu.Unlock()
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// metrics returns the last pushed data of every metric.
func (o *otlpSink) metrics() map[string]*metricpb.Metric {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]*metricpb.Metric{}
	for _, req := range o.reqs {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					out[m.GetName()] = m
				}
			}
		}
	}
	return out
}

// sumOf adds the values of a counter's or gauge's points whose attributes include want.
func sumOf(m *metricpb.Metric, want map[string]string) float64 {
	var points []*metricpb.NumberDataPoint
	switch {
	case m.GetSum() != nil:
		points = m.GetSum().GetDataPoints()
	case m.GetGauge() != nil:
		points = m.GetGauge().GetDataPoints()
	}
	total := 0.0
	for _, p := range points {
		match := 0
		for _, kv := range p.GetAttributes() {
			if v, ok := want[kv.GetKey()]; ok && v == kv.GetValue().GetStringValue() {
				match++
			}
		}
		if match != len(want) {
			continue
		}
		total += float64(p.GetAsInt()) + p.GetAsDouble()
	}
	return total
}
