package cli

import (
	"context"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/doctor"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/store"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "live preflight: config and time budget, Salesforce auth and permissions, a Loki test write, the store and the lease",
		Description: "Checks run in dependency order; each ends PASS, INFO, WARN, FAIL or SKIP, with a fix for WARN and FAIL.\n" +
			"Nothing real is written: the store probe uses a separate object (<document>" + doctor.ProbeSuffix + "),\n" +
			"Kubernetes permissions are checked with dry runs, and the Loki test entry carries source=\"" + doctor.TestSource + "\".\n" +
			"Exit codes: 0 no FAIL, 1 any FAIL, 2 the configuration does not load.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the results as one JSON document (for CI)"},
			&cli.StringFlag{Name: "job", Usage: "check only this job group (jobs[].name); default: every group's store and lease"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "time limit of each check"},
		},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	write := func(rep *doctor.Report, r *obs.Redactor) error {
		var b strings.Builder
		var err error
		if c.Bool("json") {
			err = rep.WriteJSON(&b)
		} else {
			err = rep.WriteTable(&b)
		}
		if err != nil {
			return err
		}
		out := b.String()
		if r != nil {
			out = r.Scrub(out)
		}
		_, err = io.WriteString(c.App.Writer, out)
		return err
	}
	cfg, err := loadConfig(c)
	if err != nil {
		if werr := write(&doctor.Report{Results: []doctor.Result{doctor.ConfigFailed(err)}}, nil); werr != nil {
			return werr
		}
		return &ExitError{Code: ExitConfig}
	}
	if name := c.String("job"); name != "" {
		if cfg, err = cfg.ForJob(name); err != nil {
			return exitf(ExitConfig, "%v", err)
		}
	}
	log, redactor, err := newLogger(c, cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	checks, closers := doctor.ForConfig(ctx, configSource(c), cfg, doctor.Builders{
		Store: func(ctx context.Context, cfg *config.Config) (*store.Store, error) { return buildStore(ctx, cfg, log) },
		Lease: func(ctx context.Context, cfg *config.Config, st *store.Store) (lease.Lease, error) {
			return buildLease(cfg, st, lease.NewInvocation(), log)
		},
	}, log)
	defer func() {
		for _, cl := range closers {
			_ = cl.Close()
		}
	}()
	rep, err := doctor.Run(ctx, checks, doctor.Options{Timeout: c.Duration("timeout"), Logger: log})
	if err != nil {
		return err
	}
	if err := write(rep, redactor); err != nil {
		return err
	}
	if rep.Failed() {
		return &ExitError{Code: ExitDoctorFail}
	}
	return nil
}

func configSource(c *cli.Context) string {
	if p := globalString(c, "config"); p != "" {
		return p
	}
	return "the configuration (defaults and environment)"
}
