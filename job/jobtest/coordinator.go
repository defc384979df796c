// Package jobtest holds a job.Coordinator for tests: the real checkpoint-store protocol over
// the in-memory backend of package storetest, without a lease. It lets the tests of the job and
// of the sources run job.Run end to end; the lease wiring (job.LeaseCoordinator) is tested by
// the job's crash simulation and the adversarial suite. Not for production use.
package jobtest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// Coordinator claims the checkpoint document for each Begin with the epoch floor+1 and holds no
// lease: a session is lost only when a test says so (Session.LoseLease). Safe for concurrent
// use.
type Coordinator struct {
	// Memory is the in-memory backend holding the document (for fault injection and Put).
	Memory *storetest.Memory
	// Store is the checkpoint store over Memory (to read the whole document back).
	Store *store.Store

	mu       sync.Mutex
	sessions []*Session
}

var _ job.Coordinator = (*Coordinator)(nil)

// New returns a Coordinator over a fresh, empty in-memory document.
func New() *Coordinator {
	mem := storetest.NewMemory()
	return &Coordinator{Memory: mem, Store: storetest.NewStore(mem)}
}

// Begin reads the document and claims it with its floor + 1 as the epoch.
func (c *Coordinator) Begin(ctx context.Context, invocation string) (job.Session, error) {
	snap, err := c.Store.Read(ctx)
	if err != nil {
		return nil, err
	}
	w, err := c.Store.Claim(ctx, store.ClaimRequest{Epoch: snap.Floor() + 1, Invocation: invocation,
		Holder: "test/" + invocation, Lease: store.LeaseRef{Kind: "store", Name: "sf2loki"}}, snap)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &Session{w: w, floor: snap.Floor(), ctx: sctx, cancel: cancel}
	c.mu.Lock()
	c.sessions = append(c.sessions, s)
	c.mu.Unlock()
	return s, nil
}

// Peek returns the stored checkpoints (nil when there is no document).
func (c *Coordinator) Peek(ctx context.Context) (map[string]json.RawMessage, error) {
	snap, err := c.Store.Read(ctx)
	if err != nil || snap.Absent {
		return nil, err
	}
	return values(snap.Doc.Checkpoints), nil
}

// Stored is Peek for a test: it fails t if the document cannot be read.
func (c *Coordinator) Stored(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	cps, err := c.Peek(context.Background())
	if err != nil {
		t.Fatalf("read the stored checkpoints: %v", err)
	}
	return cps
}

// Sessions returns the sessions begun so far, oldest first.
func (c *Coordinator) Sessions() []*Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Session(nil), c.sessions...)
}

// Session is a claimed document with no lease: it is lost only when a test says so.
type Session struct {
	w      *store.Writer
	floor  uint64
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	cause error
}

var _ job.Session = (*Session)(nil)

// Epoch is the claimed epoch.
func (s *Session) Epoch() uint64 { return s.w.Epoch() }

// Holder is "test/" and the invocation.
func (s *Session) Holder() string { return "test/" + s.w.Invocation() }

// Floor is the document's fence epoch before the claim.
func (s *Session) Floor() uint64 { return s.floor }

// Checkpoints are the cursors of the claimed version plus this session's commits.
func (s *Session) Checkpoints() map[string]store.Checkpoint { return s.w.Checkpoints() }

// Counters are the named counters of the claimed version plus this session's commits.
func (s *Session) Counters() map[string]store.Counter { return s.w.Counters() }

// Commit writes cursors and counters together through the epoch-conditioned writer.
func (s *Session) Commit(ctx context.Context, c store.Change) error { return s.w.Commit(ctx, c) }

// Context is canceled by LoseLease, by the end of the context given to Begin, or by Release.
func (s *Session) Context() context.Context { return s.ctx }

// LoseLease makes the session's lease lost with cause (what Lost returns). Only the first call
// has an effect.
func (s *Session) LoseLease(cause error) {
	if cause == nil {
		cause = lease.ErrLost
	}
	s.mu.Lock()
	if s.cause == nil {
		s.cause = cause
	}
	s.mu.Unlock()
	s.cancel(cause)
}

// Lost is the cause given to LoseLease, nil while the lease is held.
func (s *Session) Lost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// Release cancels the session's context: there is no lease to give up.
func (s *Session) Release(context.Context) error {
	s.cancel(context.Canceled)
	return nil
}

// Stats reports the writer's conflicts, lost acknowledgements and retries.
func (s *Session) Stats() store.WriterStats { return s.w.Stats() }

func values(cps map[string]store.Checkpoint) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(cps))
	for k, cp := range cps {
		out[k] = cp.Value
	}
	return out
}
