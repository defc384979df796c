package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

func memory(*testing.T) store.Backend { return storetest.NewMemory() }

func TestConformanceMemory(t *testing.T) { storetest.Run(t, memory) }

func TestConformanceMemoryMD5Versions(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Backend { return storetest.NewMemoryMD5() })
}

func TestConcurrencyMemory(t *testing.T) {
	storetest.RunConcurrency(t, memory, 8, 12, storetest.Iterations(3))
}

func claimed(t *testing.T, st *store.Store, e uint64, inv string) *store.Writer {
	t.Helper()
	snap, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Claim(context.Background(), storetest.Req(e, inv), snap)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func set(k string, v int64) store.Change {
	return store.Change{Set: map[string]json.RawMessage{k: storetest.Int(v)}}
}

// Scenario 39: every write carries a new stamp, so even a writer rewriting "the same" document
// produces different bytes and, with MD5 ETags, a different version.
func TestEveryWriteChangesTheVersion(t *testing.T) {
	m := storetest.NewMemoryMD5()
	st := storetest.NewStore(m)
	w := claimed(t, st, 1, "a")
	seen := map[store.Version]bool{w.Version(): true}
	for range 5 {
		if err := w.Commit(context.Background(), store.Change{}); err != nil {
			t.Fatal(err)
		}
		if seen[w.Version()] {
			t.Fatalf("version %q repeated", w.Version())
		}
		seen[w.Version()] = true
	}
}

// Scenario 40: an endpoint that ignores preconditions lets a stale writer overwrite ours; the
// next commit notices a stamp of another epoch below our fence and reports integrity.
func TestIgnoredPreconditionIsIntegrity(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	old := claimed(t, st, 1, "old")
	cur := claimed(t, st, 2, "new")
	if err := cur.Commit(ctx, set("k", 5)); err != nil {
		t.Fatal(err)
	}
	m.FailNext(storetest.OpStore, storetest.IgnorePrecondition)
	if err := old.Commit(ctx, set("k", 1)); err != nil {
		t.Fatalf("the stale write was accepted by the broken endpoint, Commit should report it written: %v", err)
	}
	err := cur.Commit(ctx, set("k", 6))
	if !errors.Is(err, store.ErrIntegrity) {
		t.Fatalf("commit after a foreign overwrite below our fence: got %v, want ErrIntegrity", err)
	}
	if !errors.Is(cur.Err(), store.ErrIntegrity) {
		t.Fatal("integrity failure must be sticky")
	}
}

// The same epoch with a foreign stamp is an integrity error (never "fenced").
func TestSameEpochForeignStampIsIntegrity(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	w := claimed(t, st, 4, "mine")
	doc := w.Document()
	doc.Writer.Invocation = "intruder"
	doc.Writer.Seq = 9
	data, _ := doc.Encode()
	m.Put(data)
	if err := w.Commit(ctx, set("k", 1)); !errors.Is(err, store.ErrIntegrity) || errors.Is(err, store.ErrFenced) {
		t.Fatalf("got %v, want ErrIntegrity", err)
	}
}

// Scenario 29/63 shape: the document is deleted while a writer holds it; its commit does not
// recreate the document.
func TestCommitAfterDeletionIsFenced(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	w := claimed(t, st, 3, "a")
	if err := m.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, set("k", 1)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("got %v, want ErrFenced", err)
	}
	if m.Bytes() != nil {
		t.Fatal("a fenced commit recreated the deleted document")
	}
}

