package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/store"
)

// interleave is a Backend that, once armed, runs between right after one write has reached
// the inner backend (applied, or dropped before it was sent) and then reports that write as
// ambiguous: another process acts while a writer waits for an answer that never comes.
type interleave struct {
	store.Backend

	mu      sync.Mutex
	armed   bool
	apply   bool
	between func()
}

// arm makes the next write run between (after applying the write when apply is set).
func (b *interleave) arm(apply bool, between func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed, b.apply, b.between = true, apply, between
}

// Store implements store.Backend.
func (b *interleave) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	b.mu.Lock()
	armed, apply, between := b.armed, b.apply, b.between
	b.armed = false
	b.mu.Unlock()
	if !armed {
		return b.Backend.Store(ctx, data, expect)
	}
	if apply {
		if _, err := b.Backend.Store(ctx, data, expect); err != nil {
			return "", err
		}
	}
	between()
	return "", fmt.Errorf("%w: injected: no answer to the write", store.ErrUnavailable)
}

func set(kv ...any) store.Change {
	c := store.Change{Set: map[string]json.RawMessage{}}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set[kv[i].(string)] = Int(int64(kv[i+1].(int)))
	}
	return c
}

// requireFencedAndUntouched commits c through w and fails unless the commit is ErrFenced and
// the stored bytes are unchanged.
func requireFencedAndUntouched(t *testing.T, b store.Backend, w *store.Writer, c store.Change, what string) {
	t.Helper()
	before, _ := load(t, b)
	if err := w.Commit(context.Background(), c); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("%s: got %v, want ErrFenced", what, err)
	}
	if after, _ := load(t, b); !bytes.Equal(before, after) {
		t.Fatalf("%s changed the document:\nbefore %s\nafter  %s", what, before, after)
	}
}

// Scenarios 17 and 37: A's commit is in flight (it reached the store, or it did not) when B
// claims the document; A never gets an answer. A's verification re-read shows B's newer epoch:
// A is fenced, nothing is applied twice, B keeps what it claimed (A's landed commit included),
// and nothing A sends afterwards lands.
func testProtocolCommitInFlightDuringTakeoverIsFenced(t *testing.T, newBackend Factory) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			ctx := context.Background()
			chain := &Chain{}
			rec := &Recorder{Backend: newBackend(t), Chain: chain}
			ib := &interleave{Backend: rec}
			a := claim(t, NewStore(ib), Req(1, "a"))
			must(t, a.Commit(ctx, set("k", 1, "j", 1)))
			var b *store.Writer
			ib.arm(applied, func() { b = claim(t, NewStore(rec), Req(2, "b")) })
			if err := a.Commit(ctx, set("k", 5, "j", 5)); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("A's commit answered by nothing while B claimed: got %v, want ErrFenced", err)
			}
			want := 1
			if applied {
				want = 5 // B claimed on top of A's landed commit and carries it
			}
			if got := IntValue(b.Checkpoints(), "k"); got != int64(want) {
				t.Fatalf("B claimed k = %d, want %d", got, want)
			}
			must(t, b.Commit(ctx, set("k", want+1)))
			requireFencedAndUntouched(t, rec, a, set("k", 9, "j", 9), "A's next commit")
			writes := map[bool]int{true: 5, false: 4}[applied] // claim, commit, [in-flight commit], claim, commit
			if chain.Len() != writes {
				t.Fatalf("%d writes reached the store, want %d: something was applied twice", chain.Len(), writes)
			}
			must(t, chain.Verify())
		})
	}
}

