package obs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Temporality says how the OTLP push reports counters and histograms.
type Temporality string

// Temporalities of MetricsOptions.OTLP.
const (
	// Cumulative reports totals since the process started (the OpenTelemetry default; what a
	// Prometheus OTLP receiver expects).
	Cumulative Temporality = "cumulative"
	// Delta reports what changed since the previous push: the natural form for a run-once
	// process that pushes once and exits (use with a collector's deltatocumulative processor
	// or a backend that accepts deltas).
	Delta Temporality = "delta"
)

// OTLPOptions configures the OTLP/HTTP push. The zero value (no Endpoint) pushes only when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT variable is set.
type OTLPOptions struct {
	// Endpoint is the full metrics URL, e.g. http://otel-collector:4318/v1/metrics.
	Endpoint string
	// Headers are sent with every push (authentication of a hosted backend).
	Headers map[string]string
	// Timeout bounds one push; zero means DefaultOTLPTimeout.
	Timeout time.Duration
	// Temporality is Cumulative (default) or Delta.
	Temporality Temporality
	// Interval is how often a long-running process (schedule) pushes; zero means
	// DefaultOTLPInterval. A run-once process pushes once, at Shutdown.
	Interval time.Duration
	// Gzip compresses the pushed body.
	Gzip bool
	// TLS configures certificate checks and client certificates.
	TLS OTLPTLS
}

// OTLPTLS configures TLS towards the OTLP receiver. The zero value uses the system roots.
type OTLPTLS struct {
	// CAFile is a PEM bundle of extra trusted roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key (mutual TLS); both or neither.
	CertFile, KeyFile string
	// ServerName overrides the name checked against the server certificate.
	ServerName string
	// InsecureSkipVerify disables certificate verification (only when asked for).
	InsecureSkipVerify bool
}

func (t OTLPTLS) config() (*tls.Config, error) {
	if t == (OTLPTLS{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // only when the operator asks
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificates found", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("a client certificate needs both the cert file and the key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Defaults of OTLPOptions.
const (
	DefaultOTLPTimeout  = 5 * time.Second
	DefaultOTLPInterval = time.Minute
)

// MetricsOptions configures NewMetrics. The zero value turns metrics off (NewMetrics returns
// nil).
type MetricsOptions struct {
	// OTLP configures the push.
	OTLP OTLPOptions
	// Prometheus makes Handler serve the instruments in the Prometheus text format (schedule
	// mode's /metrics).
	Prometheus bool
	// ServiceName, ServiceVersion and Attributes describe the process (OpenTelemetry resource;
	// a Prometheus OTLP receiver turns service.name into the job label). ServiceName defaults
	// to "sf2loki".
	ServiceName    string
	ServiceVersion string
	Attributes     map[string]string
	// Logger receives failed pushes of Push and Close (nil: discarded).
	Logger *slog.Logger
}

// Metrics owns the process's meter provider, its readers (OTLP push, Prometheus pull) and
// every sf2loki instrument. Its methods are safe for concurrent use; a nil *Metrics records
// nothing.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
	push     bool
	timeout  time.Duration // of one push
	log      *slog.Logger
	*instruments
}

// ErrMetricsSetup wraps every error NewMetrics returns.
var ErrMetricsSetup = errors.New("metrics setup")

// NewMetrics builds the meter provider and the instruments. With neither reader configured (no
// Prometheus, no OTLP endpoint in o or the environment) nothing would read what the instruments
// hold, so it returns nil, which records nothing: a run-once without an exporter then pays
// neither the provider's setup (about half a millisecond of a run with nothing to do) nor a
// recording per push and stream. The options are still checked.
func NewMetrics(ctx context.Context, o MetricsOptions) (*Metrics, error) {
	m := &Metrics{timeout: otlpTimeout(o.OTLP), log: o.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	res, err := metricsResource(o)
	if err != nil {
		return nil, fmt.Errorf("%w: resource: %w", ErrMetricsSetup, err)
	}
	popts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if o.Prometheus {
		m.registry = prometheus.NewRegistry()
		exp, err := otelprom.New(
			otelprom.WithRegisterer(m.registry),
			otelprom.WithoutScopeInfo(),
			otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		)
		if err != nil {
			return nil, fmt.Errorf("%w: prometheus exporter: %w", ErrMetricsSetup, err)
		}
		popts = append(popts, sdkmetric.WithReader(exp))
	}
	if o.OTLP.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "" {
		exp, err := newOTLPExporter(ctx, o.OTLP)
		if err != nil {
			return nil, fmt.Errorf("%w: OTLP exporter: %w", ErrMetricsSetup, err)
		}
		interval := o.OTLP.Interval
		if interval <= 0 {
			interval = DefaultOTLPInterval
		}
		popts = append(popts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp,
			sdkmetric.WithInterval(interval), sdkmetric.WithTimeout(otlpTimeout(o.OTLP)))))
		m.push = true
	}
	if !o.Prometheus && !m.push {
		return nil, nil
	}
	m.provider = sdkmetric.NewMeterProvider(popts...)
	m.instruments, err = newInstruments(m.provider.Meter(meterName))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMetricsSetup, err)
	}
	m.build.Record(ctx, 1, withAttrs(attribute.String("version", o.ServiceVersion)))
	return m, nil
}

