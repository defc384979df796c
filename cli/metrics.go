package cli

import (
	"context"
	"log/slog"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
)

// newProcessMetrics sets up the metrics of one process (one invocation for run-once, every
// tick for schedule) from the metrics section; serve says whether this process serves /metrics
// (schedule mode). A nil *obs.Metrics records nothing.
func newProcessMetrics(ctx context.Context, mc config.Metrics, log *slog.Logger, serve bool) (*obs.Metrics, error) {
	o := mc.Options(Version().Version, serve)
	o.Logger = log
	return obs.NewMetrics(ctx, o)
}

// orgClient is one org's Salesforce client of an invocation: the metrics record the
// org's daily API usage (Sforce-Limit-Info) after the run.
type orgClient struct {
	org    string
	client *salesforce.Client
}

// recordRun records an invocation's report. rec is nil when the invocation could not be built;
// orgs are the run's Salesforce clients (for the API usage gauges).
func recordRun(m *obs.Metrics, cfg *config.Config, rec *obs.RunRecorder, rep *job.Report, orgs []orgClient) {
	if m == nil || rep == nil {
		return
	}
	ctx := context.Background()
	m.RecordReport(ctx, cfg.Lease.Name, cfg.Run.MaxDuration.D(), rep, rec)
	for _, o := range orgs {
		if u, ok := o.client.APIUsage(); ok {
			m.SetAPIUsage(ctx, o.org, u.Used, u.Limit)
		}
	}
}
