package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/store"
)

// Keys are the checkpoint keys concurrency workers increment.
var Keys = []string{"k0", "k1", "k2"}

// Outcome is what one worker saw in one round.
type Outcome struct {
	Worker       string `json:"worker"`
	Epoch        uint64 `json:"epoch"`
	Won          bool   `json:"won"`           // the claim succeeded
	StaleFenced  bool   `json:"stale_fenced"`  // a commit from the previous round's writer was fenced
	CommitFenced int    `json:"commit_fenced"` // commits of this round's writer that were fenced
	Err          string `json:"err,omitempty"` // anything that is neither success nor ErrFenced
}

// Worker claims and commits against st for rounds rounds. Every claim uses epoch = the read
// floor + 1, so concurrent workers deliberately compute the same epoch; some workers pause
// between reading and claiming (stale claims) and between commits; and at the start of each
// round the previous round's writer commits from its cached view (a stale writer).
func Worker(ctx context.Context, st *store.Store, id string, rounds int, seed uint64) []Outcome {
	rng := rand.New(rand.NewPCG(seed, 0x5f2))
	pause := func(maxMs int) {
		if maxMs > 0 {
			time.Sleep(time.Duration(rng.IntN(maxMs*1000)) * time.Microsecond)
		}
	}
	var (
		out  []Outcome
		prev *store.Writer
	)
	for r := range rounds {
		o := Outcome{Worker: id}
		if prev != nil {
			k := Keys[rng.IntN(len(Keys))]
			err := prev.Commit(ctx, store.Change{Set: map[string]json.RawMessage{k: Int(IntValue(prev.Checkpoints(), k) + 1)}})
			switch {
			case errors.Is(err, store.ErrFenced):
				o.StaleFenced = true
			case err != nil:
				o.Err = "stale commit: " + err.Error()
			}
			prev = nil
		}
		snap, err := st.Read(ctx)
		if err != nil {
			o.Err = "read: " + err.Error()
			out = append(out, o)
			continue
		}
		o.Epoch = snap.Floor() + 1
		if rng.IntN(4) == 0 {
			pause(8) // a stale writer claims late
		}
		w, err := st.Claim(ctx, Req(o.Epoch, fmt.Sprintf("%s-r%d", id, r)), snap)
		switch {
		case errors.Is(err, store.ErrFenced):
			out = append(out, o)
			continue
		case err != nil:
			o.Err = "claim: " + err.Error()
			out = append(out, o)
			continue
		}
		o.Won = true
		for range 3 {
			pause(2)
			k := Keys[rng.IntN(len(Keys))]
			err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{k: Int(IntValue(w.Checkpoints(), k) + 1)}})
			if errors.Is(err, store.ErrFenced) {
				o.CommitFenced++
				break
			}
			if err != nil {
				o.Err = "commit: " + err.Error()
				break
			}
		}
		prev = w
		out = append(out, o)
	}
	return out
}

// CheckOutcomes asserts the per-epoch rule: every epoch any worker computed was won by exactly
// one worker (claims use floor+1, so each success raises the fence by exactly one), every
// other claim of it was fenced, and nothing failed otherwise. It returns how many claims and
// stale commits were fenced, so callers can require real contention.
func CheckOutcomes(outcomes []Outcome) (fencedClaims, fencedCommits int, err error) {
	var errs []error
	winners := map[uint64]int{}
	for _, o := range outcomes {
		if o.Err != "" {
			errs = append(errs, fmt.Errorf("%s epoch %d: %s", o.Worker, o.Epoch, o.Err))
		}
		if o.Epoch == 0 {
			continue
		}
		if o.Won {
			winners[o.Epoch]++
		} else {
			winners[o.Epoch] += 0
			fencedClaims++
		}
		if o.StaleFenced {
			fencedCommits++
		}
		fencedCommits += o.CommitFenced
	}
	for e, n := range winners {
		if n != 1 {
			errs = append(errs, fmt.Errorf("epoch %d was won by %d writers, want exactly 1", e, n))
		}
	}
	return fencedClaims, fencedCommits, errors.Join(errs...)
}

// RunConcurrency runs iterations of writers goroutines (Worker) against a fresh document from
// newBackend each time, then checks the outcomes and the invariants over every written version.
func RunConcurrency(t *testing.T, newBackend Factory, writers, rounds, iterations int) {
	var fencedClaims, fencedCommits int
	for it := range iterations {
		chain := &Chain{}
		st := NewStore(&Recorder{Backend: newBackend(t), Chain: chain})
		var (
			mu  sync.Mutex
			all []Outcome
			wg  sync.WaitGroup
		)
		for i := range writers {
			wg.Go(func() {
				out := Worker(context.Background(), st, fmt.Sprintf("w%d", i), rounds, uint64(it*1000+i))
				mu.Lock()
				all = append(all, out...)
				mu.Unlock()
			})
		}
		wg.Wait()
		fc, fm, err := CheckOutcomes(all)
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if err := chain.Verify(); err != nil {
			t.Fatalf("iteration %d: invariants over %d versions: %v", it, chain.Len(), err)
		}
		fencedClaims += fc
		fencedCommits += fm
	}
	if fencedClaims == 0 || fencedCommits == 0 {
		t.Fatalf("no contention happened (fenced claims %d, fenced commits %d): the test proved nothing", fencedClaims, fencedCommits)
	}
	t.Logf("%d iterations: %d claims and %d commits fenced", iterations, fencedClaims, fencedCommits)
}
