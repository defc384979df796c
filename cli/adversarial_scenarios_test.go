package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// TestAdversarialOverlappingRuns is scenarios 1, 3, 5 and 6 of docs/testing.md's scenario map:
// rounds of two to eight run-once processes started together or a few milliseconds apart on
// a tight schedule, while records keep arriving. Every process exits 0 as ok, busy or fenced;
// a busy process writes nothing; at least one process of each round ships; and afterwards
// the invariants hold over the whole document history.
func TestAdversarialOverlappingRuns(t *testing.T) {
	long(t)
	overlappingRuns(t, newWorld(t), setup{elf: true, leaseDuration: 3 * time.Second})
}

func overlappingRuns(t *testing.T, w *world, s setup) {
	rng := newRand(t)
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

// killStep is a crash point, how many times a full run reaches it (a run of max_records 20
// in pushes of 5 pushes and commits four times), and whether the dead process leaves the
// lease held.
type killStep struct {
	step string
	max  int
	held bool
}

var killSteps = []killStep{
	{stepAfterRead, 1, false},
	{stepAfterAcquire, 1, true},
	{string(job.StepAfterClaim), 1, true},
	{string(job.StepMidPull), 1, true},
	{string(job.StepAfterPush), 4, true},
	{string(job.StepBeforeCommit), 4, true},
	{stepMidCommit, 4, true},
	{string(job.StepAfterCommit), 4, true},
	{string(job.StepBeforeRelease), 1, true},
}

// lastCommit returns the checkpoints of the child's last landed commit.
func lastCommit(t *testing.T, c *child) map[string]store.Checkpoint {
	t.Helper()
	var out map[string]store.Checkpoint
	for _, e := range writesOf(t, []string{c.journal}) {
		if e.Kind == "commit" {
			doc, _, err := store.Decode("journal", e.Data)
			if err != nil {
				t.Fatal(err)
			}
			out = doc.Checkpoints
		}
	}
	return out
}

// TestAdversarialSIGKILL is scenarios 47-53 of docs/testing.md's scenario map with real
// processes: a run-once process SIGKILLs itself after acquiring the lease, after the claim,
// in the middle of pulling, after a push before its commit, with a commit's write landed but
// not acknowledged, after a commit, and before the release. The next run is busy while the
// dead holder's lease is live; a run that waits takes over with the next epoch and catches
// up; duplicates stay within one push per crash (commits are per push) and every invariant
// holds.
func TestAdversarialSIGKILL(t *testing.T) {
	long(t)
	sigkillEachStep(t, newWorld(t), setup{elf: true, leaseDuration: 2 * time.Second, skew: 100 * time.Millisecond})
}

func sigkillEachStep(t *testing.T, w *world, s setup) {
	rng := newRand(t)
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
			if ks.held { // the dead holder's lease is live: busy until it expires
				busy := w.run(childSpec{name: name + "-busy", config: cfg})
				expect(t, busy, false, job.OutcomeBusy)
			}
			next := w.run(childSpec{name: name + "-next", config: cfg, args: []string{"--wait", "5s"}})
			expect(t, next, false, job.OutcomeOK)
			if e := claimedEpoch(t, killed); e != 0 && next.report.Epoch != e+1 {
				t.Fatalf("%v: epoch %d after the killed run's %d", next, next.report.Epoch, e)
			}
			if !ks.held && next.report.LeaseWait > job.Millis(time.Second) {
				t.Fatalf("%v: waited for a lease a process killed before acquiring cannot hold", next)
			}
			if ks.step == stepMidCommit { // scenario 52: the landed commit is the next run's start
				compared := 0
				for k, cp := range lastCommit(t, killed) {
					c, ok := next.report.Cursors[k]
					if !ok {
						continue
					}
					compared++
					want, _ := parsePosition(k, cp.Value)
					got, err := parsePosition(k, c.Before)
					if err != nil || got.cmp(want) != 0 {
						t.Fatalf("%v: %s starts at %s, not at the killed run's landed commit %s", next, k, c.Before, cp.Value)
					}
				}
				if compared == 0 {
					t.Fatalf("%v: committed no key the killed run had committed", next)
				}
			}
			runs = append(runs, next)
		}
	}
	epochsIncrease(t, runs)
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: kills, maxRecords: 5})
}