// A lost acknowledgement followed by an unreachable read leaves the commit pending; if the
// pending write had in fact landed, the next commit rebases on it instead of reporting a
// conflict, and the chain has no duplicate or foreign write.
func TestPendingWriteLandedIsAdopted(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	w := claimed(t, st, 1, "a")
	m.FailNext(storetest.OpStore, storetest.LostAck)
	m.FailNext(storetest.OpLoad, storetest.Unreachable, storetest.Unreachable, storetest.Unreachable)
	if err := w.Commit(ctx, set("k", 1)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if err := w.Commit(ctx, set("j", 2)); err != nil {
		t.Fatal(err)
	}
	chain := &storetest.Chain{}
	for _, wr := range m.History() {
		chain.Add(wr)
	}
	if err := chain.Verify(); err != nil {
		t.Fatal(err)
	}
	d := w.Document()
	if storetest.IntValue(d.Checkpoints, "k") != 1 || storetest.IntValue(d.Checkpoints, "j") != 2 || len(m.History()) != 3 {
		t.Fatalf("checkpoints %v after %d writes", d.Checkpoints, len(m.History()))
	}
}

// Renewal-only changes (lease/store) keep last_commit_at; job commits move it.
func TestLeaseOnlyChangeKeepsLastCommit(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewStore(storetest.NewMemory())
	w := claimed(t, st, 1, "a")
	if err := w.Commit(ctx, set("k", 1)); err != nil {
		t.Fatal(err)
	}
	last := w.Document().LastCommitAt
	if last.IsZero() {
		t.Fatal("a commit did not record last_commit_at")
	}
	if err := w.Commit(ctx, store.Change{Lease: &store.LeaseState{RenewedAt: last.Add(1e9), Duration: 3e10}}); err != nil {
		t.Fatal(err)
	}
	d := w.Document()
	if !d.LastCommitAt.Equal(last) || !d.Fence.RenewedAt.Equal(last.Add(1e9)) || d.Fence.Duration != store.Duration(3e10) {
		t.Fatalf("after renewal: last_commit_at %v renewed_at %v duration %v", d.LastCommitAt, d.Fence.RenewedAt, d.Fence.Duration)
	}
}

func TestConditionalWriteProbeDetectsIgnoredPreconditions(t *testing.T) {
	m := storetest.NewMemory()
	m.SetHook(func(op storetest.Op) storetest.Fault {
		if op == storetest.OpStore {
			return storetest.IgnorePrecondition
		}
		return storetest.None
	})
	if err := store.CheckConditionalWrites(context.Background(), m); !errors.Is(err, store.ErrIntegrity) {
		t.Fatalf("got %v, want ErrIntegrity", err)
	}
}

func TestDecodeLegacyFenceForms(t *testing.T) {
	for _, tc := range []struct {
		in    string
		floor uint64
		bad   bool
	}{
		{`{"a":"1","__fence_epoch__":7}`, 7, false},
		{`{"a":"1","__fence_epoch__":"12"}`, 12, false},
		{`{"a":"1"}`, 0, false},
		{`{}`, 0, false},
		{`{"__fence_epoch__":"x"}`, 0, true},
		{`{"__fence_epoch__":1.5}`, 0, true},
	} {
		doc, legacy, err := store.Decode("x", []byte(tc.in))
		if tc.bad {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("%s: got %v, want ErrCorrupt", tc.in, err)
			}
			continue
		}
		if err != nil || !legacy || doc.FenceEpoch() != tc.floor {
			t.Errorf("%s: legacy=%v floor=%d err=%v, want floor %d", tc.in, legacy, doc.FenceEpoch(), err, tc.floor)
		}
	}
}

func TestDocumentRoundTrip(t *testing.T) {
	st := storetest.NewStore(storetest.NewMemory())
	w := claimed(t, st, 1, "a")
	if err := w.Commit(context.Background(), set("k", 1)); err != nil {
		t.Fatal(err)
	}
	d := w.Document()
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, legacy, err := store.Decode("x", data)
	if err != nil || legacy {
		t.Fatal(err, legacy)
	}
	again, _ := back.Encode()
	if !bytes.Equal(data, again) {
		t.Fatalf("round trip changed the document:\n%s\n%s", data, again)
	}
}

// interleaved runs between's function right after a write reaches the inner backend,
// then reports the write as ambiguous (applied, or not, per apply).
type interleaved struct {
	store.Backend
	apply   bool
	between func()
	armed   bool
}

