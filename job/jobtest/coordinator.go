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
	s := &Session{w: w, fresh: snap.Absent, lost: make(chan struct{})}
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

// Session is a claimed document. It implements job.Session, job.CounterSession and the loss
// cause the job reads when Lost fires.
type Session struct {
	w     *store.Writer
	fresh bool
	lost  chan struct{}

	lostOnce sync.Once
	mu       sync.Mutex
	cause    error
}

var (
	_ job.Session        = (*Session)(nil)
	_ job.CounterSession = (*Session)(nil)
)

// Epoch is the claimed epoch.
func (s *Session) Epoch() uint64 { return s.w.Epoch() }

// Holder is "test/" and the invocation.
func (s *Session) Holder() string { return "test/" + s.w.Invocation() }

// Fresh reports that the document did not exist before the claim.
func (s *Session) Fresh() bool { return s.fresh }

// Checkpoints are the cursors of the claimed version.
func (s *Session) Checkpoints() map[string]json.RawMessage { return values(s.w.Checkpoints()) }

// Commit writes cursor updates through the epoch-conditioned writer.
func (s *Session) Commit(ctx context.Context, updates map[string]json.RawMessage) error {
	return s.w.Commit(ctx, store.Change{Set: updates})
}

// Counters are the named counters of the claimed version.
func (s *Session) Counters() map[string]store.Counter { return s.w.Counters() }

// CommitChange writes cursors and counters together.
func (s *Session) CommitChange(ctx context.Context, c store.Change) error {
	return s.w.Commit(ctx, c)
}

// Lost is closed by LoseLease.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// LoseLease makes the session's lease lost with cause (what LossCause returns): Lost closes.
// Only the first call has an effect.
func (s *Session) LoseLease(cause error) {
	s.lostOnce.Do(func() {
		s.mu.Lock()
		s.cause = cause
		s.mu.Unlock()
		close(s.lost)
	})
}

// LossCause is the cause given to LoseLease, nil while the lease is held.
func (s *Session) LossCause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// Release does nothing: there is no lease to give up.
func (s *Session) Release(context.Context) error { return nil }

// Stats reports the writer's precondition conflicts as CAS retries; there is no lease wait.
func (s *Session) Stats() job.SessionStats {
	return job.SessionStats{CASRetries: s.w.Stats().Conflicts}
}

func values(cps map[string]store.Checkpoint) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(cps))
	for k, cp := range cps {
		out[k] = cp.Value
	}
	return out
}
