package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lambda"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/store"
)

// errWiring marks a failure to build the invocation's parts from a valid configuration (a
// missing secret file at run time, an unreadable CA bundle, ...): a configuration problem
// (it is a job.ErrConfig).
var errWiring error = wiringError{}

type wiringError struct{}

func (wiringError) Error() string        { return "cannot set up" }
func (wiringError) Is(target error) bool { return target == job.ErrConfig }

// invocationParts are the parts one invocation runs with, built fresh for every run (in
// schedule mode too: nothing per-run survives into the next tick).
type invocationParts struct {
	deps    job.Deps
	opts    job.Options
	orgs    []orgClient // for the org's API usage metrics
	closers []io.Closer
}

func (p *invocationParts) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		_ = p.closers[i].Close()
	}
}

// buildStore returns the checkpoint store of the configuration (config.Config.Backend).
func buildStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (*store.Store, error) {
	b, err := cfg.Backend(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w the %s store: %w", errWiring, cfg.State.Store, err)
	}
	if testWrapBackend != nil {
		b = testWrapBackend(b)
	}
	return store.New(b, store.Options{Logger: log, Now: testNow}), nil
}

// buildLease returns the lease of the configuration for one invocation (config.Config.NewLease).
func buildLease(cfg *config.Config, st *store.Store, inv string, log *slog.Logger) (lease.Lease, error) {
	lc := cfg.LeaseConfig()
	lc.Invocation, lc.Logger, lc.Now = inv, log, testNow
	l, err := cfg.NewLease(st, lc)
	if err != nil {
		return nil, fmt.Errorf("%w the %s lease (lease): %w", errWiring, cfg.Lease.Type, err)
	}
	if testWrapLease != nil {
		l = testWrapLease(l)
	}
	return l, nil
}

// lokiOptions are the push client's options of a Loki section (config.Loki.ClientOptions) with
// the invocation's logger.
func lokiOptions(l config.Loki, h config.HTTP, log *slog.Logger) loki.Options {
	o := l.ClientOptions(h)
	o.Logger, o.Now = log, testNow
	return o
}

// salesforceOptions are the client's options of one org's salesforce section
// (config.Salesforce.ClientOptions) with the invocation's logger.
func salesforceOptions(s config.Salesforce, h config.HTTP, log *slog.Logger) salesforce.Options {
	o := s.ClientOptions(h)
	o.Logger = log
	return o
}

