package job

import (
	"context"
	"encoding/json"

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
	s, err := lease.Start(ctx, c.Lease, c.Store, c.Options)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Peek returns the stored checkpoints without acquiring or claiming.
func (c *LeaseCoordinator) Peek(ctx context.Context) (map[string]json.RawMessage, error) {
	snap, err := c.Store.Read(ctx)
	if err != nil || snap.Absent {
		return nil, err
	}
	return values(snap.Doc.Checkpoints), nil
}

func values(cps map[string]store.Checkpoint) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(cps))
	for k, cp := range cps {
		out[k] = cp.Value
	}
	return out
}
