package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// documentFlags select the checkpoint document a state or lease command works on.
func documentFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "job", Usage: "the document and lease of this job group (jobs[].name)"},
		&cli.BoolFlag{Name: "backfill", Usage: "the backfill document and lease instead of the live ones"},
	}
}

// writeFlags are the flags of the state commands that write.
func writeFlags() []cli.Flag {
	return append(documentFlags(),
		&cli.DurationFlag{Name: "wait", Value: 30 * time.Second, Usage: "how long to wait for a running job to finish and release the lease"},
		&cli.BoolFlag{Name: "force", Usage: "take over a live lease: the running job is fenced at its next commit"},
	)
}

// target is the document (and configuration) a state or lease command works on.
type target struct {
	cfg *config.Config
	st  *store.Store
	log *slog.Logger
	ctx context.Context
}

// openTarget loads the configuration, selects the document (--job, --backfill) and builds its
// store. The returned stop must be called.
func openTarget(c *cli.Context) (*target, func(), error) {
	cfg, err := loadConfig(c)
	if err != nil {
		return nil, nil, err
	}
	switch name := c.String("job"); {
	case c.Bool("backfill") && name != "":
		return nil, nil, exitf(ExitConfig, "--backfill and --job exclude each other: a backfill has one document, not one per job group")
	case c.Bool("backfill"):
		cfg = cfg.ForBackfill()
	case name != "" || len(cfg.Jobs) > 0:
		if cfg, err = cfg.ForJob(name); err != nil {
			return nil, nil, exitf(ExitConfig, "%v", err)
		}
	}
	log, _, err := newLogger(c, cfg)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	st, err := buildStore(ctx, cfg, log)
	if err != nil {
		stop()
		return nil, nil, exitf(ExitConfig, "%v", err)
	}
	return &target{cfg: cfg, st: st, log: log, ctx: ctx}, stop, nil
}

func (t *target) maintenance(c *cli.Context) *maintenance {
	return &maintenance{cfg: t.cfg, st: t.st, log: t.log, out: c.App.ErrWriter, wait: c.Duration("wait"), force: c.Bool("force")}
}

func stateCommand() *cli.Command {
	return &cli.Command{
		Name:  "state",
		Usage: "show, repair, export and import the checkpoint document",
		Description: "show and export only read. set, delete, import and fence raise-floor acquire the lease as a maintenance\n" +
			"holder (waiting up to --wait for a running job to finish), claim the document with a new epoch and commit once,\n" +
			"so a job that is still running is fenced at its next commit and can never revert the change. If the lease is\n" +
			"still held when --wait ends they refuse and change nothing (exit 5); --force takes the lease over.\n" +
			"Exit codes: 0 done, 1 internal, 2 configuration or usage, 3 store unavailable, 5 refused (lease held),\n" +
			"6 fenced by a newer epoch meanwhile, 7 corrupt document.",
		Subcommands: []*cli.Command{
			{
				Name: "show", Usage: "print the fence, the last writer and every checkpoint with its age (read-only, never blocks a run)",
				Flags: append(documentFlags(),
					&cli.StringFlag{Name: "key", Usage: "only keys matching this glob (eventlogfile:*)"},
					&cli.BoolFlag{Name: "json", Usage: "print JSON"},
				),
				Action: stateShow,
			},
			{
				Name: "set", Usage: "set one checkpoint: state set KEY VALUE (VALUE is JSON; anything else is stored as a JSON string)",
				ArgsUsage: "KEY VALUE", Flags: writeFlags(), Action: stateSet,
			},
			{
				Name: "delete", Usage: "delete checkpoints: state delete KEY... (each key restarts from its source's lookback)",
				ArgsUsage: "KEY...", Flags: writeFlags(), Action: stateDelete,
			},
			{
				Name: "export", Usage: "print the checkpoints and counters as a document without the fence (for state import)",
				Flags:  append(documentFlags(), &cli.StringFlag{Name: "key", Usage: "only keys matching this glob"}),
				Action: stateExport,
			},
			{
				Name: "import", Usage: "import an exported document (file, or - for stdin) into an empty document, under a new epoch",
				ArgsUsage: "[FILE|-]", Flags: writeFlags(), Action: stateImport,
			},
			{
				Name:  "fence",
				Usage: "operate on the fence epoch",
				Subcommands: []*cli.Command{{
					Name: "raise-floor", Usage: "claim the document at epoch N or above, so no grant below N can ever write it",
					ArgsUsage: "N", Flags: writeFlags(), Action: stateRaiseFloor,
				}},
			},
		},
	}
}

