package obs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/obs/obstest"
)

// recordAll records every instrument once.
func recordAll(ctx context.Context, m *Metrics) {
	s := Stream{Lease: "sf2loki", Org: "prod", Source: "eventlogfile", EventType: "API"}
	m.RecordRun(ctx, RunFacts{Lease: "sf2loki", Outcome: "ok", Success: true, End: time.Unix(1_800_000_000, 0),
		Duration: 2 * time.Second, Budget: 3 * time.Minute, Claimed: true, Epoch: 7, LeaseWait: time.Millisecond,
		CASRetries: 1, Uncommitted: 0, FrozenKeys: 0})
	m.SetEpochJump(ctx, "sf2loki", 1)
	m.AddStoreWrites(ctx, "sf2loki", 1, 1)
	m.RecordCommit(ctx, "sf2loki", 3*time.Millisecond, ResultOK)
	m.SetCursorTime(ctx, "sf2loki", "org=prod:eventlogfile:API", time.Unix(1_799_990_000, 0))
	m.AddStream(ctx, s, StreamCounts{Ingested: 10, SampledOut: 1, Filtered: map[string]int64{"health_checks": 2}, Skipped: map[string]int64{"file_done": 1}})
	m.AddShipped(ctx, s, 6, 600)
	m.AddRejected(ctx, s, "bad_request", 1)
	m.AddDropped(ctx, "sf2loki", "bad_request", 1)
	m.AddRestamped(ctx, "sf2loki", "too_far_behind", 1)
	m.AddLabelOverflow(ctx, "sf2loki", "user_id", 1)
	m.Lag(s).Observe(ctx, 90*time.Second)
	m.RecordPush(ctx, PushFacts{Lease: "sf2loki", Destination: "default", Took: 20 * time.Millisecond, Result: ResultPartial, Requests: 3, Splits: 1,
		Truncated: 1, RetriesByStatus: map[string]int{"429": 1}, WireBytes: 300, EncodedBytes: 900})
	m.AddAPICalls(ctx, "sf2loki", "prod", "eventlogfile", "query", 2)
	m.SetAPIUsage(ctx, "prod", 1500, 100000)
	m.SetOrgLimit(ctx, "prod", "DataStorageMB", 1024, 1000)
	m.SetReplayAge(ctx, "sf2loki", "prod", "/event/LoginEventStream", time.Hour)
	m.AddSourceEvent(ctx, "sf2loki", "prod", "eventlogfile", "timestamp_fallback", 3)
	m.SetBudget(ctx, "sf2loki", 1<<20, 1<<30)
}

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return obstest.Parse(t, rec.Body)
}