// writesAfter returns the child's journaled writes made after at.
func writesAfter(t *testing.T, c *child, at time.Time) []journalEntry {
	t.Helper()
	var out []journalEntry
	for _, e := range writesOf(t, []string{c.journal}) {
		if e.At.After(at) {
			out = append(out, e)
		}
	}
	return out
}

// TestAdversarialSIGSTOP is scenarios 11-13 and 22 of docs/testing.md's scenario map: a run-once
// process is stopped (SIGSTOP) past its lease duration — after its claim, after a push
// before the push's commit, right before a commit, or by the parent while it is mid-batch —
// another run takes over with the next epoch and commits, and the stopped process, once
// continued (SIGCONT), ends fenced (exit 6 under --strict-exit-codes) without any write of
// its own landing after the takeover.
func TestAdversarialSIGSTOP(t *testing.T) {
	long(t)
	rng := newRand(t)
	w := newWorld(t)
	s := setup{elf: true, leaseDuration: 1500 * time.Millisecond, skew: 100 * time.Millisecond}
	cfg := w.writeConfig("run", s)
	type stopCase struct {
		name     string
		step     job.Step
		max      int  // occurrences of the step in a full run
		external bool // the parent stops the process while it sleeps at the step
		lostAck  bool // the stopped write's acknowledgement is lost (mid_commit)
		takeover bool // another run takes over while it is stopped
		outcomes []job.Outcome
	}
	cases := []stopCase{
		{"after_push", job.StepAfterPush, 4, false, false, true, []job.Outcome{job.OutcomeFenced}},
		{"before_commit", job.StepBeforeCommit, 4, false, false, true, []job.Outcome{job.OutcomeFenced}},
		{"parent_stops_mid_batch", job.StepAfterPush, 4, true, false, true, []job.Outcome{job.OutcomeFenced}},
		// Scenario 17: the commit landed, its answer is lost while the process is stopped; the
		// verification read finds the newer epoch: fenced, nothing applied twice.
		{"mid_commit_lost_ack", stepMidCommit, 4, false, true, true, []job.Outcome{job.OutcomeFenced}},
		// Stopped before anything was pushed, the resumed run notices the lost lease and stops
		// before (unavailable) or after (fenced, its commit refused) pushing a first batch:
		// which one is a race between its lease watcher and its puller.
		{"after_claim", job.StepAfterClaim, 1, false, false, true, []job.Outcome{job.OutcomeFenced, job.OutcomeUnavailable}},
		// Scenario 14: nobody takes over; resumed after its lease expired, the run still commits
		// what it pushed (commit after expiry is allowed). It ends partial when its lease
		// watcher fired first, ok when a renewal (a compare-and-swap nobody raced) came first.
		{"no_takeover", job.StepAfterPush, 4, false, false, false, []job.Outcome{job.OutcomePartial, job.OutcomeOK}},
	}
	rounds := (testenv.Iterations(3) + 2) / 3
	stopped := 0
	for round := range rounds {
		for _, sc := range cases {
			w.insertLogins(25 + rng.IntN(10))
			if rng.IntN(3) == 0 {
				w.addLogFile(5 + rng.IntN(20))
			}
			n := 1 + rng.IntN(sc.max)
			at := fmt.Sprintf("%s:%d", sc.step, n)
			env := map[string]string{envStop: at}
			if sc.external {
				env = map[string]string{envSleep: at + ":3s"}
			}
			if sc.lostAck {
				env[envLostAck] = fmt.Sprintf("commit:%d", n)
			}
			name := fmt.Sprintf("r%d-%s-%d", round, sc.name, n)
			a := w.start(childSpec{name: name, config: cfg, args: []string{"--strict-exit-codes"}, env: env})
			if sc.external {
				a.waitStep(t, string(sc.step), n)
				a.stopBetweenWrites(t)
			}
			a.waitStopped(t)
			takeoverAt := time.Now()
			if !sc.takeover {
				time.Sleep(s.leaseDuration + s.skew + 500*time.Millisecond)
				a.signal(t, syscall.SIGCONT)
				ra := a.wait()
				expect(t, ra, true, sc.outcomes...)
				committed := false
				for _, e := range writesAfter(t, a, takeoverAt) {
					committed = committed || e.Kind == "commit"
				}
				if !committed || ra.report.Uncommitted != 0 {
					t.Fatalf("%v: with nobody claiming, the pushed batch must still be committed after the lease expired", ra)
				}
				t.Logf("%s: %v", sc.name, ra)
				continue
			}
			stopped++
			b := w.run(childSpec{name: name + "-takeover", config: cfg, args: []string{"--wait", "5s"}})
			expect(t, b, false, job.OutcomeOK)
			if e := claimedEpoch(t, a); b.report.Epoch != e+1 {
				t.Fatalf("%v: epoch %d, the stopped run claimed %d", b, b.report.Epoch, e)
			}
			a.signal(t, syscall.SIGCONT)
			ra := a.wait()
			expect(t, ra, true, sc.outcomes...)
			if ws := writesAfter(t, a, takeoverAt); len(ws) > 0 {
				t.Fatalf("%v: a write of the stopped run (%s) landed after the takeover", ra, ws[0].Kind)
			}
			t.Logf("%s: %v", sc.name, ra)
		}
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: stopped, maxRecords: 5})
}

