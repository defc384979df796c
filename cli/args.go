package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Positional arguments follow one rule. urfave/cli stops reading flags at the first argument,
// so an argument a command ignores would silently drop every flag after it ("run-once now
// --dry-run" would run for real). A command that declares no ArgsUsage takes no arguments and
// refuses any (refuseArgs, applied to every command by prepare); a command that declares them
// reads them with args, which checks their number and applies the flags given after them.

// refuseArgs wraps the action of a command that takes no positional arguments: any argument is
// a usage error (exit 2) and the action does not run.
func refuseArgs(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() == 0 {
			return action(c)
		}
		quoted := make([]string, c.NArg())
		for i, a := range c.Args().Slice() {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		return exitf(ExitConfig, "%s takes no arguments, got %s: flags after an argument are not read, so give every flag before any argument; nothing was done (see --help)",
			commandName(c), strings.Join(quoted, " "))
	}
}

// commandName is the command's name as typed after the program's ("state set").
func commandName(c *cli.Context) string {
	return strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
}

// args returns the command's positional arguments (positional) when ok accepts their number;
// else the usage error want describes.
func args(c *cli.Context, ok func(n int) bool, want string) ([]string, error) {
	a, err := positional(c)
	if err == nil && !ok(len(a)) {
		err = exitf(ExitConfig, "%s: want %s, got %d arguments (see --help)", commandName(c), want, len(a))
	}
	return a, err
}

// positional returns the command's positional arguments, applying any of its flags given after
// them ("state set KEY VALUE --force"): urfave/cli stops parsing flags at the first argument.
// "--" ends the flags; everything after it is positional.
func positional(c *cli.Context) ([]string, error) {
	flags := map[string]cli.Flag{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			flags[n] = f
		}
	}
	var out []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i+1:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := flags[name]
		if !strings.HasPrefix(a, "-") || !ok {
			out = append(out, a)
			continue
		}
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(args) {
				return nil, exitf(ExitConfig, "%s: flag %s needs a value (see --help)", c.Command.Name, a)
			}
			i++
			value = args[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, usageError(c.Command, fmt.Errorf("invalid value %q for flag -%s: %w", value, name, err))
		}
	}
	return out, nil
}
