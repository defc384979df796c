package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/store"
)

// Factory returns a Backend for a fresh, empty document location (a new file, object key or
// ConfigMap) each time it is called.
type Factory func(t *testing.T) store.Backend

// Iterations returns SF2LOKI_TEST_ITERATIONS or def (make soak sets 100).
func Iterations(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SF2LOKI_TEST_ITERATIONS")); err == nil && n > 0 {
		return n
	}
	return def
}

// quiet is a logger that discards (the suite asserts on errors, not on log lines).
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// NewStore returns a Store over b with fast retries for tests.
func NewStore(b store.Backend) *store.Store {
	return store.New(b, store.Options{Host: "test", Backoff: time.Millisecond, Logger: quiet})
}

// Req returns a claim request for epoch e by invocation inv on the store lease "sf2loki".
func Req(e uint64, inv string) store.ClaimRequest {
	return store.ClaimRequest{Epoch: e, Invocation: inv, Holder: "host/" + inv,
		Lease: store.LeaseRef{Kind: "store", Name: "sf2loki"}}
}

// Int is a checkpoint value holding n.
func Int(n int64) json.RawMessage { return json.RawMessage(strconv.FormatInt(n, 10)) }

// IntValue decodes an integer checkpoint value (-1 when absent or not an integer).
func IntValue(cps map[string]store.Checkpoint, k string) int64 {
	cp, ok := cps[k]
	if !ok {
		return -1
	}
	var n int64
	if json.Unmarshal(cp.Value, &n) != nil {
		return -1
	}
	return n
}

// Run runs the conformance suite: the backend's own contract, then the protocol over it, every
// case on a fresh document location.
func Run(t *testing.T, newBackend Factory) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBackend) })
	}
}

// cases are the suite's behaviours.
var cases = []struct {
	name string
	run  func(t *testing.T, newBackend Factory)
}{
	{"Backend/AbsentLoad", testBackendAbsentLoad},
	{"Backend/CreateOnlyOnce", testBackendCreateOnlyOnce},
	{"Backend/UpdateConditionsOnVersion", testBackendUpdateConditionsOnVersion},
	{"Backend/UpdateOfDeletedConflicts", testBackendUpdateOfDeletedConflicts},
	{"Backend/ConditionalWriteProbe", testBackendConditionalWriteProbe},
	{"Protocol/ClaimAbsent", testProtocolClaimAbsent},
	{"Protocol/ClaimIsStrict", testProtocolClaimIsStrict},
	{"Protocol/StaleCommitIsFenced", testProtocolStaleCommitIsFenced},
	{"Protocol/StaleViewCannotEraseKeys", testProtocolStaleViewCannotEraseKeys},
	{"Protocol/CommitLostAck", testProtocolCommitLostAck},
	{"Protocol/ClaimLostAckOnCreate", testProtocolClaimLostAckOnCreate},
	{"Protocol/UnreachableCommitSettlesNextTime", testProtocolUnreachableCommitSettlesNextTime},
	{"Protocol/SpuriousConflictRetried", testProtocolSpuriousConflictRetried},
	{"Protocol/CommitInFlightDuringTakeoverIsFenced", testProtocolCommitInFlightDuringTakeoverIsFenced},
	{"Protocol/ClaimLostAckOnTakeover", testProtocolClaimLostAckOnTakeover},
	{"Protocol/PendingCommitAfterTakeoverIsFenced", testProtocolPendingCommitAfterTakeoverIsFenced},
	{"Protocol/UnlandedCommitIsCarriedForward", testProtocolUnlandedCommitIsCarriedForward},
	{"Protocol/ForeignLease", testProtocolForeignLease},
	{"Protocol/RecreatedLeaseAccepted", testProtocolRecreatedLeaseAccepted},
	{"Protocol/CorruptDocument", testProtocolCorruptDocument},
	{"Protocol/LegacyMigration", testProtocolLegacyMigration},
	{"Protocol/SizeGuard", testProtocolSizeGuard},
	{"Protocol/CountersCommitWithCheckpoints", testProtocolCountersCommitWithCheckpoints},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, b store.Backend) ([]byte, store.Version) {
	t.Helper()
	data, v, err := b.Load(context.Background())
	must(t, err)
	return data, v
}

func claim(t *testing.T, st *store.Store, req store.ClaimRequest) *store.Writer {
	t.Helper()
	ctx := context.Background()
	snap, err := st.Read(ctx)
	must(t, err)
	w, err := st.Claim(ctx, req, snap)
	must(t, err)
	return w
}

func testBackendAbsentLoad(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	if _, _, err := b.Load(ctx); !errors.Is(err, store.ErrAbsent) {
		t.Fatalf("Load of a fresh location: got %v, want ErrAbsent", err)
	}
}

