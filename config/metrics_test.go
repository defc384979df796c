package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateMetrics(t *testing.T) {
	good := Metrics{Prometheus: true, OTLP: MetricsOTLP{Endpoint: "https://otlp.example.com/v1/metrics", Timeout: Duration(5 * time.Second), Interval: Duration(time.Minute)}}
	for _, tc := range []struct {
		name string
		mod  func(*Metrics)
		key  string // "" = valid
	}{
		{"valid", func(*Metrics) {}, ""},
		{"no endpoint", func(m *Metrics) { m.OTLP.Endpoint = "" }, ""},
		{"relative endpoint", func(m *Metrics) { m.OTLP.Endpoint = "otel:4318" }, "metrics.otlp.endpoint"},
		{"grpc endpoint", func(m *Metrics) { m.OTLP.Endpoint = "grpc://otel:4317" }, "metrics.otlp.endpoint"},
		{"zero timeout", func(m *Metrics) { m.OTLP.Timeout = 0 }, "metrics.otlp.timeout"},
		{"zero interval", func(m *Metrics) { m.OTLP.Interval = 0 }, "metrics.otlp.interval"},
		{"cert without key", func(m *Metrics) { m.OTLP.TLS.CertFile = "c.pem" }, "metrics.otlp.tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := good
			tc.mod(&m)
			var errs Errors
			validateMetrics(m, "metrics", &errs)
			switch {
			case tc.key == "" && len(errs) > 0:
				t.Fatalf("unexpected errors: %v", errs)
			case tc.key != "" && (len(errs) != 1 || !strings.Contains(errs.Error(), tc.key)):
				t.Fatalf("errors %v, want one naming %s", errs, tc.key)
			}
		})
	}
}
