package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

func deadLetterCommand() *cli.Command {
	return &cli.Command{
		Name:  "deadletter",
		Usage: "work with the dead-letter file (sink.loki.dead_letter_path)",
		Subcommands: []*cli.Command{{
			Name:      "replay",
			Usage:     "ship the entries of a dead-letter file again, once the cause of their rejection is fixed",
			ArgsUsage: "FILE",
			Description: "Reads the dropped entries of FILE (one JSON object a line, as sink.loki.dead_letter_path writes\n" +
				"them) and ships them like run-once: under the lease, claiming the checkpoint document, through the same\n" +
				"stream heads and timestamp rules (an entry too far behind its stream is re-stamped, its own time kept in\n" +
				"structured metadata event_time). Fix the cause first: the receiver's limit, or the shaping rule.\n" +
				"Its position in FILE is committed after every push, so an interrupted replay resumes where it stopped\n" +
				"and a finished one ships nothing twice. Entries refused again are dropped or frozen as\n" +
				"sink.loki.on_permanent_reject says, and appended to the dead letter (the lines present when the\n" +
				"replay started are the only ones it reads). Prints the run report (one JSON line) on stdout and a\n" +
				"summary on stderr: what shipped and what was refused again, by reason.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "job", Usage: "job group whose lease and document to use (jobs[].name); required when job groups are configured"},
				&cli.DurationFlag{Name: "wait", Usage: "how long to wait for a live lease holder (lease.acquire_wait)"},
			},
			Action: runDeadLetterReplay,
		}},
	}
}

func runDeadLetterReplay(c *cli.Context) error {
	a, err := args(c, func(n int) bool { return n == 1 }, "exactly one FILE")
	if err != nil {
		return err
	}
	path := a[0]
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		if err == nil {
			err = fmt.Errorf("is a directory")
		}
		return exitf(ExitConfig, "dead-letter file %s: %v", path, err)
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	cfg, err = cfg.ForJob(c.String("job"))
	if err != nil {
		return exitf(ExitConfig, "%v", err)
	}
	if c.IsSet("wait") {
		cfg.Lease.AcquireWait = config.Duration(c.Duration("wait"))
	}
	log, _, err := newLogger(c, cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	parts, sh, log, err := buildCore(ctx, cfg, log, nil)
	if err != nil {
		return storeExit(err)
	}
	defer parts.close()
	if err := openDeadLetter(ctx, cfg, parts, nil); err != nil { // what is refused again goes there
		return storeExit(err)
	}
	dests := &destinations{cfg: cfg, allowed: sh.PromotedLabelNames(), log: log}
	if parts.deps.Bindings, err = dests.replayBindings(path, sh); err != nil {
		return storeExit(err)
	}
	// The whole file in one invocation: the batch bounds would only split it into runs.
	parts.opts.Drain = true
	rep := job.Run(ctx, parts.deps, parts.opts)
	rep.ExitCode = outcomeExit(rep.Outcome, cfg.Run.StrictExitCodes)
	logOutcome(log, rep)
	printReport(c.App.Writer, io.Discard, rep)
	fmt.Fprint(c.App.ErrWriter, rep.ReplaySummary(filepath.Base(path)))
	return reportExit(rep, cfg.Run.StrictExitCodes)
}