func testBackendCreateOnlyOnce(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	v1, err := b.Store(ctx, []byte("one"), "")
	must(t, err)
	if _, err := b.Store(ctx, []byte("two"), ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: got %v, want ErrConflict", err)
	}
	if data, v := load(t, b); string(data) != "one" || v != v1 {
		t.Fatalf("Load = %q %q, want %q %q", data, v, "one", v1)
	}
}

func testBackendUpdateConditionsOnVersion(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	v1, err := b.Store(ctx, []byte("one"), "")
	must(t, err)
	v2, err := b.Store(ctx, []byte("two"), v1)
	must(t, err)
	if v2 == v1 {
		t.Fatalf("an update kept version %q", v1)
	}
	if _, err := b.Store(ctx, []byte("three"), v1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: got %v, want ErrConflict", err)
	}
	if data, v := load(t, b); string(data) != "two" || v != v2 {
		t.Fatalf("Load = %q %q, want %q %q", data, v, "two", v2)
	}
}

func testBackendUpdateOfDeletedConflicts(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	v1, err := b.Store(ctx, []byte("one"), "")
	must(t, err)
	must(t, b.Delete(ctx))
	must(t, b.Delete(ctx)) // deleting an absent document is not an error
	if _, _, err := b.Load(ctx); !errors.Is(err, store.ErrAbsent) {
		t.Fatalf("Load after Delete: got %v, want ErrAbsent", err)
	}
	if _, err := b.Store(ctx, []byte("two"), v1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update of a deleted document: got %v, want ErrConflict", err)
	}
	_, err = b.Store(ctx, []byte("three"), "")
	must(t, err)
}

func testBackendConditionalWriteProbe(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	must(t, store.CheckConditionalWrites(ctx, newBackend(t)))
}

func testProtocolClaimAbsent(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	st := NewStore(newBackend(t))
	snap, err := st.Read(ctx)
	must(t, err)
	if !snap.Absent || snap.Floor() != 0 {
		t.Fatalf("fresh document: %+v, want absent with floor 0", snap)
	}
	req := Req(1, "inv-a")
	req.LeaseUID = "uid-1"
	w, err := st.Claim(ctx, req, snap)
	must(t, err)
	snap, err = st.Read(ctx)
	must(t, err)
	d := snap.Doc
	if d.Schema != store.SchemaVersion || d.Fence.Epoch != 1 || d.Fence.Holder != "host/inv-a" ||
		d.Fence.Lease != req.Lease || d.Fence.LeaseUID != "uid-1" || d.Fence.ClaimedAt.IsZero() {
		t.Fatalf("claimed fence = %+v", d.Fence)
	}
	if d.Writer == nil || d.Writer.Epoch != 1 || d.Writer.Invocation != "inv-a" || d.Writer.Seq != 0 || d.Writer.Host != "test" {
		t.Fatalf("claim stamp = %+v", d.Writer)
	}
	if len(d.History) != 1 || d.History[0].Epoch != 1 {
		t.Fatalf("claim history = %+v", d.History)
	}
	if snap.Version != w.Version() {
		t.Fatalf("writer version %q, stored %q", w.Version(), snap.Version)
	}
}

func testProtocolClaimIsStrict(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	st := NewStore(b)
	w := claim(t, st, Req(3, "a"))
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}}))
	before, _ := load(t, b)
	for _, e := range []uint64{2, 3} {
		snap, err := st.Read(ctx)
		must(t, err)
		_, err = st.Claim(ctx, Req(e, "b"), snap)
		var fe *store.FencedError
		if !errors.As(err, &fe) || fe.StoredEpoch != 3 || fe.Epoch != e {
			t.Fatalf("claim with epoch %d under fence 3: got %v, want FencedError", e, err)
		}
	}
	if after, _ := load(t, b); !bytes.Equal(before, after) {
		t.Fatal("a fenced claim changed the stored document")
	}
}

func testProtocolStaleCommitIsFenced(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	st := NewStore(b)
	a := claim(t, st, Req(1, "a"))
	must(t, a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}}))
	bw := claim(t, st, Req(2, "b"))
	must(t, bw.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(2)}}))
	before, _ := load(t, b)
	err := a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(5)}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("commit of epoch 1 under fence 2: got %v, want ErrFenced", err)
	}
	if after, _ := load(t, b); !bytes.Equal(before, after) {
		t.Fatalf("the fenced commit changed the document:\nbefore %s\nafter  %s", before, after)
	}
	if err := a.Commit(ctx, store.Change{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a fenced writer must stay fenced, got %v", err)
	}
}

