package config

import (
	"net/url"
)

// Metrics configures the OpenTelemetry metrics: an OTLP/HTTP push (flushed before a run-once
// process exits) and the Prometheus /metrics endpoint of 'sf2loki schedule'.
type Metrics struct {
	OTLP               MetricsOTLP       `yaml:"otlp" desc:"OTLP/HTTP push of the metrics (a run-once process pushes once, before it exits)."`
	Prometheus         bool              `yaml:"prometheus" default:"true" desc:"Serve /metrics in the Prometheus text format on schedule.listen ('sf2loki schedule' only)."`
	ServiceName        string            `yaml:"service_name" default:"sf2loki" desc:"OpenTelemetry service.name (a Prometheus OTLP receiver turns it into the job label)."`
	ResourceAttributes map[string]string `yaml:"resource_attributes" desc:"Extra OpenTelemetry resource attributes (e.g. deployment.environment: prod)."`
}

// MetricsOTLP configures the OTLP/HTTP push.
type MetricsOTLP struct {
	Endpoint    string            `yaml:"endpoint" example:"http://otel-collector:4318/v1/metrics" desc:"Full OTLP/HTTP metrics URL (empty = no push, unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set)."`
	Headers     map[string]string `yaml:"headers" secret:"values" desc:"HTTP headers sent with every push (authentication of a hosted backend); values of credential headers (Authorization, X-API-Key, ...) are secrets, never printed."`
	Timeout     Duration          `yaml:"timeout" default:"5s" desc:"Timeout of one push; a run-once process waits at most this long for it before exiting."`
	Interval    Duration          `yaml:"interval" default:"1m" desc:"How often 'sf2loki schedule' pushes (run-once pushes once, at exit)."`
	Temporality string            `yaml:"temporality" default:"cumulative" enum:"cumulative|delta" desc:"cumulative (totals since the process started) or delta (changes since the last push; for collectors with deltatocumulative)."`
	Gzip        bool              `yaml:"gzip" desc:"Gzip the pushed body."`
	TLS         TLS               `yaml:"tls" desc:"TLS settings for the OTLP receiver."`
}

// validateMetrics checks the metrics section (path is "metrics").
func validateMetrics(m Metrics, path string, errs *Errors) {
	if e := m.OTLP.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			errs.add(path+".otlp.endpoint", "%q is not an absolute http(s) URL (e.g. http://otel-collector:4318/v1/metrics)", e)
		}
	}
	if m.OTLP.Timeout <= 0 {
		errs.add(path+".otlp.timeout", "must be positive")
	}
	if m.OTLP.Interval <= 0 {
		errs.add(path+".otlp.interval", "must be positive")
	}
	if (m.OTLP.TLS.CertFile == "") != (m.OTLP.TLS.KeyFile == "") {
		errs.add(path+".otlp.tls", "cert_file and key_file go together")
	}
}
