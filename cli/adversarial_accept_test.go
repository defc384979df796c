package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
)

// tooOld is older than the receiver accepts (Loki's reject_old_samples_max_age, 7 days).
const tooOld = 8 * 24 * time.Hour

// TestRunOncePermanentRejectDrop: an entry the receiver rejects for good (too old, with
// sink.loki.restamp: false, so it is not moved to a timestamp the receiver accepts) under
// sink.loki.on_permanent_reject: drop is counted by Loki's reason in the run report, written to
// the dead-letter file, and the key advances past it; the next entries ship.
func TestRunOncePermanentRejectDrop(t *testing.T) {
	w := newWorld(t)
	dead := filepath.Join(w.dir, "dead-letter.jsonl")
	cfg := w.writeConfig("drop", setup{lookback: 9 * 24 * time.Hour, onReject: "drop", noRestamp: true, deadLetter: dead})
	old := w.insertOldLogin(time.Now().Add(-tooOld))
	w.insertLogins(5)
	r := w.run(childSpec{name: "drop", config: cfg})
	expect(t, r, false, job.OutcomeOK)
	if r.report.Dropped["greater_than_max_sample_age"] != 1 || r.report.Records != 5 || r.report.Sources["soql"].Dropped != 1 {
		t.Fatalf("%v: dropped %v, want one greater_than_max_sample_age drop and 5 records shipped", r, r.report.Dropped)
	}
	lines := readLines(t, dead)
	if len(lines) != 1 {
		t.Fatalf("dead letter holds %d lines, want 1: %q", len(lines), lines)
	}
	var dl struct {
		Key, Reason, Line string
	}
	if err := json.Unmarshal([]byte(lines[0]), &dl); err != nil {
		t.Fatal(err)
	}
	if dl.Key != "soql:LoginHistory" || dl.Reason != "greater_than_max_sample_age" || !strings.Contains(dl.Line, old) {
		t.Fatalf("dead letter %+v does not name the rejected record %s", dl, old)
	}
	w.mu.Lock()
	newest := w.logins[len(w.logins)-1]
	w.mu.Unlock()
	after, err := parsePosition("soql:LoginHistory", r.report.Cursors["soql:LoginHistory"].After)
	if err != nil || after.id != newest.id {
		t.Fatalf("the key did not advance past the dropped record to %s: %s (%v)", newest.id, r.report.Cursors["soql:LoginHistory"].After, err)
	}
	w.insertLogins(3)
	r2 := w.run(childSpec{name: "next", config: cfg})
	expect(t, r2, false, job.OutcomeOK)
	if r2.report.Records != 3 || len(r2.report.Dropped) != 0 {
		t.Fatalf("%v: want the 3 next records and no drop", r2)
	}
	got := w.deliveries(t)
	if got[old] != 0 {
		t.Fatalf("the rejected record reached the receiver")
	}
	w.mu.Lock()
	w.logins = w.logins[1:] // the dropped record is accounted for in the dead letter
	w.mu.Unlock()
	w.verify(t, verifyOpts{}) // refused before sending: no 400, no split, no entry sent twice
}

