package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// withFormat makes a duration flag's parse error say what it expects: the flag package says
// only `invalid value "5" for flag -wait: parse error`.
func withFormat(err error, flags []cli.Flag) error {
	msg := err.Error()
	_, name, ok := strings.Cut(strings.TrimSuffix(msg, ": parse error"), " for flag -")
	if !ok || !strings.HasSuffix(msg, ": parse error") {
		return err
	}
	for _, f := range flags {
		if _, isDuration := f.(*cli.DurationFlag); isDuration && slices.Contains(f.Names(), strings.TrimLeft(name, "-")) {
			return errors.New(strings.TrimSuffix(msg, "parse error") + "use a Go duration such as 90s, 5m or 1h30m")
		}
	}
	return err
}

// usageError is the error of a command's usage error: exit 2, pointing at --help.
func usageError(cmd *cli.Command, err error) error {
	return &ExitError{Code: ExitConfig, Err: fmt.Errorf("%s: %w (see --help)", cmd.Name, withFormat(err, cmd.Flags))}
}
