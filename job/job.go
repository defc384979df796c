// Package job is one sf2loki invocation (docs/architecture.md, "One invocation"): read the checkpoint document, acquire the
// lease, claim the document with the new epoch, pull one bounded batch from the sources fairly,
// push it to Loki, commit after each push the contiguous pushed prefix of every key through the
// epoch-conditioned writer, release, and report. run-once, schedule, demo and backfill all call
// Run.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

// Coordinator performs steps 2-4 of an invocation: read the document, acquire the lease with the
// document's fence as floor, and claim the document with the new epoch.
type Coordinator interface {
	// Begin returns a claimed session. Errors are classified with errors.Is against the
	// sentinels of package lease (ErrBusy) and store (ErrFenced, ErrForeignLease, ErrCorrupt,
	// ErrIntegrity, ErrPermission, ErrNoLocation, ErrUnavailable).
	Begin(ctx context.Context, invocation string) (Session, error)
	// Peek reads the document's checkpoints without acquiring or claiming (dry runs).
	Peek(ctx context.Context) (map[string]json.RawMessage, error)
}

// Session is a claimed document under a held lease: what every session does. *lease.Session
// is the production one (store.Writer owns the version chain beneath it).
type Session interface {
	Epoch() uint64
	Holder() string
	// Floor is the document's fence epoch read before this session's claim (0: no document).
	Floor() uint64
	// Checkpoints and Counters are the claimed version's plus this session's commits: the only
	// cursors and counters a run reads.
	Checkpoints() map[string]store.Checkpoint
	Counters() map[string]store.Counter
	// Commit writes one change (cursors and counters together) through the epoch-conditioned
	// writer; store.ErrFenced means a newer epoch owns the document.
	Commit(ctx context.Context, c store.Change) error
	// Context is canceled when the lease is lost (Lost then says why), when the context given
	// to Begin ends, or after Release.
	Context() context.Context
	// Lost returns why the lease was lost (wrapping lease.ErrLost, with lease.ErrExpired when
	// renewals failed past its validity), or nil while it is held.
	Lost() error
	// Release gives the lease up (keeping the epoch). Called once, last.
	Release(ctx context.Context) error
	// Stats counts the store writes' conflicts, lost acknowledgements and retries.
	Stats() store.WriterStats
}

// Pusher pushes entries to Loki; *loki.Client implements it.
type Pusher interface {
	Push(ctx context.Context, entries []loki.Entry) loki.Result
}

// Destination is a receiver the job pushes to: one Loki URL and tenant.
type Destination struct {
	// Name identifies the receiver and tenant: the stream heads are kept per name (StreamID),
	// and the run report and the metrics break pushes down by it. Two destinations share a name
	// only when they are the same receiver and tenant.
	Name string
	Sink Pusher
}

// Binding is one configured source of one org.
type Binding struct {
	// Org is the org's name: keys get the prefix "org=<Org>:". Empty for the single-org form.
	Org string
	// LegacyFallback makes the binding read a key's unprefixed cursor when its prefixed one is
	// absent (the first org of a multi-org config migrating from single-org state).
	LegacyFallback bool
	Source         source.Source
	// Destination receives the binding's entries; nil means Deps.Sink (named by
	// Options.Ordering.Destination). Bindings sharing a *Destination share its pushes.
	Destination *Destination
}

// KeyPrefix returns the checkpoint key prefix of the binding's org.
func (b Binding) KeyPrefix() string {
	if b.Org == "" {
		return ""
	}
	return "org=" + b.Org + ":"
}

// Reads returns key as the binding's source knows it (its org prefix removed) and whether the
// binding reads that key: its org's keys and, with LegacyFallback, unprefixed ones.
func (b Binding) Reads(key string) (string, bool) {
	prefix := b.KeyPrefix()
	if rest, ok := strings.CutPrefix(key, prefix); ok && (prefix != "" || !strings.HasPrefix(key, "org=")) {
		return rest, true
	}
	if b.LegacyFallback && !strings.HasPrefix(key, "org=") {
		return key, true
	}
	return "", false
}

// MarkLegacyFallback lets the first org of a multi-org configuration read unprefixed keys
// (state written by a single-org configuration) where it has no prefixed ones.
func MarkLegacyFallback(bs []Binding) {
	if len(bs) == 0 || bs[0].Org == "" {
		return
	}
	first := bs[0].Org
	for i := range bs {
		if bs[i].Org == first {
			bs[i].LegacyFallback = true
		}
	}
}

// CheckCursor finds the binding that reads key and lets its source decode value: reader is
// that binding's report name ("" when no binding reads the key) and err the source's refusal
// of the value. The bindings reading no such key are listed in names.
func CheckCursor(bs []Binding, key string, value json.RawMessage) (reader string, names []string, err error) {
	for _, b := range bs {
		rest, ok := b.Reads(key)
		if !ok {
			names = append(names, b.ReportName())
			continue
		}
		if _, err := b.Source.CursorTime(rest, value); err != nil {
			if errors.Is(err, source.ErrNotMyKey) {
				names = append(names, b.ReportName())
				continue
			}
			return b.ReportName(), names, err
		}
		return b.ReportName(), names, nil
	}
	return "", names, nil
}