const meterName = "github.com/sf2loki/sf2loki"

func otlpTimeout(o OTLPOptions) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultOTLPTimeout
}

func metricsResource(o MetricsOptions) (*resource.Resource, error) {
	name := o.ServiceName
	if name == "" {
		name = "sf2loki"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if o.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(o.ServiceVersion))
	}
	for k, v := range o.Attributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	// No service.instance.id: one run-once process after another continues the same series.
	return resource.Merge(resource.Empty(), resource.NewSchemaless(attrs...))
}

func newOTLPExporter(ctx context.Context, o OTLPOptions) (sdkmetric.Exporter, error) {
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithTimeout(otlpTimeout(o)),
		// A run-once process has no time for the exporter's own backoff: one attempt, bounded
		// by the timeout; a failed push is logged and the run's outcome is not changed.
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})}
	if o.Endpoint != "" {
		opts = append(opts, otlpmetrichttp.WithEndpointURL(o.Endpoint))
	}
	if len(o.Headers) > 0 {
		opts = append(opts, otlpmetrichttp.WithHeaders(o.Headers))
	}
	if o.Gzip {
		opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	}
	tlsCfg, err := o.TLS.config()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, otlpmetrichttp.WithTLSClientConfig(tlsCfg))
	}
	switch o.Temporality {
	case "", Cumulative:
	case Delta:
		opts = append(opts, otlpmetrichttp.WithTemporalitySelector(deltaTemporality))
	default:
		return nil, fmt.Errorf("temporality %q: use cumulative or delta", o.Temporality)
	}
	return otlpmetrichttp.New(ctx, opts...)
}

// deltaTemporality is the usual delta preference: counters and histograms as deltas, up-down
// counters (none here) cumulative.
func deltaTemporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	switch k {
	case sdkmetric.InstrumentKindUpDownCounter, sdkmetric.InstrumentKindObservableUpDownCounter:
		return metricdata.CumulativeTemporality
	}
	return metricdata.DeltaTemporality
}

// Pushes reports whether an OTLP push is configured.
func (m *Metrics) Pushes() bool { return m != nil && m.push }

// Handler serves the instruments in the Prometheus text format; 404 when Prometheus is off.
func (m *Metrics) Handler() http.Handler {
	if m == nil || m.registry == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Flush pushes what the instruments hold now (a no-op without a push) and waits for the
// answer, bounded by ctx.
func (m *Metrics) Flush(ctx context.Context) error {
	if m == nil || !m.push {
		return nil
	}
	return m.provider.ForceFlush(ctx)
}

// Push pushes what the instruments hold now and waits for the answer, at most the OTLP
// timeout even when ctx is done (a Lambda environment pushes before it can be frozen). A failed
// push is logged; it never changes a run's outcome.
func (m *Metrics) Push(ctx context.Context) {
	if m != nil {
		m.within(ctx, m.Flush)
	}
}

// Close pushes a last time, waiting at most the OTLP timeout, and stops the readers: a
// run-once process calls it after printing its report, right before it exits.
func (m *Metrics) Close(ctx context.Context) {
	if m != nil {
		m.within(ctx, m.Shutdown)
	}
}

// within runs push bounded by the OTLP timeout, even when ctx is done, and logs its failure.
func (m *Metrics) within(ctx context.Context, push func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout)
	defer cancel()
	if err := push(ctx); err != nil {
		m.log.Warn("metrics push failed", "err", err)
	}
}

// Shutdown pushes a last time and stops the readers. Call it once, before the process exits.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	return m.provider.Shutdown(ctx)
}
