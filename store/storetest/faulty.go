package storetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/sf2loki/sf2loki/store"
)

// Faulty wraps a real Backend and injects faults in front of it: LostAck (the real write is
// applied, then an ambiguous error is returned), Unreachable and Conflict (nothing is sent).
// IgnorePrecondition cannot be injected into a real backend and is treated as None.
type Faulty struct {
	store.Backend

	mu    sync.Mutex
	queue map[Op][]Fault
}

// NewFaulty wraps b.
func NewFaulty(b store.Backend) *Faulty { return &Faulty{Backend: b, queue: map[Op][]Fault{}} }

// FailNext queues faults for the next operations of kind op.
func (f *Faulty) FailNext(op Op, faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue[op] = append(f.queue[op], faults...)
}

func (f *Faulty) next(op Op) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queue[op]
	if len(q) == 0 {
		return None
	}
	f.queue[op] = q[1:]
	return q[0]
}

// Load implements store.Backend.
func (f *Faulty) Load(ctx context.Context) ([]byte, store.Version, error) {
	if f.next(OpLoad) == Unreachable {
		return nil, "", fmt.Errorf("%w: injected: unreachable", store.ErrUnavailable)
	}
	return f.Backend.Load(ctx)
}

// Store implements store.Backend.
func (f *Faulty) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	switch f.next(OpStore) {
	case Unreachable:
		return "", fmt.Errorf("%w: injected: unreachable", store.ErrUnavailable)
	case Conflict:
		return "", fmt.Errorf("%w: injected: concurrent conditional request", store.ErrConflict)
	case LostAck:
		if _, err := f.Backend.Store(ctx, data, expect); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: injected: connection reset after the write was applied", store.ErrUnavailable)
	}
	return f.Backend.Store(ctx, data, expect)
}
