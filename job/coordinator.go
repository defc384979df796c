package job

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// LeaseCoordinator is the production Coordinator: a lease backend and the checkpoint store,
// joined by lease.Start.
type LeaseCoordinator struct {
	Lease   lease.Lease
	Store   *store.Store
	Options lease.SessionOptions
}

// Begin reads the document, acquires the lease with its fence as floor, and claims it.
func (c *LeaseCoordinator) Begin(ctx context.Context, _ string) (Session, error) {
	start := time.Now()
	s, err := lease.Start(ctx, c.Lease, c.Store, c.Options)
	if err != nil {
		return nil, err
	}
	ls := &leaseSession{s: s, wait: time.Since(start), lost: make(chan struct{})}
	go func() {
		<-s.Context().Done()
		if s.Lost() != nil {
			close(ls.lost)
		}
	}()
	return ls, nil
}

// Peek returns the stored checkpoints without acquiring or claiming.
func (c *LeaseCoordinator) Peek(ctx context.Context) (map[string]json.RawMessage, error) {
	snap, err := c.Store.Read(ctx)
	if err != nil || snap.Absent {
		return nil, err
	}
	return values(snap.Doc.Checkpoints), nil
}

type leaseSession struct {
	s    *lease.Session
	wait time.Duration
	lost chan struct{}
}

func (l *leaseSession) Epoch() uint64  { return l.s.Epoch() }
func (l *leaseSession) Holder() string { return l.s.Holder() }
func (l *leaseSession) Fresh() bool    { return l.s.Floor() == 0 && len(l.s.Checkpoints()) == 0 }
func (l *leaseSession) Checkpoints() map[string]json.RawMessage {
	return values(l.s.Checkpoints())
}
func (l *leaseSession) Commit(ctx context.Context, updates map[string]json.RawMessage) error {
	return l.s.Commit(ctx, store.Change{Set: updates})
}
func (l *leaseSession) Counters() map[string]store.Counter { return l.s.Counters() }
func (l *leaseSession) CommitChange(ctx context.Context, c store.Change) error {
	return l.s.Commit(ctx, c)
}
func (l *leaseSession) LossCause() error                  { return l.s.Lost() }
func (l *leaseSession) Lost() <-chan struct{}             { return l.lost }
func (l *leaseSession) Release(ctx context.Context) error { return l.s.Release(ctx) }
func (l *leaseSession) Stats() SessionStats {
	st := l.s.Stats()
	return SessionStats{LeaseWait: l.wait, CASRetries: st.Conflicts + st.Retries, Conflicts: st.Conflicts,
		LostAcks: st.LostAcks, Floor: l.s.Floor()}
}

func values(cps map[string]store.Checkpoint) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(cps))
	for k, cp := range cps {
		out[k] = cp.Value
	}
	return out
}