// hasNote reports whether a run report carries a note containing s.
func hasNote(r result, s string) bool {
	return r.report != nil && strings.Contains(strings.Join(r.report.Notes, "\n"), s)
}

// TestAdversarialDocumentDeleted is scenarios 29 and 63 for the store-embedded lease: the
// checkpoint document is deleted between runs (an operator reset). The next run starts every
// source from its lookback and says so in its report; with the store lease the fence lived
// in the document, so epochs start again at 1.
func TestAdversarialDocumentDeleted(t *testing.T) {
	w := newWorld(t)
	s := setup{}
	cfg := w.writeConfig("run", s)
	w.insertLogins(12)
	r1 := w.run(childSpec{name: "first", config: cfg})
	expect(t, r1, false, job.OutcomeOK)
	if !hasNote(r1, "did not exist") || r1.report.Epoch != 1 || r1.report.Records != 12 {
		t.Fatalf("first run on no document: %v notes %q", r1, r1.report.Notes)
	}
	w.insertLogins(3)
	r2 := w.run(childSpec{name: "second", config: cfg})
	expect(t, r2, false, job.OutcomeOK)
	if hasNote(r2, "did not exist") || r2.report.Epoch != 2 || r2.report.Records != 3 {
		t.Fatalf("second run: %v notes %q", r2, r2.report.Notes)
	}
	if err := os.Remove(s.withDefaults(w).statePath); err != nil {
		t.Fatal(err)
	}
	w.newGeneration()
	r3 := w.run(childSpec{name: "after-delete", config: cfg})
	expect(t, r3, false, job.OutcomeOK)
	if !hasNote(r3, "did not exist") {
		t.Fatalf("the run after the deletion does not say it started from the lookback: %v notes %q", r3, r3.report.Notes)
	}
	if r3.report.Records != 15 || r3.report.Epoch != 1 {
		t.Fatalf("after the deletion: %v; want every record of the lookback again (15) under epoch 1", r3)
	}
	if c := r3.report.Cursors["soql:LoginHistory"]; len(c.Before) != 0 || len(c.After) == 0 {
		t.Fatalf("after the deletion the key must start with no cursor and commit one: %+v", c)
	}
	r4 := w.run(childSpec{name: "next", config: cfg})
	expect(t, r4, false, job.OutcomeOK)
	if r4.report.Epoch != 2 || r4.report.Records != 0 {
		t.Fatalf("the run after: %v", r4)
	}
	w.verify(t, verifyOpts{dupsAllowed: true})
}

