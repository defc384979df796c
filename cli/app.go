// Package cli is sf2loki's command line: one urfave/cli/v2 application, one file per command, and
// the one table that maps outcomes to exit codes (exitcode.go).
package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/obs"
)

// Main runs the command line with args (args[0] is the program name) and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	tuneGC(os.LookupEnv)
	app := NewApp(stdout, stderr)
	err := app.Run(lambdaArgs(args))
	code := exitCode(err)
	if err != nil {
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Err != nil {
			fmt.Fprintf(app.ErrWriter, "sf2loki: %v\n", err)
		}
	}
	return code
}

// metaRedactor is the App.Metadata key of the process's redactor.
const metaRedactor = "redactor"

// NewApp builds the application. Commands plug in through the commands list. Everything the
// application prints goes through one redactor: URL credentials always, and every secret of the
// configuration from the moment it is loaded (the run report, errors, banners, doctor, logs).
func NewApp(stdout, stderr io.Writer) *cli.App {
	r := obs.NewRedactor()
	app := &cli.App{
		Name:                 "sf2loki",
		Usage:                "ship Salesforce Event Monitoring data into Grafana Loki, one bounded batch per invocation",
		Writer:               obs.NewWriter(stdout, r),
		ErrWriter:            obs.NewWriter(stderr, r),
		Metadata:             map[string]any{metaRedactor: r},
		EnableBashCompletion: true,
		Version:              Version().Version, // --version prints what the version command prints
		Flags:                globalFlags(),
		Commands: []*cli.Command{
			runOnceCommand(),
			scheduleCommand(),
			demoCommand(),
			versionCommand(),
			configCommand(),
			doctorCommand(),
			stateCommand(),
			leaseCommand(),
			backfillCommand(),
			lambdaCommand(),
			deadLetterCommand(),
		},
		ExitErrHandler: func(*cli.Context, error) {}, // Main decides the code and prints once
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return &ExitError{Code: ExitConfig, Err: fmt.Errorf("%w (see --help)", err)}
		},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "sf2loki: unknown command %q (see sf2loki --help)\n", name)
			os.Exit(ExitConfig) // urfave/cli/v2 gives this hook no way to return an error
		},
	}
	for _, cmd := range app.Commands {
		prepare(cmd)
	}
	return app
}

// globalFlags are accepted before the command and after it ("--config FILE everywhere").
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "configuration file (YAML)", EnvVars: []string{"SF2LOKI_CONFIG"}},
		&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (overrides log.level)"},
		&cli.StringFlag{Name: "log-format", Usage: "json or text (overrides log.format)"},
	}
}

// prepare gives every command the global flags, maps its usage errors to exit 2 and, when it
// declares no ArgsUsage, makes it refuse positional arguments (refuseArgs).
func prepare(cmd *cli.Command) {
	cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError(cmd, err) }
	if cmd.Action != nil {
		cmd.Flags = append(cmd.Flags, globalFlags()...)
		if cmd.ArgsUsage == "" {
			cmd.Action = refuseArgs(cmd.Action)
		}
	}
	for _, sub := range cmd.Subcommands {
		prepare(sub)
	}
}

// globalString returns a global flag's value wherever on the command line it was given.
func globalString(c *cli.Context, name string) string {
	for _, cc := range c.Lineage() {
		if v := cc.String(name); v != "" {
			return v
		}
	}
	return ""
}

// redactor returns the application's redactor.
func redactor(c *cli.Context) *obs.Redactor {
	if r, ok := c.App.Metadata[metaRedactor].(*obs.Redactor); ok {
		return r
	}
	return obs.NewRedactor() // an App not built by NewApp
}

// loadConfig loads and validates the configuration named by --config (exit 2 on any problem).
// Its secrets join the redactor before anything is printed, failure messages included.
func loadConfig(c *cli.Context) (*config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{Path: globalString(c, "config"), OnSecret: func(s string) { redactor(c).Add(s) }})
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) && len(errs) > 1 {
			return nil, exitf(ExitConfig, "configuration is invalid (%d problems):\n  %s", len(errs), strings.ReplaceAll(err.Error(), "\n", "\n  "))
		}
		return nil, exitf(ExitConfig, "configuration is invalid: %v", err)
	}
	return cfg, nil
}

// newLogger builds the process logger from config and the global flags, scrubbing cfg's secrets.
func newLogger(c *cli.Context, cfg *config.Config) (*slog.Logger, *obs.Redactor, error) {
	level, format := cfg.Log.Level, cfg.Log.Format
	if v := globalString(c, "log-level"); v != "" {
		level = v
	}
	if v := globalString(c, "log-format"); v != "" {
		format = v
	}
	r := redactor(c)
	r.Add(cfg.Secrets()...)
	log, err := obs.NewLogger(c.App.ErrWriter, obs.LogOptions{Level: level, Format: format, Redactor: r})
	if err != nil {
		return nil, nil, exitf(ExitConfig, "%v", err)
	}
	return log, r, nil
}
