package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "print an example configuration, check one, or print its JSON Schema",
		Subcommands: []*cli.Command{
			{
				Name:  "example",
				Usage: "print an annotated configuration with every key, its default and description",
				Action: func(c *cli.Context) error {
					_, err := c.App.Writer.Write(config.Example())
					return err
				},
			},
			{
				Name:  "check",
				Usage: "validate the configuration offline (no network); exit 0 when valid, 2 when not",
				Action: func(c *cli.Context) error {
					cfg, err := loadConfig(c)
					if err != nil {
						return err
					}
					if err := checkJobs(c.Context, cfg); err != nil {
						return err
					}
					for _, w := range cfg.Warnings() {
						fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w)
					}
					src := globalString(c, "config")
					if src == "" {
						src = "defaults and environment"
					}
					_, err = fmt.Fprintf(c.App.Writer, "configuration OK (%s)\n", src)
					return err
				},
			},
			{
				Name:  "schema",
				Usage: "print the JSON Schema of the configuration file",
				Action: func(c *cli.Context) error {
					s, err := config.JSONSchema()
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(c.App.Writer, "%s\n", s)
					return err
				},
			},
		},
	}
}

// checkJobs builds every job group's invocation (or the whole configuration's) the way
// run-once does, without network: anything run-once would refuse at start is refused here with
// the same message and exit code.
func checkJobs(ctx context.Context, cfg *config.Config) error {
	for _, g := range cfg.Groups() {
		p, err := buildInvocation(ctx, g.Config, slog.New(slog.DiscardHandler), nil, true)
		if err != nil {
			if g.Name != "" {
				err = fmt.Errorf("jobs[%s]: %w", g.Name, err)
			}
			return &ExitError{Code: outcomeExit(job.OutcomeOf(err, false), true), Err: err}
		}
		p.close()
	}
	return nil
}
