package job_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/sourcetest"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// TestCrashSimulation runs many in-process invocations — some overlapping, some crashing at a
// random step (abandoned without release, as a SIGKILL would), some losing store
// acknowledgements — over the real store protocol, the store-embedded lease, the in-memory
// backend and the strict simulated Loki, in fake time, and then checks the invariants of
// docs/testing.md over the whole document history (scenario 55).
func TestCrashSimulation(t *testing.T) {
	const maxPushEntries = 120
	runs := 150 * testenv.Iterations(3)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d runs", seed, runs)
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mem := storetest.NewMemory()
		st := store.New(mem, store.Options{Logger: slog.New(slog.DiscardHandler), Backoff: time.Millisecond})
		srv := simloki.New(simloki.Options{})
		sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
			MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		src := &sourcetest.Numbered{Totals: map[string]int{"a": 0, "b": 0, "c": 0}, Base: time.Now().Add(-time.Hour)}
		steps := []job.Step{job.StepAfterClaim, job.StepAfterPush, job.StepBeforeCommit, job.StepAfterCommit, job.StepBeforeRelease}
		outcomes := map[job.Outcome]int{}
		crashes := 0
		var mu sync.Mutex

		quiet := slog.New(slog.DiscardHandler)
		type params struct{ maxRecords, pushEntries, quantum int }
		draw := func() params {
			return params{1 + rng.IntN(200), 1 + rng.IntN(maxPushEntries), 1 + rng.IntN(50)}
		}
		invoke := func(crashAt job.Step, p params) {
			inv := lease.NewInvocation()
			l := &crashable{Lease: leasestore.New(st, leasestore.Options{Config: lease.Config{Duration: 30 * time.Second, Invocation: inv, Host: "sim", Logger: quiet}, Name: "sf2loki"})}
			coord := &job.LeaseCoordinator{Lease: l, Store: st, Options: lease.SessionOptions{RenewEvery: 10 * time.Second, Logger: quiet}}
			opts := job.Options{
				Log: quiet, MaxRecords: p.maxRecords, PushEntries: p.pushEntries, Quantum: p.quantum,
				MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second, ReleaseReserve: time.Second,
				Invocation: inv,
				Hook: func(s job.Step) {
					if s == crashAt {
						mu.Lock()
						crashes++
						mu.Unlock()
						l.dead.Store(true)
						runtime.Goexit() // abandon the invocation: no commit, no release
					}
				},
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
				mu.Lock()
				outcomes[rep.Outcome]++
				mu.Unlock()
			}()
			<-done
		}

		for i := range runs {
			for k := range src.Totals {
				src.SetTotal(k, src.Totals[k]+rng.IntN(40))
			}
			if rng.IntN(8) == 0 {
				mem.FailNext(storetest.OpStore, storetest.LostAck)
			}
			crashAt := job.Step("")
			if rng.IntN(4) == 0 {
				crashAt = steps[rng.IntN(len(steps))]
			}
			if rng.IntN(5) == 0 { // two overlapping invocations
				var wg sync.WaitGroup
				for range 2 {
					wg.Add(1)
					p := draw()
					go func() { defer wg.Done(); invoke(crashAt, p) }()
				}
				wg.Wait()
			} else {
				invoke(crashAt, draw())
			}
			time.Sleep(time.Duration(rng.IntN(45)) * time.Second) // sometimes past the lease duration
			_ = i
		}
		// Let every abandoned lease expire, then drain without faults.
		for range 200 {
			time.Sleep(time.Minute)
			invoke("", params{1_000_000, maxPushEntries, 50})
			if caughtUp(t, st, src) {
				break
			}
		}
		t.Logf("outcomes %v, crashes %d", outcomes, crashes)
		checkInvariants(t, mem, srv, src)
		// I3: a crash between push and commit re-pushes at most that one push (PushEntries ≤ 120).
		if dups := len(srv.Duplicates()); dups > crashes*maxPushEntries {
			t.Errorf("%d duplicates after %d crashes: more than one push per crash", dups, crashes)
		}
	})
}

// crashable is a lease whose process has died: once dead, its renewals and release never reach
// the store (the renewer gives up when the grant's validity passes, like a killed process's
// lease expiring).
type crashable struct {
	lease.Lease
	dead atomic.Bool
}

func (c *crashable) Renew(ctx context.Context, g lease.Grant) (lease.Grant, error) {
	if c.dead.Load() {
		return lease.Grant{}, store.ErrUnavailable
	}
	return c.Lease.Renew(ctx, g)
}

func (c *crashable) Release(ctx context.Context, g lease.Grant) error {
	if c.dead.Load() {
		return store.ErrUnavailable
	}
	return c.Lease.Release(ctx, g)
}

func caughtUp(t *testing.T, st *store.Store, src *sourcetest.Numbered) bool {
	snap, err := st.Read(context.Background())
	if err != nil || snap.Absent {
		return false
	}
	for k, total := range src.Totals {
		n, err := sourcetest.DecodeCursor(snap.Doc.Checkpoints[k].Value)
		if err != nil {
			t.Fatal(err)
		}
		if n != total {
			return false
		}
	}
	return true
}

// checkInvariants verifies I1 (no cursor ever moves backwards over the document history), I2
// (every committed record reached the receiver), at-least-once delivery of every record, and
// the store chain invariants I4, I5 and I7.
func checkInvariants(t *testing.T, mem *storetest.Memory, srv *simloki.Server, src *sourcetest.Numbered) {
	t.Helper()
	hist := mem.History()
	if err := storetest.VerifyWrites(hist); err != nil {
		t.Fatalf("store chain invariants: %v", err)
	}
	got := delivered(t, srv)
	last := map[string]int{}
	for i, w := range hist {
		doc, _, err := store.Decode("history", w.Data)
		if err != nil {
			t.Fatalf("version %d does not parse (I7): %v", i, err)
		}
		for k, cp := range doc.Checkpoints {
			n, err := sourcetest.DecodeCursor(cp.Value)
			if err != nil {
				t.Fatalf("version %d key %s: %v", i, k, err)
			}
			if n < last[k] {
				t.Fatalf("I1 violated: %s moved back from %d to %d in version %d", k, last[k], n, i)
			}
			// Records up to last[k] were checked at an earlier version (I1 holds so far):
			// only the newly committed ones are, which keeps the check linear in the history.
			for m := last[k] + 1; m <= n; m++ {
				if got[k][m] == 0 {
					t.Fatalf("I2 violated: %s committed up to %d but #%d never reached the receiver", k, n, m)
				}
			}
			last[k] = n
		}
	}
	for k, total := range src.Totals {
		for n := 1; n <= total; n++ {
			if got[k][n] == 0 {
				t.Fatalf("%s #%d never reached the receiver", k, n)
			}
		}
	}
	dups := len(srv.Duplicates())
	t.Logf("%d versions, %d duplicates at the receiver", len(hist), dups)
}
