package config

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	leasek8s "github.com/sf2loki/sf2loki/lease/kubernetes"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/schedule"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
	"github.com/sf2loki/sf2loki/store/file"
	gcsstore "github.com/sf2loki/sf2loki/store/gcs"
	s3store "github.com/sf2loki/sf2loki/store/s3"
)

// The options of the run's own parts — the job, the lease, the store backends, the scheduler
// and the metrics — as the run, batch, egress, lease, state, schedule and metrics sections say.
// The caller adds the invocation's name, its logger, clock and hooks.

// JobOptions maps the run, batch, egress and sink sections onto the job's options.
func (c *Config) JobOptions() job.Options {
	budget := job.BudgetPause
	if c.Egress.OnBudgetExhausted == "drop" {
		budget = job.BudgetDrop
	}
	policy := job.RejectDrop
	if c.Sink.Loki.OnPermanentReject == "freeze" {
		policy = job.RejectFreeze
	}
	timestamps := job.Restamp
	if !c.Sink.Loki.Restamp {
		timestamps = job.RejectLate
	}
	return job.Options{
		MaxRecords: c.Batch.MaxRecords, MaxBytes: c.Batch.MaxBytes.Int(),
		MaxDuration: c.Run.MaxDuration.D(), PushReserve: c.Run.PushTimeout.D(),
		CommitReserve: c.Run.CommitTimeout.D(), ReleaseReserve: c.Run.ReleaseTimeout.D(),
		Drain: c.Run.Drain, PushEntries: c.Sink.Loki.BatchMaxEntries, PushBytes: c.Sink.Loki.BatchMaxBytes.Int(),
		Egress: job.EgressOptions{LinesPerSecond: c.Egress.LinesPerSecond, BytesPerSecond: float64(c.Egress.BytesPerSecond),
			DailyBytes: c.Egress.DailyBytes.Int(), OnBudget: budget, WarnFraction: c.Egress.WarnFraction},
		OnPermanentReject: policy,
		// Heads are per destination: another tenant's streams are other streams.
		Ordering: job.OrderingOptions{Limits: c.Sink.Loki.ReceiverLimits(), Policy: timestamps, Destination: c.DestinationName(c.Sink.Loki)},
	}
}

// LabelGuardOptions caps the values of labels (the shaper's promoted ones) as
// shape.label_cardinality says.
func (c *Config) LabelGuardOptions(labels []string) job.LabelGuardOptions {
	lc := c.Shape.LabelCardinality
	return job.LabelGuardOptions{Labels: labels, MaxValuesPerDay: lc.MaxValuesPerDay, Overflow: lc.OverflowValue}
}

// LeaseConfig is what every lease type takes from the lease section.
func (c *Config) LeaseConfig() lease.Config {
	lc := lease.Config{Duration: c.Lease.Duration.D(), Skew: c.Lease.MaxClockSkew.D(), Host: c.Lease.Identity}
	if lc.Skew == 0 {
		lc.Skew = -1 // an explicit 0 means no skew allowance, not the default
	}
	return lc
}

// SessionOptions are the lease session's options: how long to wait for a holder, how often to
// renew, how long the release may take.
func (c *Config) SessionOptions() lease.SessionOptions {
	return lease.SessionOptions{Wait: c.Lease.AcquireWait.D(), RenewEvery: c.Lease.RenewInterval.D(), ReleaseTimeout: c.Run.ReleaseTimeout.D()}
}

// Backend opens the checkpoint store's backend that the state section names.
func (c *Config) Backend(ctx context.Context) (store.Backend, error) {
	switch st := c.State; st.Store {
	case "file":
		return file.New(file.Options{Path: st.File.Path})
	case "s3":
		s := st.S3
		return s3store.New(ctx, s3store.Options{Bucket: s.Bucket, Key: s.Key, Endpoint: s.Endpoint, Region: s.Region, PathStyle: s.PathStyle,
			AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey.Value(), SessionToken: s.SessionToken.Value(), Proxy: c.HTTP.ProxyFunc()})
	case "gcs":
		g := st.GCS
		return gcsstore.New(ctx, gcsstore.Options{Bucket: g.Bucket, Object: g.Object, Endpoint: g.Endpoint, CredentialsFile: g.CredentialsFile,
			HTTPClient: c.HTTP.Client()})
	case "configmap":
		m := st.ConfigMap
		return configmap.New(configmap.Options{Namespace: m.Namespace, Name: m.Name, Key: m.Key, Kubeconfig: m.Kubeconfig})
	}
	return nil, fmt.Errorf("state.store %q is not available in this build", c.State.Store)
}

// NewLease builds the lease that the lease section names, with lc (LeaseConfig and the
// invocation's name, logger and clock); st is the document a store lease lives in.
func (c *Config) NewLease(st *store.Store, lc lease.Config) (lease.Lease, error) {
	switch l := c.Lease; l.Type {
	case "store":
		return leasestore.New(st, leasestore.Options{Config: lc, Name: l.Name}), nil
	case "kubernetes":
		return leasek8s.New(leasek8s.Options{Config: lc, Namespace: l.Namespace, Name: l.Name, Kubeconfig: l.Kubeconfig})
	}
	return nil, fmt.Errorf("lease.type %q is not available in this build", c.Lease.Type)
}

// Client returns an HTTP client over Go's default transport with the section's proxy, or nil
// (the caller's default, which follows the environment) when none is set.
func (h HTTP) Client() *http.Client {
	p := h.ProxyFunc()
	if p == nil {
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = p
	return &http.Client{Transport: tr}
}

// ScheduleOptions maps the schedule and run sections onto the scheduler's options.
func (c *Config) ScheduleOptions() schedule.Options {
	return schedule.Options{
		Timezone: c.Schedule.Timezone, Jitter: c.Schedule.Jitter.D(), MaxRun: c.Run.MaxDuration.D(),
		Grace:        max(c.Run.TerminationGrace.D(), c.Run.CommitTimeout.D()+c.Run.ReleaseTimeout.D()+c.Run.Margin.D()),
		UnreadyAfter: c.Schedule.UnreadyAfter,
	}
}

// Options maps the metrics section onto obs.NewMetrics's options; serve says whether this
// process serves /metrics (schedule mode: metrics.prometheus decides).
func (m Metrics) Options(version string, serve bool) obs.MetricsOptions {
	o := m.OTLP
	return obs.MetricsOptions{
		OTLP: obs.OTLPOptions{
			Endpoint: o.Endpoint, Headers: o.Headers, Timeout: o.Timeout.D(), Interval: o.Interval.D(),
			Temporality: obs.Temporality(o.Temporality), Gzip: o.Gzip,
			TLS: obs.OTLPTLS{CAFile: o.TLS.CAFile, CertFile: o.TLS.CertFile, KeyFile: o.TLS.KeyFile,
				ServerName: o.TLS.ServerName, InsecureSkipVerify: o.TLS.InsecureSkipVerify},
		},
		Prometheus: serve && m.Prometheus, ServiceName: m.ServiceName, ServiceVersion: version, Attributes: m.ResourceAttributes,
	}
}