func testProtocolStaleViewCannotEraseKeys(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	// The upstream report: a writer whose view predates another writer's commit rewrote
	// the whole document and erased keys it never touched.
	b := newBackend(t)
	st := NewStore(b)
	a := claim(t, st, Req(1, "a"))
	must(t, a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"a": Int(1), "b": Int(1)}}))
	stale, err := st.Read(ctx) // a third process reads now and is slow to claim
	must(t, err)
	bw := claim(t, st, Req(2, "b"))
	must(t, bw.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"b": Int(2), "c": Int(2)}, Delete: []string{"a"}}))
	if err := a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"a": Int(3)}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale holder commit: got %v, want ErrFenced", err)
	}
	c, err := st.Claim(ctx, Req(3, "c"), stale) // higher epoch, view from before b's commit
	must(t, err)
	for _, cps := range []map[string]store.Checkpoint{c.Checkpoints(), mustRead(t, st).Doc.Checkpoints} {
		if IntValue(cps, "b") != 2 || IntValue(cps, "c") != 2 || IntValue(cps, "a") != -1 {
			t.Fatalf("after a claim from a stale view: %v; want b=2 c=2 and a deleted", cps)
		}
	}
}

func testProtocolCommitLostAck(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	chain := &Chain{}
	fb := NewFaulty(&Recorder{Backend: newBackend(t), Chain: chain})
	st := NewStore(fb)
	w := claim(t, st, Req(1, "a"))
	fb.FailNext(OpStore, LostAck)
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}}))
	if s := w.Stats(); s.LostAcks != 1 || s.Commits != 1 {
		t.Fatalf("stats after a lost ack: %+v", s)
	}
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(2)}}))
	if chain.Len() != 3 {
		t.Fatalf("%d writes reached the backend, want 3 (claim, commit, commit): a lost ack was written twice", chain.Len())
	}
	must(t, chain.Verify())
	d := mustRead(t, st).Doc
	if d.Writer.Seq != 2 || IntValue(d.Checkpoints, "k") != 2 || len(d.History) != 1 {
		t.Fatalf("after lost ack: stamp %+v, k=%d, history %d", d.Writer, IntValue(d.Checkpoints, "k"), len(d.History))
	}
}

func testProtocolClaimLostAckOnCreate(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	chain := &Chain{}
	fb := NewFaulty(&Recorder{Backend: newBackend(t), Chain: chain})
	st := NewStore(fb)
	fb.FailNext(OpStore, LostAck)
	w := claim(t, st, Req(1, "a"))
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}}))
	if chain.Len() != 2 {
		t.Fatalf("%d writes, want 2", chain.Len())
	}
	if h := mustRead(t, st).Doc.History; len(h) != 1 {
		t.Fatalf("claim history %+v, want one claim", h)
	}
}

func testProtocolUnreachableCommitSettlesNextTime(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	fb := NewFaulty(newBackend(t))
	st := NewStore(fb)
	w := claim(t, st, Req(1, "a"))
	fb.FailNext(OpStore, LostAck)
	fb.FailNext(OpLoad, Unreachable, Unreachable, Unreachable)
	err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("commit whose outcome cannot be read back: got %v, want ErrUnavailable", err)
	}
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"j": Int(1)}}))
	cps := mustRead(t, st).Doc.Checkpoints
	if IntValue(cps, "k") != 1 || IntValue(cps, "j") != 1 {
		t.Fatalf("after settling: %v", cps)
	}
}

func testProtocolSpuriousConflictRetried(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	fb := NewFaulty(newBackend(t))
	st := NewStore(fb)
	w := claim(t, st, Req(1, "a"))
	fb.FailNext(OpStore, Conflict)
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}}))
	if s := w.Stats(); s.Conflicts != 1 || s.Retries != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

