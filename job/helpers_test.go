package job_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/sourcetest"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// memCoord is a coordinator over the real store protocol and the in-memory backend, with an
// epoch of floor+1 and no lease: enough to test the job's pipeline. The real lease wiring is
// tested by the adversarial suite.
type memCoord struct {
	st    *store.Store
	lease store.LeaseRef

	mu       sync.Mutex
	sessions []*memSession
}

func newMemCoord(t *testing.T) (*memCoord, *storetest.Memory) {
	t.Helper()
	mem := storetest.NewMemory()
	return &memCoord{st: storetest.NewStore(mem), lease: store.LeaseRef{Kind: "store", Name: "sf2loki"}}, mem
}

func (c *memCoord) Begin(ctx context.Context, inv string) (job.Session, error) {
	snap, err := c.st.Read(ctx)
	if err != nil {
		return nil, err
	}
	w, err := c.st.Claim(ctx, store.ClaimRequest{Epoch: snap.Floor() + 1, Invocation: inv, Holder: "test/" + inv, Lease: c.lease}, snap)
	if err != nil {
		return nil, err
	}
	s := &memSession{w: w, fresh: snap.Absent, lost: make(chan struct{})}
	c.mu.Lock()
	c.sessions = append(c.sessions, s)
	c.mu.Unlock()
	return s, nil
}

func (c *memCoord) Peek(ctx context.Context) (map[string]json.RawMessage, error) {
	snap, err := c.st.Read(ctx)
	if err != nil || snap.Absent {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for k, cp := range snap.Doc.Checkpoints {
		out[k] = cp.Value
	}
	return out, nil
}

// checkpoints reads the stored cursors.
func (c *memCoord) checkpoints(t *testing.T) map[string]int {
	t.Helper()
	cp, err := c.Peek(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for k, v := range cp {
		n, err := sourcetest.DecodeCursor(v)
		if err != nil {
			t.Fatalf("stored cursor of %s: %v", k, err)
		}
		out[k] = n
	}
	return out
}

type memSession struct {
	w        *store.Writer
	fresh    bool
	lost     chan struct{}
	lostOnce sync.Once
	cause    error
	released bool
}

func (s *memSession) Epoch() uint64  { return s.w.Epoch() }
func (s *memSession) Holder() string { return "test/" + s.w.Invocation() }
func (s *memSession) Fresh() bool    { return s.fresh }
func (s *memSession) Checkpoints() map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, cp := range s.w.Checkpoints() {
		out[k] = cp.Value
	}
	return out
}
func (s *memSession) Commit(ctx context.Context, u map[string]json.RawMessage) error {
	return s.w.Commit(ctx, store.Change{Set: u})
}
func (s *memSession) Counters() map[string]store.Counter { return s.w.Counters() }
func (s *memSession) CommitChange(ctx context.Context, c store.Change) error {
	return s.w.Commit(ctx, c)
}
func (s *memSession) Lost() <-chan struct{} { return s.lost }
func (s *memSession) loseLease()            { s.loseLeaseWith(lease.ErrLost) }
func (s *memSession) loseLeaseWith(cause error) {
	s.lostOnce.Do(func() { s.cause = cause; close(s.lost) })
}
func (s *memSession) LossCause() error              { return s.cause }
func (s *memSession) Release(context.Context) error { s.released = true; return nil }
func (s *memSession) Stats() job.SessionStats {
	return job.SessionStats{CASRetries: s.w.Stats().Conflicts}
}

// receiver starts a strict simulated Loki and returns it with a client pushing to it.
func receiver(t *testing.T, opts simloki.Options) (*simloki.Server, *loki.Client) {
	t.Helper()
	srv := simloki.New(opts)
	c, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// delivered counts, per key and number, how often the receiver holds each numbered record.
func delivered(t *testing.T, srv *simloki.Server) map[string]map[int]int {
	t.Helper()
	out := map[string]map[int]int{}
	for _, e := range srv.Entries() {
		k, n, ok := sourcetest.ParseLine(e.Line)
		if !ok {
			t.Fatalf("unexpected line at the receiver: %q", e.Line)
		}
		if out[k] == nil {
			out[k] = map[int]int{}
		}
		out[k][n]++
	}
	return out
}

// assertExactlyOnce checks that records 1..totals[k] of every key arrived exactly once.
func assertExactlyOnce(t *testing.T, got map[string]map[int]int, totals map[string]int) {
	t.Helper()
	for k, total := range totals {
		for n := 1; n <= total; n++ {
			if c := got[k][n]; c != 1 {
				t.Fatalf("%s #%d delivered %d times, want exactly once", k, n, c)
			}
		}
		if len(got[k]) != total {
			t.Fatalf("%s: %d distinct records delivered, want %d", k, len(got[k]), total)
		}
	}
}

func baseOptions() job.Options {
	return job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second, ReleaseReserve: time.Second}
}