// TestAdversarialForeignLease is scenario 8 of docs/testing.md's scenario map: two deployments
// with different lease names point at one document. The second exits 2 with a message naming
// both leases and writes nothing, whether the first is idle (config error) or holding its
// lease (busy); the first is never fenced and its next run takes the next epoch.
func TestAdversarialForeignLease(t *testing.T) {
	w := newWorld(t)
	cfgA := w.writeConfig("a", setup{})
	cfgB := w.writeConfig("b", setup{leaseName: "other"})
	w.insertLogins(10)
	a1 := w.run(childSpec{name: "a1", config: cfgA})
	expect(t, a1, false, job.OutcomeOK)

	bc := w.start(childSpec{name: "b", config: cfgB})
	b := bc.wait()
	expect(t, b, false, job.OutcomeConfig)
	if b.code != ExitConfig {
		t.Fatalf("%v: want exit %d", b, ExitConfig)
	}
	for _, name := range []string{"store/sf2loki", "store/other"} {
		if !strings.Contains(b.report.Error, name) || !strings.Contains(b.stderr, name) {
			t.Fatalf("the refusal does not name lease %s: report %q", name, b.report.Error)
		}
	}
	noWrites(t, w, bc)

	w.insertLogins(10)
	a2 := w.run(childSpec{name: "a2", config: cfgA})
	expect(t, a2, false, job.OutcomeOK)
	if a2.report.Epoch != a1.report.Epoch+1 || a2.report.Records != 10 {
		t.Fatalf("%v: want epoch %d and the 10 new records", a2, a1.report.Epoch+1)
	}

	// While the first deployment holds its lease, the second is busy and still writes nothing.
	w.insertLogins(10)
	ac := w.start(childSpec{name: "a3", config: cfgA, env: map[string]string{envSleep: "after_push:1:1500ms"}})
	ac.waitStep(t, string(job.StepAfterPush), 1)
	bc2 := w.start(childSpec{name: "b-while-a-runs", config: cfgB})
	b2 := bc2.wait()
	expect(t, b2, false, job.OutcomeBusy, job.OutcomeConfig)
	noWrites(t, w, bc2)
	a3 := ac.wait()
	expect(t, a3, false, job.OutcomeOK)
	if a3.report.Epoch != a2.report.Epoch+1 {
		t.Fatalf("%v: want epoch %d", a3, a2.report.Epoch+1)
	}
	w.verify(t, verifyOpts{maxRecords: 20})
}

// TestAdversarialStoreFaults is scenarios 33, 34, 36 and 52 against the real file store in
// real processes: the acknowledgement of the n-th document write (the claim, a commit, the
// release) is lost although the write landed, or the n-th write meets a spurious
// precondition failure. Every run still ends ok, nothing is shipped twice and the claim
// history holds each epoch once.
func TestAdversarialStoreFaults(t *testing.T) {
	rng := newRand(t)
	w := newWorld(t)
	s := setup{}
	cfg := w.writeConfig("run", s)
	type fault struct {
		env string
		n   int
	}
	// A full run writes: 1 claim, 4 commits (20 records in pushes of 5), 1 release.
	var faults []fault
	for n := 1; n <= 6; n++ {
		faults = append(faults, fault{envLostAck, n}, fault{envConflict, n})
	}
	for range testenv.Iterations(3) {
		faults = append(faults, fault{[]string{envLostAck, envConflict}[rng.IntN(2)], 1 + rng.IntN(6)})
	}
	for i, f := range faults {
		w.insertLogins(25)
		c := w.start(childSpec{name: fmt.Sprintf("f%d", i), config: cfg, env: map[string]string{f.env: strconv.Itoa(f.n)}})
		r := c.wait()
		expect(t, r, false, job.OutcomeOK)
		injected := false
		for _, e := range readJournal(t, c.journal) {
			injected = injected || (f.env == envLostAck && e.Op == "write" && e.LostAck) || (f.env == envConflict && e.Op == "conflict")
		}
		if !injected {
			t.Fatalf("%v: the fault %s=%d was never injected", r, f.env, f.n)
		}
		if f.env == envLostAck && r.report.Records != 20 {
			t.Fatalf("%v: want the full batch of 20", r)
		}
	}
	// Two runs at once, both losing the acknowledgement of their claim attempt.
	w.insertLogins(25)
	rs := w.runAll(childSpec{name: "pair-a", config: cfg, env: map[string]string{envLostAck: "1"}},
		childSpec{name: "pair-b", config: cfg, env: map[string]string{envLostAck: "1"}})
	for _, r := range rs {
		expect(t, r, false, job.OutcomeOK, job.OutcomeBusy)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{maxRecords: 20})
	if d := w.deliveries(t); len(d) > 0 {
		for id, n := range d {
			if n != 1 {
				t.Fatalf("%s delivered %d times: lost acknowledgements must not ship anything twice", id, n)
			}
		}
	}
	b, err := os.ReadFile(s.withDefaults(w).statePath)
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := store.Decode("state", b)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(doc.History); i++ {
		if doc.History[i].Epoch <= doc.History[i-1].Epoch {
			t.Fatalf("claim history repeats or reorders epochs: %+v", doc.History)
		}
	}
}