// TestRunOncePermanentRejectFreeze: under on_permanent_reject: freeze the key stops at the
// rejected entry (nothing after it is committed, run after run) and the report names the
// record.
func TestRunOncePermanentRejectFreeze(t *testing.T) {
	w := newWorld(t)
	cfg := w.writeConfig("freeze", setup{lookback: 9 * 24 * time.Hour, onReject: "freeze", noRestamp: true})
	old := w.insertOldLogin(time.Now().Add(-tooOld))
	w.insertLogins(5)
	for i := range 2 {
		r := w.run(childSpec{name: fmt.Sprintf("freeze%d", i), config: cfg})
		expect(t, r, false, job.OutcomePartial)
		fr := r.report.Frozen
		if len(fr) != 1 || fr[0].Key != "soql:LoginHistory" || !strings.Contains(fr[0].Line, old) || !strings.Contains(fr[0].Reason, "rejected") {
			t.Fatalf("run %d: %v: frozen %+v does not name the rejected record %s", i, r, fr, old)
		}
		if c := r.report.Cursors["soql:LoginHistory"]; len(c.After) != 0 {
			t.Fatalf("run %d: the frozen key advanced to %s", i, c.After)
		}
		if r.report.Commits != 0 {
			t.Fatalf("run %d: %v: nothing may be committed past the frozen record", i, r)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAdversarialSIGTERMPartial: a CronJob-style SIGTERM 5 s into a batch that would take
// 60 s (120 records pushed two at a time to a receiver answering after 1 s) ends the run
// partial (exit 4) well within the termination grace, with exactly the pushed prefix
// committed; the next run ships the rest with nothing lost. Only the push in flight at the
// signal may arrive twice: it is cancelled, but the receiver may still store it (docs/fencing.md: at
// most the in-flight batch is duplicated).
func TestAdversarialSIGTERMPartial(t *testing.T) {
	long(t)
	w := newWorld(t)
	const records, perPush, latency, grace = 120, 2, time.Second, 10 * time.Second
	cfg := w.writeConfig("run", setup{maxRecords: records, pushEntries: perPush, maxDuration: 2 * time.Minute, leaseDuration: 6 * time.Second})
	w.insertLogins(records)
	w.sim.SetLatency(latency)
	c := w.start(childSpec{name: "terminated", config: cfg})
	c.waitStep(t, string(job.StepAfterClaim), 1)
	time.Sleep(5 * time.Second)
	termAt := time.Now()
	c.signal(t, syscall.SIGTERM)
	r := c.wait()
	took := time.Since(termAt)
	expect(t, r, false, job.OutcomePartial)
	t.Logf("%v: exited %s after SIGTERM; the batch would have taken %s", r, took.Round(time.Millisecond), records/perPush*latency)
	if took > grace {
		t.Fatalf("exited %s after SIGTERM, beyond the termination grace %s", took, grace)
	}
	if r.report.Records == 0 || r.report.Commits == 0 || r.report.Uncommitted != 0 {
		t.Fatalf("%v: uncommitted %d: want a pushed prefix, all of it committed", r, r.report.Uncommitted)
	}
	after, err := parsePosition("soql:LoginHistory", r.report.Cursors["soql:LoginHistory"].After)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	prefix := w.logins[r.report.Records-1]
	w.mu.Unlock()
	if after.id != prefix.id {
		t.Fatalf("committed cursor %s is not the last pushed record %s", r.report.Cursors["soql:LoginHistory"].After, prefix.id)
	}
	w.sim.SetLatency(0)
	next := w.run(childSpec{name: "next", config: cfg})
	expect(t, next, false, job.OutcomeOK)
	if next.report.Records != records-r.report.Records || !next.report.CaughtUp {
		t.Fatalf("%v: want the remaining %d records", next, records-r.report.Records)
	}
	w.verify(t, verifyOpts{faulted: 1, maxRecords: perPush})
}

// tickLog is one "run finished" line a scheduler replica logged.
type tickLog struct {
	Msg     string      `json:"msg"`
	Outcome job.Outcome `json:"outcome"`
	Epoch   uint64      `json:"epoch"`
	Records int64       `json:"records"`
	Err     string      `json:"err"`
}

func schedulerTicks(t *testing.T, path string) []tickLog {
	t.Helper()
	var out []tickLog
	for _, l := range readLines(t, path) {
		var e tickLog
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == "run finished" {
			out = append(out, e)
		}
	}
	return out
}

// tickOutcomes counts a scheduler replica's tick outcomes. Two partial ticks are not counted, and
// are logged: the last tick when our own SIGTERM cut it short (it commits its pushed prefix, as a
// run-once would), and a tick that lost its lease after shipping because renewals starved on a
// loaded machine (returned as losses: another replica may ship that batch again, a takeover).
// Any other tick that is not ok, busy or fenced fails the test with its error.
func tickOutcomes(t *testing.T, c *child) (per map[job.Outcome]int, losses int) {
	t.Helper()
	per = map[job.Outcome]int{}
	ticks := schedulerTicks(t, c.stderrPath)
	for i, tk := range ticks {
		switch {
		case (tk.Outcome == job.OutcomePartial || tk.Outcome == job.OutcomeUnavailable) && i == len(ticks)-1 && strings.Contains(tk.Err, "interrupted by a signal"):
			// partial when it had shipped something, unavailable when not
			t.Logf("%s: the last tick was interrupted by the test's SIGTERM: %s", c.name, tk.Err)
		case tk.Outcome == job.OutcomePartial && (strings.HasPrefix(tk.Err, lease.ErrLost.Error()) || strings.Contains(tk.Err, "the lease was lost")):
			t.Logf("%s: tick %d lost its lease after shipping: %s", c.name, i+1, tk.Err)
			losses++
		case tk.Outcome == job.OutcomeOK, tk.Outcome == job.OutcomeBusy, tk.Outcome == job.OutcomeFenced:
			per[tk.Outcome]++
		default:
			t.Errorf("%s: tick %d of %d ended %s: %s", c.name, i+1, len(ticks), tk.Outcome, tk.Err)
			per[tk.Outcome]++
		}
	}
	return per, losses
}

// TestAdversarialScheduleTwoReplicas: two `sf2loki schedule` processes (@every 1s, with
// jitter) share one store for 50 ticks while records keep arriving. Each replica is once
// stopped in the middle of a run until the other takes over. Both replicas stay alive through
// busy and fenced outcomes, every tick that claims does so with a fresh epoch, nothing is
// lost, and nothing is shipped twice except the push of a run that was taken over.
func TestAdversarialScheduleTwoReplicas(t *testing.T) {
	long(t)
	w := newWorld(t)
	const ticks = 50
	s := setup{elf: true, spec: "@every 1s", jitter: 300 * time.Millisecond}
	cfg := w.writeConfig("schedule", s)
	replicas := []*child{
		w.start(childSpec{name: "replica-a", config: cfg, args: []string{"schedule"}, env: map[string]string{envStop: "after_push:8"}}),
		w.start(childSpec{name: "replica-b", config: cfg, args: []string{"schedule"}, env: map[string]string{envStop: "after_push:20"}}),
	}
	end := time.Now().Add(ticks * time.Second)
	stops := 0
	next := time.Now()
	for time.Now().Before(end) {
		for _, c := range replicas {
			if c.exited() {
				t.Fatalf("%s exited during the schedule: %v\n%s", c.name, c.res, tail(c.res.stderr))
			}
			if isStopped(c) {
				// Keep it stopped past the lease until the other replica has claimed.
				stopped := time.Now()
				other := replicas[0]
				if other == c {
					other = replicas[1]
				}
				claims := len(claimsOf(t, other))
				for len(claimsOf(t, other)) == claims || time.Since(stopped) < s.withDefaults(w).leaseDuration {
					if time.Since(stopped) > 30*time.Second {
						t.Fatalf("%s never took over from the stopped %s", other.name, c.name)
					}
					time.Sleep(50 * time.Millisecond)
				}
				c.signal(t, syscall.SIGCONT)
				stops++
			}
		}
		if time.Now().After(next) {
			w.insertLogins(2)
			if time.Now().Second()%7 == 0 {
				w.addLogFile(4)
			}
			next = time.Now().Add(400 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	outcomes := map[job.Outcome]int{}
	leaseLosses := 0
	for _, c := range replicas {
		if c.exited() {
			t.Fatalf("%s exited during the schedule: %v", c.name, c.res)
		}
		c.signal(t, syscall.SIGTERM)
	}
	for _, c := range replicas {
		r := c.wait()
		if r.code != 0 {
			t.Fatalf("%v: a scheduler stopped by SIGTERM exits 0\n%s", r, tail(r.stderr))
		}
		per, losses := tickOutcomes(t, c)
		leaseLosses += losses
		for o, n := range per {
			outcomes[o] += n
		}
		t.Logf("%s: %v", c.name, per)
		if per[job.OutcomeOK] == 0 {
			t.Fatalf("%s never shipped: %v", c.name, per)
		}
	}
	if stops != 2 || outcomes[job.OutcomeBusy] == 0 || outcomes[job.OutcomeFenced] == 0 {
		t.Fatalf("%d takeovers, outcomes %v: want both replicas stopped once and busy and fenced ticks", stops, outcomes)
	}
	if n := outcomes[job.OutcomeOK] + outcomes[job.OutcomeBusy] + outcomes[job.OutcomeFenced]; n < ticks {
		t.Fatalf("%d ticks ran in %d periods of two replicas", n, ticks)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: stops + leaseLosses, maxRecords: 5})
}

// isStopped reports whether the child is in the stopped state.
func isStopped(c *child) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't')
}

// claimsOf returns the claims a child wrote.
func claimsOf(t *testing.T, c *child) []journalEntry {
	var out []journalEntry
	for _, e := range writesOf(t, []string{c.journal}) {
		if e.Kind == "claim" {
			out = append(out, e)
		}
	}
	return out
}

// TestRunOnceNoOpCalls: a run-once with nothing new reads the document, claims, releases,
// and makes exactly one token request, one listing query per configured EventLogFile type,
// no download, and one describe and one query per SOQL object.
func TestRunOnceNoOpCalls(t *testing.T) {
	w := newWorld(t)
	types := []string{advELF, "Report"}
	cfg := w.writeConfig("run", setup{elf: true, elfTypes: types, leaseDuration: time.Minute, renew: 20 * time.Second})
	w.insertLogins(10)
	w.addLogFile(5)
	first := w.run(childSpec{name: "first", config: cfg, args: []string{"--drain"}})
	expect(t, first, false, job.OutcomeOK)
	if !first.report.CaughtUp || first.report.Records != 15 {
		t.Fatalf("%v: want 15 records, caught up", first)
	}
	w.org.ResetCalls()
	c := w.start(childSpec{name: "noop", config: cfg})
	r := c.wait()
	expect(t, r, false, job.OutcomeOK)
	if r.report.Records != 0 || r.report.Commits != 0 || r.report.Pushes != 0 {
		t.Fatalf("%v: a run with nothing new ships and commits nothing", r)
	}
	ops := map[string]int{}
	for _, e := range readJournal(t, c.journal) {
		switch e.Op {
		case "load":
			ops["read"]++
		case "write":
			ops[e.Kind]++
		}
	}
	// With the store lease, lease.Start reads the document for the floor and then
	// lease/store's Acquire reads it again for the takeover rule: two reads where the
	// acceptance of issue 8 allows one (reported to the lead; the fix belongs in lease/).
	if want := map[string]int{"read": 1, "claim": 1, "release": 1}; !sameCounts(ops, want) {
		t.Errorf("document operations %v, want %v", ops, want)
	}
	calls := map[string]int{}
	for k, v := range w.org.Calls() {
		calls[string(k)] = v
	}
	want := map[string]int{
		string(simsf.KindToken):    1,
		string(simsf.KindQuery):    len(types) + 1, // one listing per type, one query of LoginHistory
		string(simsf.KindDescribe): 1,
	}
	if !sameCounts(calls, want) {
		t.Errorf("Salesforce calls %v, want %v", calls, want)
	}
}

func sameCounts(got, want map[string]int) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	for k, v := range got {
		if v != 0 && want[k] == 0 {
			return false
		}
	}
	return true
}

// TestAdversarialSIGTERMAtEachStep is scenario 54: SIGTERM while the run pulls, while it
// commits, and while it releases. Each run exits within the termination grace with the
// outcome of docs/fencing.md: interrupted during intake before anything was shipped it is
// unavailable (nothing to commit); during a commit it is partial (what was pushed is committed,
// the commit in progress completes); once the batch has finished it is ok.
func TestAdversarialSIGTERMAtEachStep(t *testing.T) {
	long(t)
	w := newWorld(t)
	cfg := w.writeConfig("run", setup{leaseDuration: 6 * time.Second})
	cases := []struct {
		name    string
		at      string
		outcome job.Outcome
		commits int
	}{
		{"intake", "mid_pull:1", job.OutcomeUnavailable, 0},
		{"commit", "before_commit:2", job.OutcomePartial, 2},
		{"release", "before_release:1", job.OutcomeOK, 4},
	}
	for _, tc := range cases {
		w.insertLogins(25)
		c := w.start(childSpec{name: tc.name, config: cfg, env: map[string]string{envSleep: tc.at + ":2s"}})
		step, _, _ := strings.Cut(tc.at, ":")
		n := 1
		if step == string(job.StepBeforeCommit) {
			n = 2
		}
		c.waitStep(t, step, n)
		termAt := time.Now()
		c.signal(t, syscall.SIGTERM)
		r := c.wait()
		if took := time.Since(termAt); took > 10*time.Second {
			t.Fatalf("%s: %v exited %s after SIGTERM, beyond the grace", tc.name, r, took)
		}
		expect(t, r, false, tc.outcome)
		if r.report.Commits != tc.commits || r.report.Uncommitted != 0 {
			t.Fatalf("%s: %v: want %d commits and nothing pushed left uncommitted", tc.name, r, tc.commits)
		}
		released := false
		for _, e := range writesOf(t, []string{c.journal}) {
			released = released || e.Kind == "release"
		}
		if !released {
			t.Fatalf("%s: %v did not release its lease", tc.name, r)
		}
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{})
}

// TestAdversarialScheduleTwoReplicasNoJitter is scenario 7 with jitter disabled: two
// replicas fire at the same instant every second; the lease lets one ship per tick and the
// other is busy, nothing is shipped twice, and both keep running.
func TestAdversarialScheduleTwoReplicasNoJitter(t *testing.T) {
	long(t)
	w := newWorld(t)
	cfg := w.writeConfig("schedule", setup{spec: "@every 1s"})
	replicas := []*child{
		w.start(childSpec{name: "replica-a", config: cfg, args: []string{"schedule"}}),
		w.start(childSpec{name: "replica-b", config: cfg, args: []string{"schedule"}}),
	}
	for range 16 {
		w.insertLogins(3)
		time.Sleep(500 * time.Millisecond)
	}
	outcomes := map[job.Outcome]int{}
	leaseLosses := 0
	for _, c := range replicas {
		if c.exited() {
			t.Fatalf("%s exited during the schedule: %v\n%s", c.name, c.res, tail(c.res.stderr))
		}
		c.signal(t, syscall.SIGTERM)
	}
	for _, c := range replicas {
		if r := c.wait(); r.code != 0 {
			t.Fatalf("%v\n%s", r, tail(r.stderr))
		}
		per, losses := tickOutcomes(t, c)
		for o, n := range per {
			outcomes[o] += n
		}
		leaseLosses += losses
	}
	t.Logf("outcomes %v", outcomes)
	if outcomes[job.OutcomeOK] == 0 || outcomes[job.OutcomeBusy] == 0 || len(outcomes) != 2 {
		t.Fatalf("outcomes %v: want ok and busy ticks only", outcomes)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: leaseLosses, maxRecords: setup{}.withDefaults(w).maxRecords})
}

// TestAdversarialScheduleShutdownMidTick is scenario 73: SIGTERM to `sf2loki schedule` while a
// tick's run is in the middle of its batch. The run's context is cancelled, it commits what it
// pushed, releases, and the process exits 0 within the grace.
func TestAdversarialScheduleShutdownMidTick(t *testing.T) {
	long(t)
	w := newWorld(t)
	cfg := w.writeConfig("schedule", setup{spec: "@every 1s", leaseDuration: 6 * time.Second})
	w.insertLogins(25)
	c := w.start(childSpec{name: "scheduler", config: cfg, args: []string{"schedule"}, env: map[string]string{envSleep: "after_push:2:2s"}})
	c.waitStep(t, string(job.StepAfterPush), 2)
	termAt := time.Now()
	c.signal(t, syscall.SIGTERM)
	r := c.wait()
	if took := time.Since(termAt); r.code != 0 || took > 10*time.Second {
		t.Fatalf("%v: exit %d %s after SIGTERM; want 0 within the grace\n%s", r, r.code, took, tail(r.stderr))
	}
	ticks := schedulerTicks(t, c.stderrPath)
	if len(ticks) == 0 || ticks[len(ticks)-1].Outcome != job.OutcomePartial || ticks[len(ticks)-1].Records != 10 {
		t.Fatalf("last tick %+v: want partial with the two pushed batches (10 records)\n%s", ticks, tail(r.stderr))
	}
	kinds := map[string]int{}
	for _, e := range writesAfter(t, c, termAt) {
		kinds[e.Kind]++
	}
	if kinds["commit"] != 1 || kinds["release"] != 1 {
		t.Fatalf("after SIGTERM the run wrote %v; want the pushed batch's commit and the release", kinds)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{})
}