// keyFilter returns a predicate for --key (a path.Match glob), or an error for a bad pattern.
func keyFilter(glob string) (func(string) bool, error) {
	if glob == "" {
		return func(string) bool { return true }, nil
	}
	if _, err := path.Match(glob, ""); err != nil {
		return nil, exitf(ExitConfig, "--key %q is not a valid glob: %v", glob, err)
	}
	return func(k string) bool { ok, _ := path.Match(glob, k); return ok }, nil
}

// readTarget opens the configured document, reads it once and compiles the --key filter: the
// read-only start of state show and state export.
func readTarget(c *cli.Context) (*target, store.Snapshot, func(string) bool, func(), error) {
	t, stop, err := openTarget(c)
	if err != nil {
		return nil, store.Snapshot{}, nil, nil, err
	}
	match, err := keyFilter(c.String("key"))
	if err != nil {
		stop()
		return nil, store.Snapshot{}, nil, nil, err
	}
	snap, err := t.st.Read(t.ctx)
	if err != nil {
		stop()
		return nil, store.Snapshot{}, nil, nil, storeExit(err)
	}
	return t, snap, match, stop, nil
}

func stateShow(c *cli.Context) error {
	t, snap, match, stop, err := readTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	v := snap.View(t.st.Object(), match)
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return v.WriteText(c.App.Writer, time.Now())
}

func checkKey(k string) error {
	switch k {
	case "":
		return exitf(ExitConfig, "KEY must not be empty")
	case store.LegacyFenceKey:
		return exitf(ExitConfig, "%s is the fence of the Python original, not a checkpoint: use `sf2loki state fence raise-floor`", store.LegacyFenceKey)
	}
	return nil
}

// checkCursors refuses cursors no source of the target's configuration would use
// (checkCursors), before anything is written. A backfill's keys name its window, which only
// the backfill reads: they are not checked.
func (t *target) checkCursors(c *cli.Context, cursors map[string]json.RawMessage, hint string) error {
	if c.Bool("backfill") {
		return nil
	}
	return checkCursors(t.ctx, t.cfg, cursors, hint)
}

// write makes one operator change to the target's document (maintenance.run) and returns the
// epoch it was written under. check, when set, refuses the change on the document as read now,
// before the lease is taken (a refusal bumps no epoch), and again on the claimed version.
func (t *target) write(c *cli.Context, floor uint64, check func(*store.Document) error, edit lease.Edit) (uint64, error) {
	if check != nil {
		snap, err := t.st.Read(t.ctx)
		if err != nil {
			return 0, storeExit(err)
		}
		if err := check(snap.Doc); err != nil {
			return 0, err
		}
	}
	m := t.maintenance(c)
	m.floor = floor
	epoch, err := m.run(t.ctx, func(doc *store.Document) (*store.Change, error) {
		if check != nil {
			if err := check(doc); err != nil {
				return nil, err
			}
		}
		return edit(doc)
	})
	return epoch, storeExit(err)
}