// ReportName is how the binding is named in the run report.
func (b Binding) ReportName() string { return b.KeyPrefix() + b.Source.Name() }

// RejectPolicy says what happens to entries the receiver rejects for good.
type RejectPolicy int

const (
	// RejectDrop counts the entry by reason, writes it to the dead letter, and advances.
	RejectDrop RejectPolicy = iota
	// RejectFreeze stops the key at the entry until an operator acts.
	RejectFreeze
)

// Step names a point in the invocation where a test hook may run (fault injection).
type Step string

// Steps at which Options.Hook is called.
const (
	StepAfterClaim    Step = "after_claim"
	StepMidPull       Step = "mid_pull"
	StepAfterPush     Step = "after_push"
	StepBeforeCommit  Step = "before_commit"
	StepAfterCommit   Step = "after_commit"
	StepBeforeRelease Step = "before_release"
)

// Options configures one invocation. Zero values take the documented defaults.
type Options struct {
	// MaxRecords and MaxBytes bound the batch (records pulled, line bytes). Ignored with Drain.
	MaxRecords int
	MaxBytes   int64
	// MaxDuration is the internal deadline D of the whole invocation.
	MaxDuration time.Duration
	// PushReserve (P), CommitReserve (C) and ReleaseReserve (Rel) are kept free at the end of
	// the run: intake stops at D - (P + C + Rel).
	PushReserve, CommitReserve, ReleaseReserve time.Duration
	// Drain repeats pull, push and commit until every source is caught up or time is out.
	Drain bool
	// MustFinish is for a run whose keys no later scheduled run continues (a backfill's window):
	// a run that would end ok but not caught up (a key that waits for a later run,
	// source.ErrWaiting, or the time ran out with more to ship) ends partial instead
	// (unavailable when nothing was shipped), since only running it again ships the rest.
	MustFinish bool
	// DryRun pulls and shapes one batch and writes the entries to DryRunOut as JSON lines,
	// without acquiring, claiming, pushing or committing.
	DryRun    bool
	DryRunOut io.Writer
	// PushEntries and PushBytes bound one push (and so the work between two commits).
	PushEntries int
	PushBytes   int64
	// Quantum is how many records one key may yield before the next key's turn.
	Quantum int
	// OnPermanentReject is the policy for entries the receiver rejects for good.
	OnPermanentReject RejectPolicy
	// DeadLetter receives dropped entries as JSON lines (optional).
	DeadLetter io.Writer
	// Egress caps lines/s, bytes/s and the daily byte budget (zero = no caps).
	Egress EgressOptions
	// LabelGuard caps the distinct values of the promoted labels per UTC day (job/labelguard.go).
	LabelGuard LabelGuardOptions
	// Ordering keeps every entry inside the receiver's timestamp rules (docs/ordering.md).
	Ordering OrderingOptions
	// Invocation is this run's id (random when empty).
	Invocation string
	// Hook is called at each Step (tests inject crashes there). Nil in production.
	Hook func(Step)
	// Observer receives live measurements (metrics). Optional.
	Observer Observer
	Log      *slog.Logger
	Now      func() time.Time
}

// Defaults of Options.
const (
	DefaultMaxRecords  = 100_000
	DefaultMaxBytes    = 256 << 20
	DefaultMaxDuration = 3 * time.Minute
	DefaultPushEntries = 20_000
	DefaultPushBytes   = 4 << 20
	DefaultQuantum     = 1000
)

func (o Options) withDefaults() Options {
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxDuration
	}
	if o.PushReserve <= 0 {
		o.PushReserve = 30 * time.Second
	}
	if o.CommitReserve <= 0 {
		o.CommitReserve = 15 * time.Second
	}
	if o.ReleaseReserve <= 0 {
		o.ReleaseReserve = 2 * time.Second
	}
	if o.PushEntries <= 0 {
		o.PushEntries = DefaultPushEntries
	}
	if o.PushBytes <= 0 {
		o.PushBytes = DefaultPushBytes
	}
	if o.Quantum <= 0 {
		o.Quantum = DefaultQuantum
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DryRunOut == nil {
		o.DryRunOut = io.Discard
	}
	return o
}

// Observer receives measurements while a run is in progress; the run report carries the totals.
// Implementations must be safe for concurrent use and cheap: they are called on the hot path.
type Observer interface {
	// Pushed is called after every push with the destination's name (DestinationLabel), the
	// entries pushed (in push order, Ref = index), the client's result and the push's duration.
	Pushed(destination string, entries []loki.Entry, res *loki.Result, took time.Duration)
	// Committed is called after every commit attempt with its duration and error.
	Committed(took time.Duration, err error)
}

// Deps are the parts an invocation works with.
type Deps struct {
	Coordinator Coordinator
	Bindings    []Binding
	// Sink is the default destination: every binding without a Destination of its own.
	Sink Pusher
	// Limits sample orgs' /limits at most once per interval (job/limits.go).
	Limits []LimitsPoll
}
