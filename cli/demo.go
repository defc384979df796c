package cli

import (
	"context"
	"errors"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/demo"
	"github.com/sf2loki/sf2loki/job"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the real job against an embedded simulated Salesforce org and Loki receiver (no credentials needed)",
		Description: "Starts a simulated org with a small, lively data set and a strict Loki-protocol receiver in this\n" +
			"process, runs several invocations through the same run-once path production uses, and prints\n" +
			"what arrived. With --loki-url the entries go to a real Loki (or VictoriaLogs) instead.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "loki-url", Usage: "push to this Loki push URL instead of the embedded receiver"},
			&cli.StringFlag{Name: "state-dir", Usage: "keep the checkpoint document here (default: a temporary directory, removed afterwards)"},
			&cli.IntFlag{Name: "runs", Value: 3, Usage: "number of invocations"},
			&cli.IntFlag{Name: "max-records", Value: 2000, Usage: "batch.max_records of each invocation"},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			cfg := config.Defaults()
			cfg.Log.Level, cfg.Log.Format = "warn", "text" // --log-level and --log-format override them (newLogger)
			log, _, err := newLogger(c, cfg)
			if err != nil {
				return err
			}
			err = demo.Run(ctx, c.App.Writer, demo.Options{
				LokiURL: c.String("loki-url"), StateDir: c.String("state-dir"),
				Runs: c.Int("runs"), MaxRecords: c.Int("max-records"),
			}, func(ctx context.Context, cfg *config.Config) *job.Report {
				return runInvocation(ctx, cfg, log, invocationFlags{})
			})
			var re *demo.RunError
			if errors.As(err, &re) {
				return &ExitError{Code: outcomeExit(re.Outcome, false), Err: err}
			}
			return err
		},
	}
}
