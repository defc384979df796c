package cli

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/schedule"
)

func scheduleCommand() *cli.Command {
	return &cli.Command{
		Name:  "schedule",
		Usage: "run invocations on an embedded cron schedule (schedule.spec), with /healthz and /readyz",
		Description: "Every tick is a fresh run-once invocation; busy and fenced ticks are normal and never stop\n" +
			"the scheduler. Any number of replicas may run: the lease decides which one ships.",
		Flags: append(runFlags(),
			&cli.StringFlag{Name: "listen", Usage: "address of /healthz, /readyz and /metrics (schedule.listen); empty = off"},
		),
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			if err := applyRunFlags(c, cfg); err != nil {
				return err
			}
			if c.IsSet("listen") {
				cfg.Schedule.Listen = c.String("listen")
			}
			log, _, err := newLogger(c, cfg)
			if err != nil {
				return err
			}
			warnStartup(cfg, log)
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := checkJobs(ctx, cfg); err != nil { // refuse at start what every tick would refuse
				return err
			}
			pm, err := newProcessMetrics(ctx, cfg.Metrics, log, true)
			if err != nil {
				return exitf(ExitConfig, "metrics: %v", err)
			}
			defer pm.Close(ctx)
			jobs, err := scheduledJobs(cfg, c.String("job"), log, pm)
			if err != nil {
				return exitf(ExitConfig, "%v", err)
			}
			s, err := schedule.New(scheduleOptions(cfg, log), jobs)
			if err != nil {
				return exitf(ExitConfig, "%v", err)
			}
			if cfg.Schedule.Listen != "" {
				ln, err := net.Listen("tcp", cfg.Schedule.Listen)
				if err != nil {
					return exitf(ExitConfig, "schedule.listen: %v", err)
				}
				srv := &http.Server{Handler: s.Handler(pm.Handler()), ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer srv.Close()
				log.Info("health endpoints listening", "addr", ln.Addr().String())
			}
			s.Run(ctx)
			return nil
		},
	}
}

// scheduledJobs returns one cron entry per job group (or the one job when there are no groups;
// only the named group when name is set).
func scheduledJobs(cfg *config.Config, name string, log *slog.Logger, pm *obs.Metrics) ([]schedule.Job, error) {
	groups := cfg.Groups()
	if name != "" {
		gcfg, err := cfg.ForJob(name)
		if err != nil {
			return nil, err
		}
		groups = []config.Group{{Name: name, Config: gcfg}}
	}
	var out []schedule.Job
	for _, g := range groups {
		n, gcfg := g.Name, g.Config
		glog, label := log, n
		if n != "" {
			glog = log.With("job", n)
		} else {
			label = "default"
		}
		out = append(out, schedule.Job{Name: label, Spec: gcfg.Schedule.Spec,
			Run: func(ctx context.Context) *job.Report {
				return runInvocation(ctx, gcfg, glog, invocationFlags{metrics: pm})
			}})
	}
	return out, nil
}

// scheduleOptions are the scheduler's options of the configuration (config.Config.ScheduleOptions).
func scheduleOptions(cfg *config.Config, log *slog.Logger) schedule.Options {
	o := cfg.ScheduleOptions()
	o.Failed, o.Log = failed, log
	return o
}