func (b *interleaved) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	if !b.armed {
		return b.Backend.Store(ctx, data, expect)
	}
	b.armed = false
	if b.apply {
		if _, err := b.Backend.Store(ctx, data, expect); err != nil {
			return "", err
		}
	}
	b.between()
	return "", store.ErrUnavailable
}

// Scenarios 17 and 37: A's commit is in flight (applied or not) when B claims; A's
// verification re-read shows B's newer epoch: A is fenced and nothing is applied twice.
func TestCommitInFlightDuringTakeoverIsFenced(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			ctx := context.Background()
			m := storetest.NewMemory()
			ib := &interleaved{Backend: m, apply: applied}
			a := claimed(t, storetest.NewStore(ib), 1, "a")
			var b *store.Writer
			ib.between = func() { b = claimed(t, storetest.NewStore(m), 2, "b") }
			ib.armed = true
			if err := a.Commit(ctx, set("k", 5)); !errors.Is(err, store.ErrFenced) {
				t.Fatalf("got %v, want ErrFenced", err)
			}
			want := int64(-1)
			if applied {
				want = 5 // B claimed on top of A's landed commit and carries it
			}
			if got := storetest.IntValue(b.Checkpoints(), "k"); got != want {
				t.Fatalf("k = %d, want %d", got, want)
			}
			chain := &storetest.Chain{}
			for _, w := range m.History() {
				chain.Add(w)
			}
			if err := chain.Verify(); err != nil {
				t.Fatal(err)
			}
			if n := len(m.History()); n != map[bool]int{true: 3, false: 2}[applied] {
				t.Fatalf("%d writes: something was applied twice", n)
			}
		})
	}
}

// A claim goes through the writer's one CAS loop: a write that lands between the read the
// claim started from and the claim (the previous holder's last commit) is a conflict the
// claim re-reads, judges again and claims on, keeping that commit; the conflict is counted in
// the writer's stats like any commit's.
func TestContendedClaimIsRetriedAndCounted(t *testing.T) {
	ctx := context.Background()
	mem := storetest.NewMemory()
	st := storetest.NewStore(mem)
	old := claimed(t, st, 1, "old")
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(7)}}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Claim(ctx, storetest.Req(2, "new"), snap)
	if err != nil {
		t.Fatalf("claim over a concurrent commit: %v", err)
	}
	if got := storetest.IntValue(w.Checkpoints(), "k"); got != 7 {
		t.Fatalf("claimed checkpoint k = %d, want the concurrent commit's 7", got)
	}
	if st := w.Stats(); st.Conflicts != 1 || st.Retries != 1 || st.Commits != 0 {
		t.Fatalf("writer stats after a contended claim: %+v, want 1 conflict, 1 retry, no commits", st)
	}
	if err := old.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(8)}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old holder's commit after the claim: %v, want ErrFenced", err)
	}
}

// Invariant I7, the document always parses: a commit the Writer accepts must leave a document
// the Store reads back. json.Valid does not look inside strings and values are stored byte for
// byte, so a value (or a key, or a counter) that is not valid UTF-8 is refused before anything
// is written, with an error naming it; otherwise the next Read finds the document corrupt and
// every later run stops until a human repairs it.
func TestCommitRefusesInvalidUTF8(t *testing.T) {
	bad := "\xff\xfe"
	cases := []struct {
		name, key string
		change    store.Change
	}{
		{"checkpoint value", "soql:Account", store.Change{Set: map[string]json.RawMessage{"soql:Account": json.RawMessage(`{"cursor":"` + bad + `"}`)}}},
		{"checkpoint key", "soql:" + bad, store.Change{Set: map[string]json.RawMessage{"soql:" + bad: storetest.Int(1)}}},
		{"counter window", "egress", store.Change{Counters: map[string]store.Counter{"egress": {Value: 1, Window: bad}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := storetest.NewStore(storetest.NewMemory())
			w := claimed(t, st, 1, "a")
			if err := w.Commit(ctx, set("good", 7)); err != nil {
				t.Fatal(err)
			}
			before := w.Version()
			err := w.Commit(ctx, tc.change)
			if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.key)) {
				t.Fatalf("commit: %v; want a refusal naming %q as not valid UTF-8", err, tc.key)
			}
			if w.Version() != before {
				t.Fatalf("the refused commit was written: version %q, was %q", w.Version(), before)
			}
			snap, err := st.Read(ctx)
			if err != nil {
				t.Fatalf("the document no longer reads: %v", err)
			}
			if got := storetest.IntValue(snap.Doc.Checkpoints, "good"); got != 7 || len(snap.Doc.Checkpoints) != 1 {
				t.Fatalf("checkpoints after the refused commit: %v", snap.Doc.Checkpoints)
			}
		})
	}
}

