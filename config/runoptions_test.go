package config

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/obs"
)

func TestMetricsOptions(t *testing.T) {
	m := Metrics{Prometheus: true, ServiceName: "sf2loki", ResourceAttributes: map[string]string{"deployment.environment": "prod"},
		OTLP: MetricsOTLP{Endpoint: "http://otel:4318/v1/metrics", Headers: map[string]string{"X-Tenant": "a"}, Timeout: Duration(3 * time.Second),
			Interval: Duration(time.Minute), Temporality: "delta", Gzip: true, TLS: TLS{CAFile: "ca.pem"}}}
	o := m.Options("v1.0.0", true)
	if !o.Prometheus || o.ServiceVersion != "v1.0.0" || o.OTLP.Temporality != obs.Delta || o.OTLP.Timeout != 3*time.Second ||
		o.OTLP.TLS.CAFile != "ca.pem" || !o.OTLP.Gzip || o.OTLP.Headers["X-Tenant"] != "a" || o.Attributes["deployment.environment"] != "prod" {
		t.Fatalf("options %+v", o)
	}
	if m.Options("v1.0.0", false).Prometheus {
		t.Fatal("a run-once process serves /metrics")
	}
}
