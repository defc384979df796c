package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/store"
)

// SnapshotAcquirer is a Lease that lives in the checkpoint document (lease/store). Start hands
// it the snapshot it has just read, so an invocation reads the document once.
type SnapshotAcquirer interface {
	AcquireFrom(ctx context.Context, snap store.Snapshot, floor uint64, wait time.Duration) (Grant, error)
}

// SessionOptions configures Start. Zero values mean the defaults.
type SessionOptions struct {
	// Wait is how long Acquire may wait for a live holder (W). Default 0: busy at once.
	Wait time.Duration
	// RenewEvery is the renew interval R. Default: the grant's duration / 3.
	RenewEvery time.Duration
	// ReleaseTimeout bounds the best-effort release after a failed claim. Default 5s.
	ReleaseTimeout time.Duration
	// MinEpoch, when set, makes the grant's epoch at least MinEpoch (an operator raising the
	// fence floor); epochs still never go backwards.
	MinEpoch uint64
	// Logger receives session events. Default slog.Default().
	Logger *slog.Logger
}

// Session is what a job holds between acquiring and releasing: the lease (kept alive by a
// renewer) and the claimed checkpoint document (owned by one serialized store.Writer). It
// looks the same for every lease backend. All methods are safe for concurrent use.
type Session struct {
	lease   Lease
	w       *store.Writer
	renewer *Renewer
	floor   uint64
	log     *slog.Logger

	mu       sync.Mutex
	released bool
}

// Start runs steps 2–4 of an invocation: read the document (floor = its fence epoch), acquire
// the lease with that floor, start the renewer, and claim the document with the grant's epoch
// (for lease/store the acquisition already was the claim).
//
// Errors: ErrBusy (live holder or lost race; nothing written), store.ErrFenced (a newer epoch
// claimed the document between our acquire and claim; the lease was released), and the store
// and lease sentinels for unavailable, corrupt, foreign-lease, permission and integrity
// problems. ctx bounds the whole start; Session.Context derives from it.
func Start(ctx context.Context, l Lease, st *store.Store, o SessionOptions) (*Session, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReleaseTimeout <= 0 {
		o.ReleaseTimeout = 5 * time.Second
	}
	snap, err := st.Read(ctx)
	if err != nil {
		return nil, err
	}
	floor := snap.Floor()
	if o.MinEpoch > 0 {
		floor = max(floor, o.MinEpoch-1)
	}
	var g Grant
	if sa, ok := l.(SnapshotAcquirer); ok {
		g, err = sa.AcquireFrom(ctx, snap, floor, o.Wait)
	} else {
		g, err = l.Acquire(ctx, floor, o.Wait)
	}
	if err != nil {
		return nil, err
	}
	every := o.RenewEvery
	if every <= 0 {
		every = max(g.Duration/3, time.Millisecond)
	}
	r := NewRenewer(ctx, l, g, every, o.Logger)
	w := g.Writer
	if w == nil {
		w, err = st.Claim(ctx, g.ClaimRequest(), snap)
		if err != nil {
			r.Stop()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ReleaseTimeout)
			defer cancel()
			if rerr := l.Release(rctx, r.Grant()); rerr != nil {
				o.Logger.Warn("releasing the lease after a failed claim", "epoch", g.Epoch, "error", rerr)
			}
			return nil, err
		}
	}
	return &Session{lease: l, w: w, renewer: r, floor: snap.Floor(), log: o.Logger}, nil
}

// Epoch is the session's epoch.
func (s *Session) Epoch() uint64 { return s.w.Epoch() }

// Holder is the lease holder identity ("<pod-or-host>/<invocation id>").
func (s *Session) Holder() string { return s.renewer.Grant().Holder }

// Invocation is the invocation id (also in every writer stamp).
func (s *Session) Invocation() string { return s.w.Invocation() }

// Grant returns the current grant (refreshed by each renewal).
func (s *Session) Grant() Grant { return s.renewer.Grant() }

// Floor is the document's fence epoch read before acquiring.
func (s *Session) Floor() uint64 { return s.floor }

// Document returns a copy of the last confirmed document.
func (s *Session) Document() *store.Document { return s.w.Document() }

// Checkpoints returns the confirmed checkpoints: the claimed version's, plus this session's
// commits. Sources start from these and from nothing else.
func (s *Session) Checkpoints() map[string]store.Checkpoint { return s.w.Checkpoints() }

// Counters returns the confirmed counters.
func (s *Session) Counters() map[string]store.Counter { return s.w.Counters() }

// Stats returns the writer's counters (conflicts, lost acknowledgements, retries).
func (s *Session) Stats() store.WriterStats { return s.w.Stats() }

// Context is canceled when the lease is lost (context.Cause wraps ErrLost), when the context
// given to Start ends, or after Release. Intake runs under it; a commit after loss is still
// allowed and decided by the store.
func (s *Session) Context() context.Context { return s.renewer.Context() }

// Lost returns why the lease was lost, or nil while it is held.
func (s *Session) Lost() error { return s.renewer.Lost() }

// Commit writes c (checkpoints and counters) in one epoch-conditioned write. See
// store.Writer.Commit for the results; store.ErrFenced also cancels Context.
func (s *Session) Commit(ctx context.Context, c store.Change) error {
	if c.Lease != nil {
		return errors.New("session commit: the lease state is the lease's business, not the job's")
	}
	s.mu.Lock()
	released := s.released
	s.mu.Unlock()
	if released {
		return ErrReleased
	}
	err := s.w.Commit(ctx, c)
	if errors.Is(err, store.ErrFenced) {
		s.renewer.cancel(fmt.Errorf("%w: %w", ErrLost, err))
	}
	return err
}

// Release stops the renewer and gives the lease up (keeping its epoch). Call it once every
// push has stopped and the final commit is decided. A lease that is no longer ours is not an
// error worth failing the run for: Release then returns an error wrapping ErrLost.
func (s *Session) Release(ctx context.Context) error {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return nil
	}
	s.released = true
	s.mu.Unlock()
	s.renewer.Stop()
	if err := s.lease.Release(ctx, s.renewer.Grant()); err != nil {
		return fmt.Errorf("releasing the lease: %w", err)
	}
	return nil
}
