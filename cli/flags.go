package cli

import (
	"errors"
	"flag"
	"time"

	"github.com/urfave/cli/v2"
)

// errDurationSyntax replaces the flag package's bare "parse error" for duration flags.
var errDurationSyntax = errors.New("use a Go duration such as 90s, 5m or 1h30m")

// hintedDurationFlag is a cli.DurationFlag whose parse error shows the expected format.
// prepare swaps every command's DurationFlag for one, so commands keep declaring the
// library's type.
type hintedDurationFlag struct {
	*cli.DurationFlag
}

// Apply registers the flag like DurationFlag.Apply does, with a value that explains itself.
func (f *hintedDurationFlag) Apply(set *flag.FlagSet) error {
	// The embedded Apply reads the environment and records the default; its registration goes
	// to a throwaway set.
	if err := f.DurationFlag.Apply(flag.NewFlagSet(f.Name, flag.ContinueOnError)); err != nil {
		return err
	}
	v := f.Destination
	if v == nil {
		v = new(time.Duration)
	}
	*v = f.Value
	for _, name := range f.Names() {
		set.Var(durationValue{v}, name, f.Usage)
	}
	return nil
}

// durationValue is a flag.Value holding a time.Duration.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errDurationSyntax
	}
	*v.d = d
	return nil
}

// hintFlags replaces the duration flags of a flag list.
func hintFlags(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		if d, ok := f.(*cli.DurationFlag); ok {
			f = &hintedDurationFlag{DurationFlag: d}
		}
		out[i] = f
	}
	return out
}
