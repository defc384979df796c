package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lambda"
	"github.com/sf2loki/sf2loki/obs"
)

// runFlags are the flags shared by run-once and schedule.
func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "drain", Usage: "repeat pull, push and commit until caught up or out of time (run.drain)"},
		&cli.BoolFlag{Name: "strict-exit-codes", Usage: "exit 5 for busy and 6 for fenced (run.strict_exit_codes)"},
		&cli.IntFlag{Name: "max-records", Usage: "stop pulling after this many records (batch.max_records)"},
		&cli.DurationFlag{Name: "max-duration", Usage: "internal deadline of the invocation (run.max_duration)"},
		&cli.DurationFlag{Name: "wait", Usage: "how long to wait for a live lease holder (lease.acquire_wait)"},
		&cli.StringFlag{Name: "job", Usage: "job group to run (jobs[].name); required when job groups are configured for run-once"},
	}
}

// applyRunFlags lets the command line win over the configuration, then re-validates it.
func applyRunFlags(c *cli.Context, cfg *config.Config) error {
	if c.IsSet("drain") {
		cfg.Run.Drain = c.Bool("drain")
	}
	if c.IsSet("strict-exit-codes") {
		cfg.Run.StrictExitCodes = c.Bool("strict-exit-codes")
	}
	if c.IsSet("max-records") {
		cfg.Batch.MaxRecords = c.Int("max-records")
	}
	if c.IsSet("max-duration") {
		cfg.Run.MaxDuration = config.Duration(c.Duration("max-duration"))
	}
	if c.IsSet("wait") {
		cfg.Lease.AcquireWait = config.Duration(c.Duration("wait"))
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		return exitf(ExitConfig, "the command-line flags make the configuration invalid:\n  %s", strings.ReplaceAll(errs.Error(), "\n", "\n  "))
	}
	return nil
}

func runOnceCommand() *cli.Command {
	return &cli.Command{
		Name:  "run-once",
		Usage: "one invocation: acquire the lease, claim, ship one bounded batch, commit, release, exit",
		Description: "Prints one JSON line (the run report) on stdout. Exit codes: 0 ok/busy/fenced, 1 internal,\n" +
			"2 configuration, 3 unavailable, 4 partial, 5/6 busy/fenced with --strict-exit-codes, 7 needs a human.",
		Flags: append(runFlags(),
			&cli.BoolFlag{Name: "dry-run", Usage: "pull and shape one batch and print it as JSON lines on stderr; push, claim and commit nothing"},
		),
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			if err := applyRunFlags(c, cfg); err != nil {
				return err
			}
			cfg, err = cfg.ForJob(c.String("job"))
			if err != nil {
				return exitf(ExitConfig, "%v", err)
			}
			log, _, err := newLogger(c, cfg)
			if err != nil {
				return err
			}
			if name := c.String("job"); name != "" {
				log = log.With("job", name)
			}
			warnStartup(cfg, log)
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			pm, err := newProcessMetrics(ctx, cfg.Metrics, log, false)
			if err != nil {
				return exitf(ExitConfig, "metrics: %v", err)
			}
			rep := runInvocation(ctx, cfg, log, invocationFlags{dryRun: c.Bool("dry-run"), dryRunOut: c.App.ErrWriter, metrics: pm})
			printReport(c.App.Writer, c.App.ErrWriter, rep)
			pm.Close(ctx) // the OTLP push, synchronously, before the process exits
			return reportExit(rep, cfg.Run.StrictExitCodes)
		},
	}
}

// invocationFlags are per-invocation switches that are not configuration.
type invocationFlags struct {
	dryRun    bool
	dryRunOut io.Writer
	metrics   *obs.Metrics // nil: no metrics
	warm      *lambda.Warm // nil: every client built for this invocation alone
}

// warnStartup logs configuration advice once per process.
func warnStartup(cfg *config.Config, log *slog.Logger) {
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
}

// runInvocation builds the parts of one invocation and runs it. Failures to build are reported
// as a run report with the matching outcome, so every run ends with one report.
func runInvocation(ctx context.Context, cfg *config.Config, log *slog.Logger, f invocationFlags) *job.Report {
	start := time.Now()
	parts, err := buildInvocation(ctx, cfg, log, f.warm, false)
	if err != nil {
		log.Error("cannot start the invocation", "err", err)
		rep := &job.Report{Outcome: job.OutcomeOf(err, false), Error: err.Error(), StartedAt: start.UTC(), Duration: job.Millis(time.Since(start))}
		rep.ExitCode = outcomeExit(rep.Outcome, cfg.Run.StrictExitCodes)
		recordRun(f.metrics, cfg, nil, rep, nil)
		return rep
	}
	defer parts.close()
	rec := f.metrics.Instrument(cfg.Lease.Name, &parts.deps, &parts.opts)
	parts.opts.DryRun, parts.opts.DryRunOut = f.dryRun, f.dryRunOut
	rep := job.Run(ctx, parts.deps, parts.opts)
	rep.ExitCode = outcomeExit(rep.Outcome, cfg.Run.StrictExitCodes)
	recordRun(f.metrics, cfg, rec, rep, parts.orgs)
	logOutcome(log, rep)
	return rep
}

func logOutcome(log *slog.Logger, rep *job.Report) {
	attrs := []any{"outcome", rep.Outcome, "epoch", rep.Epoch, "records", rep.Records, "duration_ms", time.Duration(rep.Duration).Milliseconds()}
	if rep.Error != "" {
		attrs = append(attrs, "err", rep.Error)
	}
	level := slog.LevelInfo
	if failed(rep.Outcome) {
		level = slog.LevelError
	}
	log.Log(context.Background(), level, "run finished", attrs...)
}

// reportExit turns a run report into the command's result.
func reportExit(rep *job.Report, strict bool) error {
	if code := outcomeExit(rep.Outcome, strict); code != ExitOK {
		return &ExitError{Code: code}
	}
	return nil
}

// printReport writes the run report as one JSON line on stdout and, when stderr is a terminal,
// a short human summary on stderr. The line is not HTML-escaped, so a URL in an error reads as
// it is and the redactor finds its credentials.
func printReport(stdout, stderr io.Writer, rep *job.Report) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		fmt.Fprintf(stderr, "sf2loki: cannot encode the run report: %v\n", err)
		return
	}
	fmt.Fprint(stdout, b.String())
	if obs.IsTerminal(stderr) {
		fmt.Fprint(stderr, rep.Summary())
	}
}
