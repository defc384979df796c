package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestRunOnceRefusesAStrayArgument: urfave/cli stops reading flags at the first argument, so
// "run-once now --dry-run" (a copy-pasted cron line) would drop the --dry-run and run for real:
// take the lease and claim the checkpoint document. It must be refused (exit 2) and do nothing.
func TestRunOnceRefusesAStrayArgument(t *testing.T) {
	dir := t.TempDir()
	key := writeFile(t, dir, "key.pem", string(testKeyPEM(t)))
	doc := filepath.Join(dir, "state.json")
	cfg := writeFile(t, dir, "sf2loki.yaml", `salesforce:
  login_url: http://127.0.0.1:1
  client_id: c
  username: u@example.com
  private_key_file: `+key+`
  max_retries: 0
sources:
  eventlogfile:
    enabled: true
    event_types: [Login]
sink:
  loki:
    url: http://127.0.0.1:1/loki/api/v1/push
state:
  file:
    path: `+doc+`
log:
  level: error
`)
	code, out, errs := run(t, "--config", cfg, "run-once", "now", "--dry-run")
	_, statErr := os.Stat(doc)
	if code != ExitConfig || statErr == nil {
		t.Fatalf("run-once now --dry-run: exit %d, checkpoint document written: %v; want exit 2 and nothing claimed\nstdout %.300s\nstderr %.300s",
			code, statErr == nil, out, errs)
	}
	if want := `run-once takes no arguments, got "now" "--dry-run"`; !strings.Contains(errs, want) {
		t.Errorf("stderr does not say %q:\n%s", want, errs)
	}
}

// TestEveryCommandRefusesStrayArguments walks every command of the application: one that
// declares no ArgsUsage refuses any argument before it does anything (exit 2, naming the
// argument), so a command added later cannot silently ignore arguments and the flags after them.
func TestEveryCommandRefusesStrayArguments(t *testing.T) {
	var checked []string
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			p := append(slices.Clone(path), cmd.Name)
			walk(p, cmd.Subcommands)
			if cmd.Action == nil || cmd.ArgsUsage != "" {
				continue
			}
			checked = append(checked, strings.Join(p, " "))
			args := append(append(p, requiredFlags(t, cmd)...), "stray", "--json")
			code, _, errs := run(t, args...)
			want := strings.Join(p, " ") + ` takes no arguments, got "stray" "--json"`
			if code != ExitConfig || !strings.Contains(errs, want) {
				t.Errorf("%s: exit %d, stderr %q; want exit 2 saying %q", strings.Join(args, " "), code, errs, want)
			}
		}
	}
	walk(nil, NewApp(io.Discard, io.Discard).Commands)
	for _, name := range []string{"run-once", "schedule", "backfill", "doctor", "state show", "state export", "lease show"} {
		if !slices.Contains(checked, name) {
			t.Errorf("%s was not checked (checked: %s)", name, strings.Join(checked, ", "))
		}
	}
}

// requiredFlags gives a command's required flags a value its parser accepts.
func requiredFlags(t *testing.T, cmd *cli.Command) []string {
	var out []string
	for _, f := range cmd.Flags {
		rf, ok := f.(cli.RequiredFlag)
		if !ok || !rf.IsRequired() {
			continue
		}
		if _, ok := f.(*cli.StringFlag); !ok {
			t.Fatalf("%s: give required flag %T a value here", cmd.Name, f)
		}
		out = append(out, "--"+f.Names()[0], "2026-01-01")
	}
	return out
}

// TestCommandsWithArgumentsCheckTheirCount: the commands that take arguments refuse a number
// they do not take (exit 2) before they do anything.
func TestCommandsWithArgumentsCheckTheirCount(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"state", "set", "k"}, "state set: want KEY VALUE, got 1"},
		{[]string{"state", "set", "k", "1", "extra"}, "state set: want KEY VALUE, got 3"},
		{[]string{"state", "delete"}, "state delete: want at least one KEY, got 0"},
		{[]string{"state", "import", "a.json", "b.json"}, "state import: want at most one FILE"},
		{[]string{"state", "fence", "raise-floor", "5", "6"}, "state fence raise-floor: want N, got 2"},
		{[]string{"deadletter", "replay"}, "deadletter replay: want exactly one FILE, got 0"},
		{[]string{"deadletter", "replay", "a.jsonl", "b.jsonl"}, "deadletter replay: want exactly one FILE, got 2"},
	} {
		code, _, errs := run(t, tc.args...)
		if code != ExitConfig || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 saying %q", strings.Join(tc.args, " "), code, errs, tc.want)
		}
	}
}
