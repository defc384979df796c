package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// Set at build time with -ldflags "-X github.com/sf2loki/sf2loki/cli.version=... -X ...commit=...".
var (
	version = ""
	commit  = ""
)

// VersionInfo describes the running binary.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Version returns the binary's version: the ldflags values, else the module build info.
func Version() VersionInfo {
	v := VersionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && v.Commit == "" {
				v.Commit = s.Value
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func init() {
	// --version (the library's flag on the root command) prints what the version command prints.
	cli.VersionPrinter = func(c *cli.Context) { _ = printVersion(c.App.Writer, false) }
}

// printVersion writes the version line, or the JSON object.
func printVersion(w io.Writer, asJSON bool) error {
	v := Version()
	if asJSON {
		return json.NewEncoder(w).Encode(v)
	}
	_, err := fmt.Fprintf(w, "sf2loki %s (commit %s, %s, %s)\n", v.Version, v.Commit, v.GoVersion, v.Platform)
	return err
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:   "version",
		Usage:  "print the version, commit and Go version",
		Flags:  []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print as JSON"}},
		Action: func(c *cli.Context) error { return printVersion(c.App.Writer, c.Bool("json")) },
	}
}