// TestAdversarialClockSkew is scenarios 19 and 20: a run whose wall clock is ahead by more
// than L+K takes over a live lease at once; the old holder's commit is fenced and the
// invariants hold. A run whose clock is ten minutes behind never takes over a live lease
// (busy after its wait) and takes a released one at once.
func TestAdversarialClockSkew(t *testing.T) {
	long(t)
	w := newWorld(t)
	s := setup{leaseDuration: 2 * time.Second, skew: 200 * time.Millisecond}
	cfg := w.writeConfig("run", s)
	rounds := (testenv.Iterations(3) + 2) / 3
	faulted := 0
	ahead := (s.leaseDuration + s.skew + time.Second).String()
	for round := range rounds {
		w.insertLogins(30)
		ac := w.start(childSpec{name: fmt.Sprintf("r%d-holder", round), config: cfg, env: map[string]string{envSleep: "after_push:1:4s"}})
		ac.waitStep(t, string(job.StepAfterPush), 1)
		b := w.run(childSpec{name: fmt.Sprintf("r%d-ahead", round), config: cfg, env: map[string]string{envClock: ahead}})
		expect(t, b, false, job.OutcomeOK)
		if e := claimedEpoch(t, ac); b.report.Epoch != e+1 {
			t.Fatalf("%v: the clock-ahead run should take over epoch %d early", b, e)
		}
		a := ac.wait()
		expect(t, a, false, job.OutcomeFenced)
		faulted++

		w.insertLogins(10)
		// The holder stays live (renewing) for longer than the lease duration: a run whose clock
		// is 10 min behind sees it renewed in its future, watches it for up to one duration
		// whatever its --wait, and must then be busy, never take it over.
		cc := w.start(childSpec{name: fmt.Sprintf("r%d-holder2", round), config: cfg, env: map[string]string{envSleep: "after_push:1:4s"}})
		cc.waitStep(t, string(job.StepAfterPush), 1)
		dc := w.start(childSpec{name: fmt.Sprintf("r%d-behind", round), config: cfg, args: []string{"--wait", "500ms"}, env: map[string]string{envClock: "-10m"}})
		d := dc.wait()
		expect(t, d, false, job.OutcomeBusy)
		noWrites(t, w, dc)
		c := cc.wait()
		expect(t, c, false, job.OutcomeOK)
		e := w.run(childSpec{name: fmt.Sprintf("r%d-behind-released", round), config: cfg, env: map[string]string{envClock: "-10m"}})
		expect(t, e, false, job.OutcomeOK)
		if e.report.Epoch != c.report.Epoch+1 {
			t.Fatalf("%v: want epoch %d right after the release", e, c.report.Epoch+1)
		}
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: faulted, maxRecords: 5})
}

