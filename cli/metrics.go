package cli

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
)

// processMetrics are the metrics of one process: one invocation for run-once, every tick for
// schedule. A nil *processMetrics records nothing.
type processMetrics struct {
	m       *obs.Metrics
	log     *slog.Logger
	timeout time.Duration
}

// newProcessMetrics sets up the process's metrics from the metrics section; serve says whether
// this process serves /metrics (schedule mode).
func newProcessMetrics(ctx context.Context, mc config.Metrics, log *slog.Logger, serve bool) (*processMetrics, error) {
	m, err := obs.NewMetrics(ctx, metricsOptions(mc, Version().Version, serve))
	if err != nil {
		return nil, err
	}
	t := mc.OTLP.Timeout.D()
	if t <= 0 {
		t = obs.DefaultOTLPTimeout
	}
	return &processMetrics{m: m, log: log, timeout: t}, nil
}

// handler serves /metrics (404 when the Prometheus endpoint is off).
func (pm *processMetrics) handler() http.Handler {
	if pm == nil {
		return http.NotFoundHandler()
	}
	return pm.m.Handler()
}

// shutdown pushes the metrics a last time and waits for the answer (at most the OTLP timeout):
// a run-once process calls it after printing its report, right before it exits. A failed push
// is logged; it never changes the run's outcome.
func (pm *processMetrics) shutdown(ctx context.Context) {
	if pm == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pm.timeout)
	defer cancel()
	if err := pm.m.Shutdown(ctx); err != nil {
		pm.log.Warn("metrics push failed", "err", err)
	}
}

// orgClient is one org's Salesforce client, kept by buildInvocation so the metrics can read the
// org's daily API usage (Sforce-Limit-Info) after the run.
type orgClient struct {
	org    string
	client *salesforce.Client
}

// instrument attaches a fresh run recorder to an invocation's parts: the job reports its
// pushes and commits to it, and every source's streams count what they yield.
func (pm *processMetrics) instrument(cfg *config.Config, p *invocationParts) *obs.RunRecorder {
	if pm == nil {
		return nil
	}
	r := pm.m.NewRunRecorder(cfg.Lease.Name)
	p.opts.Observer = r
	for i := range p.deps.Bindings {
		b := &p.deps.Bindings[i]
		b.Source = r.Source(b.Source, b.Org)
	}
	return r
}

// finish records an invocation's report. rec is nil when the invocation could not be built;
// orgs are the run's Salesforce clients (for the API usage gauges).
func (pm *processMetrics) finish(cfg *config.Config, rec *obs.RunRecorder, rep *job.Report, orgs []orgClient) {
	if pm == nil || rep == nil {
		return
	}
	ctx := context.Background()
	pm.m.RecordReport(ctx, cfg.Lease.Name, cfg.Run.MaxDuration.D(), rep, rec)
	for _, o := range orgs {
		if u, ok := o.client.APIUsage(); ok {
			pm.m.SetAPIUsage(ctx, o.org, u.Used, u.Limit)
		}
	}
}

// metricsOptions maps the metrics section onto obs.NewMetrics's options; prometheus says
// whether this process serves /metrics (schedule mode with metrics.prometheus on).
func metricsOptions(m config.Metrics, version string, prometheus bool) obs.MetricsOptions {
	o := m.OTLP
	return obs.MetricsOptions{
		OTLP: obs.OTLPOptions{
			Endpoint: o.Endpoint, Headers: o.Headers, Timeout: o.Timeout.D(), Interval: o.Interval.D(),
			Temporality: obs.Temporality(o.Temporality), Gzip: o.Gzip,
			TLS: obs.OTLPTLS{CAFile: o.TLS.CAFile, CertFile: o.TLS.CertFile, KeyFile: o.TLS.KeyFile,
				ServerName: o.TLS.ServerName, InsecureSkipVerify: o.TLS.InsecureSkipVerify},
		},
		Prometheus:     prometheus && m.Prometheus,
		ServiceName:    m.ServiceName,
		ServiceVersion: version,
		Attributes:     m.ResourceAttributes,
	}
}