// Scenario 33 for a claim that takes an existing document over (the create is
// Protocol/ClaimLostAckOnCreate): B's claim lands, its answer is lost; B's re-read finds its
// own claim stamp and proceeds, the claim is written once, and A, whose document B claimed, is
// fenced.
func testProtocolClaimLostAckOnTakeover(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	chain := &Chain{}
	rec := &Recorder{Backend: newBackend(t), Chain: chain}
	fb := NewFaulty(rec)
	st := NewStore(fb)
	a := claim(t, st, Req(1, "a"))
	must(t, a.Commit(ctx, set("k", 1)))
	fb.FailNext(OpStore, LostAck)
	b := claim(t, st, Req(2, "b"))
	if s := b.Stats(); s.LostAcks != 1 || s.Retries != 0 {
		t.Fatalf("B's claim stats after a lost acknowledgement: %+v, want 1 lost ack and no retry", s)
	}
	if got := IntValue(b.Checkpoints(), "k"); got != 1 {
		t.Fatalf("B claimed k = %d, want 1", got)
	}
	must(t, b.Commit(ctx, set("k", 2)))
	requireFencedAndUntouched(t, rec, a, set("k", 3), "A's commit after B's claim")
	if chain.Len() != 4 {
		t.Fatalf("%d writes, want 4 (claim, commit, claim, commit): the claim was written twice", chain.Len())
	}
	must(t, chain.Verify())
	var epochs []uint64
	for _, h := range mustRead(t, st).Doc.History {
		epochs = append(epochs, h.Epoch)
	}
	if fmt.Sprint(epochs) != "[1 2]" {
		t.Fatalf("claim history epochs %v, want [1 2]", epochs)
	}
}

// A commit whose outcome A cannot learn (the write landed or not; every re-read fails) is
// pending when B claims the document. A's next commit settles the pending one first and finds
// B's newer epoch: A is fenced and writes nothing, so neither its pending change nor its new
// one can take B's checkpoints back.
func testProtocolPendingCommitAfterTakeoverIsFenced(t *testing.T, newBackend Factory) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			ctx := context.Background()
			chain := &Chain{}
			rec := &Recorder{Backend: newBackend(t), Chain: chain}
			fb := NewFaulty(rec)
			a := claim(t, NewStore(fb), Req(1, "a"))
			must(t, a.Commit(ctx, set("k", 1)))
			fault := Unreachable
			if landed {
				fault = LostAck
			}
			fb.FailNext(OpStore, fault)
			fb.FailNext(OpLoad, Unreachable, Unreachable, Unreachable)
			if err := a.Commit(ctx, set("k", 5)); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("a commit whose outcome cannot be read back: got %v, want ErrUnavailable", err)
			}
			b := claim(t, NewStore(rec), Req(2, "b"))
			want := 1
			if landed {
				want = 5
			}
			if got := IntValue(b.Checkpoints(), "k"); got != int64(want) {
				t.Fatalf("B claimed k = %d, want %d", got, want)
			}
			must(t, b.Commit(ctx, set("k", want+10)))
			requireFencedAndUntouched(t, rec, a, set("j", 1), "A's commit after B's claim, with A's earlier one pending")
			requireFencedAndUntouched(t, rec, a, set("k", 2), "A's commit once fenced")
			must(t, chain.Verify())
		})
	}
}

// A commit that did not reach the store and whose outcome could not be read back is not lost:
// the next commit finds it did not land and writes its changes with its own, in one write.
func testProtocolUnlandedCommitIsCarriedForward(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	chain := &Chain{}
	fb := NewFaulty(&Recorder{Backend: newBackend(t), Chain: chain})
	st := NewStore(fb)
	w := claim(t, st, Req(1, "a"))
	fb.FailNext(OpStore, Unreachable)
	fb.FailNext(OpLoad, Unreachable, Unreachable, Unreachable)
	if err := w.Commit(ctx, set("k", 1)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	must(t, w.Commit(ctx, set("j", 1)))
	cps := mustRead(t, st).Doc.Checkpoints
	if IntValue(cps, "k") != 1 || IntValue(cps, "j") != 1 {
		t.Fatalf("after the next commit: %v, want k=1 and j=1", cps)
	}
	if chain.Len() != 2 {
		t.Fatalf("%d writes, want 2 (claim, commit)", chain.Len())
	}
	must(t, chain.Verify())
}
