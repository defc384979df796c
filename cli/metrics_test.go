package cli

import (
	"io"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/obs"
)

func parseExposition(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// sample returns the value of the series of family name whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match != len(want) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsOptions(t *testing.T) {
	m := config.Metrics{Prometheus: true, ServiceName: "sf2loki", ResourceAttributes: map[string]string{"deployment.environment": "prod"},
		OTLP: config.MetricsOTLP{Endpoint: "http://otel:4318/v1/metrics", Headers: map[string]string{"X-Tenant": "a"}, Timeout: config.Duration(3 * time.Second),
			Interval: config.Duration(time.Minute), Temporality: "delta", Gzip: true, TLS: config.TLS{CAFile: "ca.pem"}}}
	o := metricsOptions(m, "v1.0.0", true)
	if !o.Prometheus || o.ServiceVersion != "v1.0.0" || o.OTLP.Temporality != obs.Delta || o.OTLP.Timeout != 3*time.Second ||
		o.OTLP.TLS.CAFile != "ca.pem" || !o.OTLP.Gzip || o.OTLP.Headers["X-Tenant"] != "a" || o.Attributes["deployment.environment"] != "prod" {
		t.Fatalf("options %+v", o)
	}
	if metricsOptions(m, "v1.0.0", false).Prometheus {
		t.Fatal("a run-once process serves /metrics")
	}
}
