package cli

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/store"
)

// newRand returns a seeded generator and logs the seed.
func newRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 11))
}

// noWrites fails the test if the child wrote to the document (a busy or refused run must not).
func noWrites(t *testing.T, w *world, c *child) {
	t.Helper()
	if ws := writesOf(t, []string{c.journal}); len(ws) > 0 {
		t.Fatalf("%s ended %s but wrote %d document versions (first: %s)", c.name, c.res.outcome(), len(ws), ws[0].Kind)
	}
}

// TestAdversarialOverlappingRuns is scenarios 1, 3, 5 and 6 of reference/lease-store.md §4:
// rounds of two to eight run-once processes started together or a few milliseconds apart on
// a tight schedule, while records keep arriving. Every process exits 0 as ok, busy or fenced;
// a busy process writes nothing; at least one process of each round ships; and afterwards
// the invariants hold over the whole document history.
func TestAdversarialOverlappingRuns(t *testing.T) {
	rng := newRand(t)
	w := newWorld(t)
	s := setup{elf: true, leaseDuration: 3 * time.Second}
	cfg := w.writeConfig("run", s)
	rounds := 3 * testenv.Iterations(3)
	fenced, busy, ok := 0, 0, 0
	for round := range rounds {
		w.insertLogins(rng.IntN(40))
		if rng.IntN(3) == 0 {
			w.addLogFile(5 + rng.IntN(30))
		}
		n := 2 + rng.IntN(7)
		cs := make([]*child, n)
		for i := range cs {
			if d := rng.IntN(4); d > 0 {
				time.Sleep(time.Duration(rng.IntN(60*d)) * time.Millisecond)
			}
			cs[i] = w.start(childSpec{name: fmt.Sprintf("r%d-%d", round, i), config: cfg})
		}
		shipped := false
		for _, c := range cs {
			r := c.wait()
			expect(t, r, false, job.OutcomeOK, job.OutcomeBusy, job.OutcomeFenced)
			switch r.outcome() {
			case job.OutcomeOK:
				ok++
				shipped = true
			case job.OutcomeBusy:
				busy++
				noWrites(t, w, c)
			case job.OutcomeFenced:
				fenced++
			}
		}
		if !shipped {
			t.Fatalf("round %d: none of %d processes acquired the lease", round, n)
		}
	}
	t.Logf("%d rounds: %d ok, %d busy, %d fenced", rounds, ok, busy, fenced)
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: fenced, maxRecords: 20})
}

// claimedEpoch returns the epoch of the child's claim, 0 if it wrote none.
func claimedEpoch(t *testing.T, c *child) uint64 {
	t.Helper()
	for _, e := range writesOf(t, []string{c.journal}) {
		if e.Kind == "claim" {
			return fenceOf(t, e).Epoch
		}
	}
	return 0
}

// fenceOf decodes the fence of a journaled write.
func fenceOf(t *testing.T, e journalEntry) store.Fence {
	t.Helper()
	doc, _, err := store.Decode("journal", e.Data)
	if err != nil || doc.Fence == nil {
		t.Fatalf("journaled write without a fence: %v", err)
	}
	return *doc.Fence
}

// killStep is a crash point and how many times a full run reaches it (a run of
// max_records 20 in pushes of 5 pushes and commits four times).
type killStep struct {
	step string
	max  int
}

var killSteps = []killStep{
	{stepAfterAcquire, 1},
	{string(job.StepAfterClaim), 1},
	{string(job.StepMidPull), 1},
	{string(job.StepAfterPush), 4},
	{string(job.StepBeforeCommit), 4},
	{stepMidCommit, 4},
	{string(job.StepAfterCommit), 4},
	{string(job.StepBeforeRelease), 1},
}

// TestAdversarialSIGKILL is scenarios 47-53 of reference/lease-store.md §4 with real
// processes: a run-once process SIGKILLs itself after acquiring the lease, after the claim,
// in the middle of pulling, after a push before its commit, with a commit's write landed but
// not acknowledged, after a commit, and before the release. The next run is busy while the
// dead holder's lease is live; a run that waits takes over with the next epoch and catches
// up; duplicates stay within one push per crash (commits are per push) and every invariant
// holds.
func TestAdversarialSIGKILL(t *testing.T) {
	rng := newRand(t)
	w := newWorld(t)
	s := setup{elf: true, leaseDuration: 1500 * time.Millisecond, skew: 100 * time.Millisecond}
	cfg := w.writeConfig("run", s)
	rounds := (testenv.Iterations(3) + 2) / 3
	kills := 0
	var runs []result
	for round := range rounds {
		for _, ks := range killSteps {
			w.insertLogins(25 + rng.IntN(10))
			if rng.IntN(3) == 0 {
				w.addLogFile(5 + rng.IntN(20))
			}
			n := 1 + rng.IntN(ks.max)
			name := fmt.Sprintf("r%d-%s-%d", round, ks.step, n)
			killed := w.start(childSpec{name: name, config: cfg, env: map[string]string{envCrash: fmt.Sprintf("%s:%d", ks.step, n)}})
			expectKilled(t, killed.wait())
			kills++
			busy := w.run(childSpec{name: name + "-busy", config: cfg})
			expect(t, busy, false, job.OutcomeBusy)
			next := w.run(childSpec{name: name + "-next", config: cfg, args: []string{"--wait", "5s"}})
			expect(t, next, false, job.OutcomeOK)
			if e := claimedEpoch(t, killed); e != 0 && next.report.Epoch != e+1 {
				t.Fatalf("%v: epoch %d after the killed run's %d", next, next.report.Epoch, e)
			}
			runs = append(runs, next)
		}
	}
	epochsIncrease(t, runs)
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: kills, maxRecords: 5})
}