// TestPrometheusNamesMatchCatalog records every instrument and checks that /metrics exposes
// exactly the catalog's Prometheus names, kinds and label names: the names docs and dashboards
// use are the names users get.
func TestPrometheusNamesMatchCatalog(t *testing.T) {
	ctx := context.Background()
	m, err := NewMetrics(ctx, MetricsOptions{Prometheus: true, ServiceVersion: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()
	recordAll(ctx, m)
	fams := scrape(t, m.Handler())

	var got []string
	for name := range fams {
		if strings.HasPrefix(name, "sf2loki_") {
			got = append(got, name)
		}
	}
	var want []string
	for _, in := range Instruments() {
		want = append(want, in.PrometheusName())
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("exposed names differ from the catalog\n got: %v\nwant: %v", got, want)
	}
	types := map[InstrumentKind]dto.MetricType{KindCounter: dto.MetricType_COUNTER, KindGauge: dto.MetricType_GAUGE, KindHistogram: dto.MetricType_HISTOGRAM}
	for _, in := range Instruments() {
		f := fams[in.PrometheusName()]
		if f.GetType() != types[in.Kind] {
			t.Errorf("%s: type %s, want %s", in.PrometheusName(), f.GetType(), in.Kind)
		}
		for _, mm := range f.GetMetric() {
			var names []string
			for _, l := range mm.GetLabel() {
				if l.GetName() != "le" {
					names = append(names, l.GetName())
				}
			}
			want := slices.Clone(in.Labels)
			sort.Strings(names)
			sort.Strings(want)
			if !slices.Equal(names, want) {
				t.Errorf("%s: labels %v, want %v", in.PrometheusName(), names, want)
			}
		}
	}
	if v := fams["sf2loki_build_info"].GetMetric()[0].GetLabel()[0].GetValue(); v != "v1.2.3" {
		t.Errorf("build_info version %q", v)
	}
	if v := fams["sf2loki_salesforce_api_remaining"].GetMetric()[0].GetGauge().GetValue(); v != 98500 {
		t.Errorf("api remaining %v, want 98500", v)
	}
}

// TestCatalogHasNoDuplicates keeps every instrument's series names unique.
func TestCatalogHasNoDuplicates(t *testing.T) {
	seen := map[string]bool{}
	for _, in := range Instruments() {
		for _, s := range in.PrometheusSeries() {
			if seen[s] {
				t.Errorf("series %s produced twice", s)
			}
			seen[s] = true
			if got, ok := SeriesInstrument(s); !ok || got.Name != in.Name {
				t.Errorf("SeriesInstrument(%s) = %v, %v", s, got.Name, ok)
			}
		}
		if in.Description == "" || len(in.Labels) == 0 && in.Name != "sf2loki_build_info" {
			t.Errorf("%s: description or labels missing", in.Name)
		}
	}
}

// otlpReceiver is an in-process OTLP/HTTP metrics receiver.
type otlpReceiver struct {
	mu   sync.Mutex
	reqs []*colmetricpb.ExportMetricsServiceRequest
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/metrics" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var msg colmetricpb.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, &msg)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	_, _ = w.Write(out)
}

func (r *otlpReceiver) metrics() map[string]*metricpb.Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*metricpb.Metric{}
	for _, req := range r.reqs {
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

// TestOTLPPushAtShutdown: a run-once process pushes once, synchronously, when it shuts the
// metrics down; with delta temporality counters arrive as deltas.
func TestOTLPPushAtShutdown(t *testing.T) {
	for _, tc := range []struct {
		temporality Temporality
		want        metricpb.AggregationTemporality
	}{
		{Cumulative, metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE},
		{Delta, metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA},
	} {
		t.Run(string(tc.temporality), func(t *testing.T) {
			rcv := &otlpReceiver{}
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			ctx := context.Background()
			m, err := NewMetrics(ctx, MetricsOptions{OTLP: OTLPOptions{Endpoint: srv.URL + "/v1/metrics", Temporality: tc.temporality, Interval: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			if !m.Pushes() {
				t.Fatal("Pushes() is false with an endpoint")
			}
			recordAll(ctx, m)
			if n := len(rcv.metrics()); n != 0 {
				t.Fatalf("%d metrics pushed before shutdown", n)
			}
			if err := m.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			got := rcv.metrics()
			for _, in := range Instruments() {
				if got[in.Name] == nil {
					t.Errorf("instrument %s not pushed", in.Name)
				}
			}
			runs := got["sf2loki_runs"].GetSum()
			if runs.GetAggregationTemporality() != tc.want || !runs.GetIsMonotonic() {
				t.Fatalf("sf2loki_runs: temporality %s monotonic %v", runs.GetAggregationTemporality(), runs.GetIsMonotonic())
			}
			if v := runs.GetDataPoints()[0].GetAsInt(); v != 1 {
				t.Fatalf("sf2loki_runs = %d, want 1", v)
			}
		})
	}
}

// TestOTLPBadTemporality is refused at setup.
func TestOTLPBadTemporality(t *testing.T) {
	_, err := NewMetrics(context.Background(), MetricsOptions{OTLP: OTLPOptions{Endpoint: "http://127.0.0.1:1/v1/metrics", Temporality: "weekly"}})
	if err == nil {
		t.Fatal("no error for an unknown temporality")
	}
}

// TestHandlerWithoutPrometheus answers 404.
func TestHandlerWithoutPrometheus(t *testing.T) {
	m, err := NewMetrics(context.Background(), MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404", rec.Code)
	}
}

// TestNoReaderNoMetrics: without Prometheus or an OTLP endpoint nothing would read the
// instruments, so NewMetrics returns nil (which records nothing) and still checks the options.
func TestNoReaderNoMetrics(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "")
	m, err := NewMetrics(context.Background(), MetricsOptions{ServiceVersion: "v1.2.3"})
	if err != nil || m != nil {
		t.Fatalf("NewMetrics without a reader = %v, %v; want nil, nil", m, err)
	}
	m.RecordPush(context.Background(), PushFacts{Lease: "l", Destination: "d", Result: ResultOK})
	if r := m.Instrument("l", &job.Deps{}, &job.Options{}); r != nil {
		t.Fatalf("a nil Metrics instrumented a run")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://127.0.0.1:1/v1/metrics")
	if m, err = NewMetrics(context.Background(), MetricsOptions{}); err != nil || m == nil {
		t.Fatalf("NewMetrics with the OTLP endpoint in the environment = %v, %v; want metrics", m, err)
	}
	m.Close(context.Background())
}
