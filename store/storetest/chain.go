package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sf2loki/sf2loki/store"
)

// Chain collects every version written to one document and checks the protocol's invariants
// over them: the writes form a single chain (each version is the base of at most one
// successful write), claims raise the fence strictly (I4), no two invocations write under one
// epoch (I5), every version parses (I7), and no integer checkpoint value ever decreases (I1).
// It is safe for concurrent use.
type Chain struct {
	mu     sync.Mutex
	writes []Write
}

// Add records one successful write.
func (c *Chain) Add(w Write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, w)
}

// Len returns the number of recorded writes.
func (c *Chain) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// Verify checks the invariants and returns every violation found.
func (c *Chain) Verify() error {
	c.mu.Lock()
	writes := append([]Write(nil), c.writes...)
	c.mu.Unlock()
	return VerifyWrites(writes)
}

// VerifyWrites checks the invariants over writes recorded in any order (for example merged
// from several processes).
func VerifyWrites(writes []Write) error {
	var errs []error
	child := map[store.Version]Write{}
	known := map[store.Version]bool{}
	for _, w := range writes {
		if prev, dup := child[w.Expect]; dup {
			errs = append(errs, fmt.Errorf("two writes succeeded on version %q: %q and %q", w.Expect, prev.Version, w.Version))
			continue
		}
		child[w.Expect] = w
		known[w.Version] = true
	}
	var roots int
	for _, w := range writes {
		if w.Expect == "" {
			roots++
		} else if !known[w.Expect] {
			errs = append(errs, fmt.Errorf("write %q is based on version %q that no recorded write produced", w.Version, w.Expect))
		}
	}
	if roots > 1 {
		errs = append(errs, fmt.Errorf("%d writes created the document", roots))
	}
	var (
		seen       int
		fence      uint64
		values     = map[string]int64{}
		epochOwner = map[uint64]string{}
	)
	for w, ok := child[""]; ok; w, ok = child[w.Version] {
		seen++
		doc, _, err := store.Decode("chain", w.Data)
		if err != nil {
			errs = append(errs, fmt.Errorf("version %q does not parse (I7): %w", w.Version, err))
			continue
		}
		f, st := doc.FenceEpoch(), doc.Writer
		if st == nil {
			errs = append(errs, fmt.Errorf("version %q has no writer stamp", w.Version))
			continue
		}
		if f < fence {
			errs = append(errs, fmt.Errorf("version %q moved the fence back from %d to %d", w.Version, fence, f))
		}
		if st.Seq == 0 && seen > 1 && f <= fence {
			errs = append(errs, fmt.Errorf("claim %q did not raise the fence (%d -> %d) (I4)", w.Version, fence, f))
		}
		fence = max(fence, f)
		if owner, ok := epochOwner[st.Epoch]; ok && owner != st.Invocation {
			errs = append(errs, fmt.Errorf("epoch %d written by two invocations %q and %q (I5)", st.Epoch, owner, st.Invocation))
		}
		epochOwner[st.Epoch] = st.Invocation
		if st.Epoch != f {
			errs = append(errs, fmt.Errorf("version %q written by epoch %d under fence %d", w.Version, st.Epoch, f))
		}
		for k, cp := range doc.Checkpoints {
			var n int64
			if json.Unmarshal(cp.Value, &n) != nil {
				continue
			}
			if old, ok := values[k]; ok && n < old {
				errs = append(errs, fmt.Errorf("checkpoint %q went back from %d to %d in version %q (I1)", k, old, n, w.Version))
			}
			values[k] = n
		}
		for k := range values {
			if _, ok := doc.Checkpoints[k]; !ok {
				errs = append(errs, fmt.Errorf("checkpoint %q vanished in version %q", k, w.Version))
				delete(values, k)
			}
		}
	}
	if seen != len(child) {
		errs = append(errs, fmt.Errorf("%d of %d writes are not on the chain from the first write", len(child)-seen, len(child)))
	}
	return errors.Join(errs...)
}

// Recorder is a Backend that records every successful write into Chain.
type Recorder struct {
	store.Backend
	Chain *Chain
}

// Store implements store.Backend and records the write when it succeeds.
func (r *Recorder) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	v, err := r.Backend.Store(ctx, data, expect)
	if err == nil {
		r.Chain.Add(Write{Expect: expect, Version: v, Data: append([]byte(nil), data...)})
	}
	return v, err
}