func testProtocolForeignLease(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	st := NewStore(b)
	claim(t, st, Req(1, "a"))
	before, _ := load(t, b)
	other := Req(5, "b")
	other.Lease.Name = "other-deployment"
	snap := mustRead(t, st)
	_, err := st.Claim(ctx, other, snap)
	if !errors.Is(err, store.ErrForeignLease) || errors.Is(err, store.ErrFenced) {
		t.Fatalf("claim by another lease name: got %v, want ErrForeignLease", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "store/sf2loki") || !strings.Contains(msg, "store/other-deployment") {
		t.Fatalf("message must name both leases: %s", msg)
	}
	if after, _ := load(t, b); !bytes.Equal(before, after) {
		t.Fatal("a refused claim changed the document")
	}
	other.AdoptForeign = true
	_, err = st.Claim(ctx, other, snap)
	must(t, err)
}

func testProtocolRecreatedLeaseAccepted(t *testing.T, newBackend Factory) {
	st := NewStore(newBackend(t))
	r1 := Req(7, "a")
	r1.LeaseUID = "uid-old"
	claim(t, st, r1)
	r2 := Req(8, "b")
	r2.LeaseUID = "uid-new"
	claim(t, st, r2)
	if f := mustRead(t, st).Doc.Fence; f.LeaseUID != "uid-new" || f.Epoch != 8 {
		t.Fatalf("fence after recreated lease: %+v", f)
	}
}

func testProtocolCorruptDocument(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	for name, data := range map[string][]byte{
		"truncated":  []byte(`{"schema":2,"fence":{"epo`),
		"not-utf8":   {'{', '"', 0xff, 0xfe, '"', ':', '1', '}'},
		"not-object": []byte(`[1,2,3]`),
		"empty":      {},
		"schema-99":  []byte(`{"schema":99,"checkpoints":{}}`),
	} {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t)
			_, err := b.Store(ctx, data, "")
			must(t, err)
			st := NewStore(b)
			_, err = st.Read(ctx)
			var ce *store.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || ce.Object != b.String() {
				t.Fatalf("Read: got %v, want CorruptError naming %s", err, b)
			}
			if !strings.Contains(err.Error(), b.String()) || !strings.Contains(err.Error(), "restore") {
				t.Fatalf("message must name the object and the recovery: %s", err)
			}
			if got, _ := load(t, b); !bytes.Equal(got, data) {
				t.Fatal("a corrupt document was modified")
			}
		})
	}
}

func testProtocolLegacyMigration(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	legacy := `{"pubsub:/event/LoginEventStream":"AAAAAAAABCD=","org=eu:apexlog":"2026-01-02T03:04:05Z","__fence_epoch__":7}`
	_, err := b.Store(ctx, []byte(legacy), "")
	must(t, err)
	st := NewStore(b)
	snap := mustRead(t, st)
	if !snap.Legacy || snap.Floor() != 7 || len(snap.Doc.Checkpoints) != 2 {
		t.Fatalf("legacy read: legacy=%v floor=%d checkpoints=%v", snap.Legacy, snap.Floor(), snap.Doc.Checkpoints)
	}
	if _, err := st.Claim(ctx, Req(7, "a"), snap); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("claim at the legacy floor: got %v, want ErrFenced", err)
	}
	w, err := st.Claim(ctx, Req(8, "a"), snap)
	must(t, err)
	after := mustRead(t, st)
	if after.Legacy || after.Doc.Schema != 2 || after.Floor() != 8 {
		t.Fatalf("after the first claim: legacy=%v schema=%d floor=%d", after.Legacy, after.Doc.Schema, after.Floor())
	}
	want := map[string]string{"pubsub:/event/LoginEventStream": "AAAAAAAABCD=", "org=eu:apexlog": "2026-01-02T03:04:05Z"}
	for k, v := range want {
		if got := string(after.Doc.Checkpoints[k].Value); got != string(store.StringValue(v)) {
			t.Fatalf("key %q = %s, want %q", k, got, v)
		}
	}
	if _, ok := after.Doc.Checkpoints["__fence_epoch__"]; ok {
		t.Fatal("the reserved legacy key became a checkpoint")
	}
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"apexlog": Int(1)}}))
}

func testProtocolSizeGuard(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	b := newBackend(t)
	st := store.New(b, store.Options{MaxBytes: 2048, Logger: quiet, Backoff: time.Millisecond})
	w := claim(t, st, Req(1, "a"))
	before, _ := load(t, b)
	big := store.StringValue(strings.Repeat("x", 4096))
	err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": big}})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("oversized commit: got %v, want ErrTooLarge", err)
	}
	if after, _ := load(t, b); !bytes.Equal(before, after) {
		t.Fatal("an oversized commit changed the document")
	}
	must(t, w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": Int(1)}}))
}

func testProtocolCountersCommitWithCheckpoints(t *testing.T, newBackend Factory) {
	ctx := context.Background()
	st := NewStore(newBackend(t))
	w := claim(t, st, Req(1, "a"))
	must(t, w.Commit(ctx, store.Change{
		Set:      map[string]json.RawMessage{"k": Int(1)},
		Counters: map[string]store.Counter{"egress:bytes": {Value: 4096, Window: "2026-11-29"}},
	}))
	d := mustRead(t, st).Doc
	c := d.Counters["egress:bytes"]
	if c.Value != 4096 || c.Window != "2026-11-29" || c.Epoch != 1 || IntValue(d.Checkpoints, "k") != 1 {
		t.Fatalf("counters %+v checkpoints %v", d.Counters, d.Checkpoints)
	}
	must(t, w.Commit(ctx, store.Change{DeleteCounters: []string{"egress:bytes"}}))
	if d := mustRead(t, st).Doc; len(d.Counters) != 0 {
		t.Fatalf("counter not deleted: %+v", d.Counters)
	}
}

func mustRead(t *testing.T, st *store.Store) store.Snapshot {
	t.Helper()
	snap, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