func stateSet(c *cli.Context) error {
	a, err := args(c, func(n int) bool { return n == 2 }, "KEY VALUE")
	if err != nil {
		return err
	}
	key := a[0]
	if err := checkKey(key); err != nil {
		return err
	}
	value, err := store.ParseValue(a[1])
	if err != nil {
		return exitf(ExitConfig, "state set: VALUE %v; quote it for the shell ('{\"v\":1,...}')", err)
	}
	t, stop, err := openTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	if err := t.checkCursors(c, map[string]json.RawMessage{key: value},
		"check the spelling against `sf2loki state show`, or enable the source first"); err != nil {
		return err
	}
	was := "(absent)"
	epoch, err := t.write(c, 0, nil, func(doc *store.Document) (*store.Change, error) {
		if cp, ok := doc.Checkpoints[key]; ok {
			was = store.Compact(cp.Value)
		}
		return &store.Change{Set: map[string]json.RawMessage{key: value}}, nil
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "set %s at epoch %d in %s\n  was: %s\n  now: %s\n", key, epoch, t.st.Object(), was, store.Compact(value))
	return err
}

func stateDelete(c *cli.Context) error {
	keys, err := args(c, func(n int) bool { return n > 0 }, "at least one KEY")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	t, stop, err := openTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	// Unknown keys are refused before the lease is taken, so a typo bumps no epoch.
	epoch, err := t.write(c, 0, func(doc *store.Document) error {
		if missing := doc.Missing(keys); len(missing) > 0 {
			return exitf(ExitConfig, "%s has no checkpoint %s; nothing was changed (see `sf2loki state show`)", t.st.Object(), strings.Join(missing, ", "))
		}
		return nil
	}, func(*store.Document) (*store.Change, error) { return &store.Change{Delete: keys}, nil })
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "deleted %s at epoch %d in %s; each restarts from its source's lookback\n", strings.Join(keys, ", "), epoch, t.st.Object())
	return err
}

func stateExport(c *cli.Context) error {
	t, snap, match, stop, err := readTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	if snap.Absent {
		return exitf(ExitConfig, "%s does not exist: nothing to export", t.st.Object())
	}
	data, err := snap.Doc.Export(match).Encode()
	if err != nil {
		return err
	}
	_, err = c.App.Writer.Write(data)
	return err
}

func stateImport(c *cli.Context) error {
	a, err := args(c, func(n int) bool { return n <= 1 }, "at most one FILE (or - for stdin)")
	if err != nil {
		return err
	}
	name, data := "stdin", []byte(nil)
	if len(a) == 1 && a[0] != "-" {
		name = a[0]
		data, err = os.ReadFile(name)
	} else {
		data, err = io.ReadAll(c.App.Reader)
	}
	if err != nil {
		return exitf(ExitConfig, "state import: reading %s: %v", name, err)
	}
	in, _, err := store.Decode(name, data)
	if err != nil {
		return exitf(ExitConfig, "state import: %v", err)
	}
	imported, err := in.Imported()
	if err != nil {
		return exitf(ExitConfig, "state import: %s: %v", name, err)
	}
	t, stop, err := openTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	// Keys the document's sources do not read would sit there unused while those sources start
	// from their lookback: the export of another job group or org, or a stale key.
	if err := t.checkCursors(c, imported.Set, fmt.Sprintf(
		"is %s the export of another job group (--job) or of another org (a configuration with orgs prefixes each key with org=NAME:)? "+
			"Export only the keys this document's sources read (`sf2loki state export --key GLOB`)", name)); err != nil {
		return err
	}
	// Only into an empty document: an import never merges with (or silently replaces) live
	// checkpoints.
	epoch, err := t.write(c, 0, func(doc *store.Document) error {
		if !doc.Empty() {
			return exitf(ExitConfig, "%s already holds %d checkpoints: import only into an empty document (delete them, or point the configuration at a new document); nothing was changed",
				t.st.Object(), len(doc.Checkpoints))
		}
		return nil
	}, func(*store.Document) (*store.Change, error) { return &imported, nil })
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "imported %d checkpoints and %d counters from %s into %s at epoch %d\n", len(imported.Set), len(imported.Counters), name, t.st.Object(), epoch)
	return err
}

func stateRaiseFloor(c *cli.Context) error {
	a, err := args(c, func(n int) bool { return n == 1 }, "N")
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(a[0], 10, 64)
	if err != nil || n == 0 {
		return exitf(ExitConfig, "state fence raise-floor: N must be a positive integer, got %q", a[0])
	}
	t, stop, err := openTarget(c)
	if err != nil {
		return err
	}
	defer stop()
	snap, err := t.st.Read(t.ctx)
	if err != nil {
		return storeExit(err)
	}
	if cur := snap.Floor(); cur >= n {
		_, err := fmt.Fprintf(c.App.Writer, "the fence of %s is at epoch %d, already >= %d: nothing to do (the fence only ever rises)\n", t.st.Object(), cur, n)
		return err
	}
	epoch, err := t.write(c, n, nil, func(*store.Document) (*store.Change, error) { return nil, nil })
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "raised the fence of %s to epoch %d\n", t.st.Object(), epoch)
	return err
}