// stallingBackend makes writes hang until their context ends once stall is set: an object
// store that stopped answering.
type stallingBackend struct {
	store.Backend
	stall chan struct{} // closed: writes hang
}

func (s *stallingBackend) Store(ctx context.Context, data []byte, v store.Version) (store.Version, error) {
	select {
	case <-s.stall:
		<-ctx.Done()
		return "", errors.Join(store.ErrUnavailable, ctx.Err())
	default:
		return s.Backend.Store(ctx, data, v)
	}
}

// A commit queued behind another that hangs (the store stopped answering) gives up when its own
// context ends, not when the one before it does: a store lease's renewal is a commit, and must
// not be held past its own timeout behind a job's commit (the lease would outlive its validity).
// Nothing of the queued commit is written.
func TestCommitQueuedBehindAHungOneEndsWithItsContext(t *testing.T) {
	b := &stallingBackend{Backend: storetest.NewMemory(), stall: make(chan struct{})}
	st := storetest.NewStore(b)
	w := claimed(t, st, 1, "a")
	close(b.stall)
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
		defer cancel()
		first <- w.Commit(ctx, set("job", 1))
	}()
	time.Sleep(50 * time.Millisecond) // the first commit holds the writer
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Commit(ctx, set("renewal", 1))
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("the queued commit returned after %v, behind the hung one; want at its own timeout (100ms)", took.Round(time.Millisecond))
	}
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued commit: %v; want ErrUnavailable with its context's end", err)
	}
	if err := <-first; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("hung commit: %v; want ErrUnavailable", err)
	}
	if _, ok := w.Checkpoints()["renewal"]; ok {
		t.Fatal("the queued commit, which gave up before it was sent, is in the writer's document")
	}
}

// sharedObject is a backend whose object holds other data beside the document (a ConfigMap's
// other keys): Room says how much of its limit they leave.
type sharedObject struct {
	store.Backend
	others int
}

func (s sharedObject) Room() (limit, others int) { return s.MaxSize() - s.others, s.others }

// TestSizeWarningCountsWhatSharesTheObject: a document that shares its object with other data
// (keys of one ConfigMap) is refused when the whole object would pass the limit, so the warning
// that it approaches the limit measures it against the room the other data leave it, not
// against the whole limit: a 2 KiB document in the last 2.5 KiB is warned about, and the warning
// says how much the other data take.
func TestSizeWarningCountsWhatSharesTheObject(t *testing.T) {
	for _, c := range []struct {
		name   string
		others int
		warn   bool
	}{
		{"alone", 0, false},
		{"beside other keys", 1<<20 - 2560, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			st := store.New(sharedObject{storetest.NewMemory(), c.others}, store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			w := claimed(t, st, 1, "a")
			if err := w.Commit(context.Background(), store.Change{Set: map[string]json.RawMessage{"k": json.RawMessage(`"` + strings.Repeat("x", 1800) + `"`)}}); err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(logs.String(), "approaching its size limit")
			if warned != c.warn || (c.warn && !strings.Contains(logs.String(), fmt.Sprintf("shared_bytes=%d", c.others))) {
				t.Fatalf("warned %v, want %v (with shared_bytes=%d):\n%s", warned, c.warn, c.others, logs.String())
			}
		})
	}
}