// TestAdversarialPausedInsidePush is scenario 15: a run is stopped while its push is held by
// the receiver; another run takes over and pushes the same entries; the held push lands after
// it. The receiver then holds duplicates of that one push and nothing else goes wrong: the
// cursors never move back and the resumed run never commits. It ends fenced when it reads the
// push's answer before its lease watcher cancels the push, else unavailable ("the lease was
// lost"; see docs/testing.md on this outcome).
func TestAdversarialPausedInsidePush(t *testing.T) {
	long(t)
	w := newWorld(t)
	s := setup{leaseDuration: 1500 * time.Millisecond, skew: 100 * time.Millisecond, pushTimeout: 15 * time.Second}
	cfg := w.writeConfig("run", s)
	w.insertLogins(25)
	const held = 6 * time.Second
	w.sim.SetLatency(held)
	a := w.start(childSpec{name: "paused-in-push", config: cfg, args: []string{"--strict-exit-codes"}})
	a.waitStep(t, string(job.StepMidPull), 1)
	pushAt := time.Now()
	time.Sleep(300 * time.Millisecond) // the first push is at the receiver, answered after 6 s
	a.stopBetweenWrites(t)
	a.waitStopped(t)
	w.sim.SetLatency(0)
	b := w.run(childSpec{name: "takeover", config: cfg, args: []string{"--wait", "5s"}})
	expect(t, b, false, job.OutcomeOK)
	if since := time.Since(pushAt); since >= held {
		t.Fatalf("the takeover took %s: it had to push before the held push landed", since)
	}
	time.Sleep(time.Until(pushAt.Add(held + 300*time.Millisecond)))
	a.signal(t, syscall.SIGCONT)
	ra := a.wait()
	expect(t, ra, true, job.OutcomeFenced, job.OutcomeUnavailable)
	if ra.report.Commits != 0 {
		t.Fatalf("%v: the resumed run committed", ra)
	}
	dups := 0
	for _, n := range w.deliveries(t) {
		dups += n - 1
	}
	if dups != 5 {
		t.Fatalf("%d duplicates; want exactly the held push's 5 entries", dups)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: 1, maxRecords: 5})
}

// TestAdversarialBackfillAlongsideRunOnce is scenarios 9 and 10: a backfill and the live
// run-once job run at the same time on one deployment; they use their own documents and
// leases and neither is busy or fenced because of the other. A second backfill of the same
// window meanwhile is busy (exit 5: backfill uses strict exit codes), and the backfill's
// cursors never move back.
func TestAdversarialBackfillAlongsideRunOnce(t *testing.T) {
	long(t)
	w := newWorld(t)
	s := setup{elf: true}
	cfg := w.writeConfig("run", s)
	now := time.Now().UTC()
	since, until := now.Add(-5*time.Hour).Truncate(time.Hour), now.Add(-2*time.Hour).Truncate(time.Hour)
	for i := range 4 {
		w.addLogFileAt("Report", since.Add(time.Duration(i+1)*time.Hour/2), since.Add(time.Duration(i)*10*time.Minute+time.Minute), 12)
	}
	w.insertLogins(30)
	w.addLogFile(8)
	backfill := []string{"backfill", "--since", since.Format(time.RFC3339), "--until", until.Format(time.RFC3339),
		"--event-types", "Report", "--progress-interval", "1h"}
	bf := w.start(childSpec{name: "backfill", config: cfg, args: backfill, env: map[string]string{envSleep: "after_push:1:2s"}})
	bf.waitStep(t, string(job.StepAfterPush), 1)
	lc := w.start(childSpec{name: "live", config: cfg})
	live := lc.wait()
	expect(t, live, false, job.OutcomeOK)
	second := w.start(childSpec{name: "backfill-2", config: cfg, args: backfill})
	r2 := second.wait()
	expect(t, r2, true, job.OutcomeBusy)
	noWrites(t, w, second)
	r := bf.wait()
	expect(t, r, true, job.OutcomeOK)
	if r.report.Records != 48 {
		t.Fatalf("%v: want the window's 48 rows", r)
	}
	objects := func(c *child) map[string]bool {
		out := map[string]bool{}
		for _, e := range writesOf(t, []string{c.journal}) {
			out[e.Object] = true
		}
		return out
	}
	bo, lo := objects(bf), objects(lc)
	if len(bo) != 1 || len(lo) != 1 {
		t.Fatalf("backfill wrote %v, live wrote %v: want one document each", bo, lo)
	}
	for o := range bo {
		if lo[o] || !strings.HasSuffix(o, "state-backfill.json") {
			t.Fatalf("backfill document %s; live %v", o, lo)
		}
	}
	again := w.run(childSpec{name: "backfill-again", config: cfg, args: backfill})
	expect(t, again, true, job.OutcomeOK)
	if again.report.Records != 0 {
		t.Fatalf("%v: the finished window shipped again", again)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{maxRecords: 20})
}