// buildInvocation builds everything one invocation needs. A non-nil warm keeps the store
// backend, the Loki client and the Salesforce clients across invocations (see lambda.Warm).
// Offline, the dead letter is not opened and nothing calls the network: what run-once refuses
// at start, `config check` and `state set` refuse with the same message.
func buildInvocation(ctx context.Context, cfg *config.Config, log *slog.Logger, warm *lambda.Warm, offline bool) (*invocationParts, error) {
	if err := cfg.RequireSource(); err != nil {
		return nil, fmt.Errorf("%w anything: %w", errWiring, err)
	}
	p, sh, log, err := buildCore(ctx, cfg, log, warm)
	if err != nil {
		return nil, err
	}
	if !offline {
		err = openDeadLetter(ctx, cfg, p, warm)
	}
	if err == nil {
		err = p.bind(cfg, sh, log, warm)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// bind builds every enabled source of every org into the invocation's bindings.
func (p *invocationParts) bind(cfg *config.Config, sh *shape.Shaper, log *slog.Logger, warm *lambda.Warm) error {
	dests := &destinations{cfg: cfg, allowed: sh.PromotedLabelNames(), log: log}
	for _, org := range cfg.OrgList() {
		if !org.Sources.Enabled() {
			continue
		}
		client, err := warm.Salesforce(org.Path, salesforceOptions(org.Salesforce, cfg.HTTP, log.With("org", org.Name)))
		if err != nil {
			return fmt.Errorf("%w the Salesforce client (%s): %w", errWiring, org.Path, err)
		}
		p.orgs = append(p.orgs, orgClient{org: org.Name, client: client})
		dest, osh, err := dests.forOrg(org, sh)
		if err != nil {
			return err
		}
		if l := org.Salesforce.Limits; l.Interval > 0 { // the org-limits poller; with ship, one entry a sample
			poll := job.LimitsPoll{Org: org.Name, Interval: l.Interval.D(), Client: client}
			if l.Ship {
				poll.Entry = job.ShipLimits(osh, client.OrgID, org.OrgLabels()) // the org's static labels, as its records
			}
			p.deps.Limits = append(p.deps.Limits, poll)
		}
		bindings, err := orgBindings(cfg, org, client, osh, log)
		if err != nil {
			return err
		}
		for i := range bindings {
			bindings[i].Destination = dest
		}
		p.deps.Bindings = append(p.deps.Bindings, bindings...)
	}
	job.MarkLegacyFallback(p.deps.Bindings)
	return nil
}

// buildCore builds what every invocation under the configuration's lease needs, whatever it
// ships: the coordinator (store and lease), the shaper, the Loki client and the dead letter.
// The logger it returns names the invocation. warm may be nil (see buildInvocation).
func buildCore(ctx context.Context, cfg *config.Config, log *slog.Logger, warm *lambda.Warm) (*invocationParts, *shape.Shaper, *slog.Logger, error) {
	inv := lease.NewInvocation()
	log = log.With("invocation", inv)
	p := &invocationParts{opts: cfg.JobOptions()}
	p.opts.Invocation, p.opts.Log, p.opts.Hook, p.opts.Now = inv, log, testHook, testNow
	st, err := warm.Store(func() (*store.Store, error) { return buildStore(ctx, cfg, log) }, store.Options{Logger: log, Now: testNow})
	if err != nil {
		return nil, nil, nil, err
	}
	l, err := buildLease(cfg, st, inv, log)
	if err != nil {
		return nil, nil, nil, err
	}
	so := cfg.SessionOptions()
	so.Logger = log
	p.deps.Coordinator = &job.LeaseCoordinator{Lease: l, Store: st, Options: so}
	sh, err := buildShaper(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	p.opts.LabelGuard = cfg.LabelGuardOptions(sh.PromotedLabelNames())
	lo := lokiOptions(cfg.Sink.Loki, cfg.HTTP, log)
	lo.Labels.ExtraAllowed = append(lo.Labels.ExtraAllowed, sh.PromotedLabelNames()...)
	sink, err := warm.Loki(lo)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w the Loki client (sink.loki): %w", errWiring, err)
	}
	p.deps.Sink = sink
	return p, sh, log, nil
}

// openDeadLetter opens sink.loki.dead_letter_path (a file, or an s3:// prefix) for the run.
func openDeadLetter(ctx context.Context, cfg *config.Config, p *invocationParts, warm *lambda.Warm) error {
	if w, err := warm.DeadLetters().Open(ctx, cfg, p.opts.Invocation); err != nil || w != nil {
		if err != nil {
			return fmt.Errorf("%w the dead letter (sink.loki.dead_letter_path): %w", errWiring, err)
		}
		p.opts.DeadLetter = w
	} else if path := cfg.Sink.Loki.DeadLetterPath; path != "" {
		f, err := openDeadLetterFile(path)
		if err != nil {
			return fmt.Errorf("%w the dead letter (sink.loki.dead_letter_path): %w", errWiring, err)
		}
		p.closers = append(p.closers, f)
		p.opts.DeadLetter = f
	}
	return nil
}

// openDeadLetterFile opens the dead-letter file for appending, creating it if need be. A file
// it creates is durable only once its directory entry is: without the directory sync, a power
// loss could take the file away with dead letters a commit already passed (those are fsynced
// in the file, not in its directory).
func openDeadLetterFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_APPEND|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Not created here (a file, a device such as /dev/stderr); a dangling symlink or a file
		// removed meanwhile is still created, as before, without the directory sync.
		return os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	}
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := syncDeadLetterDir(dir); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("syncing the directory %s of the new file (check the disk it is on): %w", dir, err)
	}
	return f, nil
}

// syncDeadLetterDir makes a new dead-letter file's directory entry durable (a variable so a
// test can see it called).
var syncDeadLetterDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) { // a directory that cannot be synced
		return err
	}
	return nil
}

// checkCursors refuses cursors no configured source would use: a key none of them reads (a
// misspelled key, a source not enabled, another job group's or org's key) or a value its source
// cannot decode (it would restart the key from its lookback). It checks every cursor and names
// every refused key; hint says what to check when a key is not read. The sources are built
// offline, as config check builds them.
func checkCursors(ctx context.Context, cfg *config.Config, cursors map[string]json.RawMessage, hint string) error {
	p, err := buildInvocation(ctx, cfg, slog.New(slog.DiscardHandler), nil, true)
	if err != nil {
		return err
	}
	defer p.close()
	var unread, undecodable, configured []string
	for _, key := range slices.Sorted(maps.Keys(cursors)) {
		reader, names, err := job.CheckCursor(p.deps.Bindings, key, cursors[key])
		switch {
		case err != nil:
			undecodable = append(undecodable, fmt.Sprintf("%s cannot use this value for %s: %v", reader, key, err))
		case reader == "":
			unread, configured = append(unread, key), names
		}
	}
	var problems []string
	if len(undecodable) > 0 {
		problems = append(problems, strings.Join(undecodable, "; ")+
			"; a value its source cannot use would restart the key from its lookback: copy a value of the same form from `sf2loki state show --json`")
	}
	if len(unread) > 0 {
		what := "the key "
		if len(unread) > 1 {
			what = fmt.Sprintf("the %d keys ", len(unread))
		}
		problems = append(problems, fmt.Sprintf("no configured source reads %s%s (configured: %s); %s",
			what, strings.Join(unread, ", "), strings.Join(configured, ", "), hint))
	}
	if len(problems) > 0 {
		return exitf(ExitConfig, "%s. Nothing was changed", strings.Join(problems, "; "))
	}
	return nil
}
