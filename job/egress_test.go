package job_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// lineBytes is the budget size of one numbered entry of key k with number n.
func entrySize(e simloki.Entry) int64 {
	n := int64(len(e.Line))
	for _, m := range e.Metadata {
		n += int64(len(m.Name) + len(m.Value))
	}
	return n
}

func receivedBytes(srv *simloki.Server) int64 {
	var n int64
	for _, e := range srv.Entries() {
		n += entrySize(e)
	}
	return n
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func storedCounter(t *testing.T, coord *jobtest.Coordinator) (int64, string) {
	t.Helper()
	snap, err := coord.Store.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := snap.Doc.Counters[job.EgressCounter]
	return c.Value, c.Window
}

func TestDailyBudgetPausesAndResumesNextDayWithNothingLost(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	totals := map[string]int{"a": 3000, "b": 3000}
	src := numbered(totals)
	src.LineBytes = 100
	clk := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	opts := baseOptions()
	opts.Now, opts.PushEntries = clk.now, 200
	const budget = 150_000
	opts.Egress = job.EgressOptions{DailyBytes: budget, OnBudget: job.BudgetPause}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}

	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeBudgetPaused {
		t.Fatalf("outcome %s, want budget_paused (%s)", rep.Outcome, rep.Error)
	}
	used, day := storedCounter(t, coord)
	if day != "2026-11-29" || used != receivedBytes(srv) || used > budget {
		t.Fatalf("counter %d for %s; receiver holds %d bytes; budget %d", used, day, receivedBytes(srv), budget)
	}
	if rep.Egress == nil || rep.Egress.Used != used {
		t.Errorf("report egress %+v, want used %d", rep.Egress, used)
	}
	// Same day: nothing more.
	before := srv.Count()
	if rep = job.Run(context.Background(), deps, opts); rep.Outcome != job.OutcomeBudgetPaused || srv.Count() != before {
		t.Fatalf("same-day run: outcome %s, %d new entries", rep.Outcome, srv.Count()-before)
	}
	// The next UTC days continue where the budget stopped.
	for day := 1; day <= 10 && !rep.CaughtUp; day++ {
		clk.set(clk.now().Add(24 * time.Hour))
		rep = job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeBudgetPaused && rep.Outcome != job.OutcomeOK {
			t.Fatalf("day %d: %s %s", day, rep.Outcome, rep.Error)
		}
		if used, _ := storedCounter(t, coord); used > budget {
			t.Fatalf("day %d: counter %d above the budget", day, used)
		}
	}
	if !rep.CaughtUp {
		t.Fatal("never caught up")
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
}

func TestDailyBudgetDropCountsAndAdvances(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 1000})
	src.LineBytes = 100
	opts := baseOptions()
	opts.Egress = job.EgressOptions{DailyBytes: 20_000, OnBudget: job.BudgetDrop}
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("outcome %s (%s)", rep.Outcome, rep.Error)
	}
	shipped := int64(srv.Count())
	if rep.Dropped["budget"] != 1000-shipped || shipped == 0 || shipped == 1000 {
		t.Errorf("shipped %d, dropped %v", shipped, rep.Dropped)
	}
	if cp := checkpoints(t, coord); cp["a"] != 1000 {
		t.Errorf("cursor %d, want 1000: dropped records still advance", cp["a"])
	}
}

func TestEntryLargerThanTheBudgetNeverWedges(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 3})
	src.LineBytes = 5000
	clk := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	opts := baseOptions()
	opts.Now = clk.now
	opts.Egress = job.EgressOptions{DailyBytes: 1000, OnBudget: job.BudgetPause}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	for day := range 3 {
		rep := job.Run(context.Background(), deps, opts)
		if srv.Count() != day+1 {
			t.Fatalf("day %d: %d entries at the receiver (%s), want one more per day", day, srv.Count(), rep.Outcome)
		}
		clk.set(clk.now().Add(24 * time.Hour))
	}
}

func TestRateCapsSpreadPushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := jobtest.New()
		srv, sink := receiver(t, simloki.Options{})
		opts := baseOptions()
		opts.PushEntries = 50
		opts.Egress = job.EgressOptions{LinesPerSecond: 100}
		start := time.Now()
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 500})}}, Sink: sink}, opts)
		if rep.Outcome != job.OutcomeOK || srv.Count() != 500 {
			t.Fatalf("outcome %s, %d entries", rep.Outcome, srv.Count())
		}
		// 500 lines at 100/s with a burst of 100: at least 4 s of (fake) time.
		if took := time.Since(start); took < 4*time.Second {
			t.Errorf("500 lines took %v at 100 lines/s", took)
		}
	})
}

// A run paused between push and commit while a second run claims the document, both near the
// budget edge: the first's commit is fenced (its bytes are not counted) and the counter never
// exceeds the budget; Loki received at most one push beyond it.
func TestBudgetCounterUnderTakeoverIsNeverDoubleCounted(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 2000})
	src.LineBytes = 100
	const budget, push = 60_000, 100
	opts := baseOptions()
	opts.PushEntries = push
	opts.Egress = job.EgressOptions{DailyBytes: budget, OnBudget: job.BudgetPause}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	pushes := 0
	a := opts
	a.Hook = func(s job.Step) {
		if s == job.StepAfterPush {
			pushes++
			if pushes == 3 { // A is "paused" here while B takes over and spends the budget
				b := opts
				if rep := job.Run(context.Background(), deps, b); rep.Outcome != job.OutcomeBudgetPaused {
					t.Errorf("B: %s %s", rep.Outcome, rep.Error)
				}
			}
		}
	}
	rep := job.Run(context.Background(), deps, a)
	if rep.Outcome != job.OutcomeFenced {
		t.Fatalf("A: outcome %s, want fenced", rep.Outcome)
	}
	used, _ := storedCounter(t, coord)
	if used > budget {
		t.Errorf("counter %d above the budget %d", used, budget)
	}
	maxPush := int64(push) * entrySize(srv.Entries()[0])
	if got := receivedBytes(srv); got > budget+maxPush {
		t.Errorf("receiver holds %d bytes: more than one push (%d) beyond the budget %d", got, maxPush, budget)
	}
}

// A rate cap that lets fewer entries through in one push reserve than a batch holds (100
// lines/s, a 5 s push reserve, batches of 1 000 entries) ships each batch in smaller pushes of
// what the cap allows, and commits it: one run ships the 2 000 entries, each once.
func TestRateCapBelowOneBatchShipsItInSmallerPushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := jobtest.New()
		srv, sink := receiver(t, simloki.Options{})
		opts := baseOptions() // push reserve 5 s
		opts.PushEntries = 1000
		opts.Egress = job.EgressOptions{LinesPerSecond: 100}
		totals := map[string]int{"a": 2000}
		deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(totals)}}, Sink: sink}
		rep := job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeOK || !rep.CaughtUp || rep.Records != 2000 {
			t.Fatalf("outcome %s, caught up %v, %d records (%s, notes %q); want ok, caught up, 2000", rep.Outcome, rep.CaughtUp,
				rep.Records, rep.Error, rep.Notes)
		}
		// 100 at once and 100 a second: at most 600 entries in the first push of a batch.
		if rep.Pushes < 4 {
			t.Errorf("%d pushes for two batches of 1000 at 100 lines/s within 5 s each; want at least 4", rep.Pushes)
		}
		if cp := checkpoints(t, coord); cp["a"] != 2000 {
			t.Errorf("stored cursor %d, want 2000", cp["a"])
		}
		assertExactlyOnce(t, delivered(t, srv), totals)
	})
}

// A batch the rate cap cannot let through before the run's pushes must end is shipped in part:
// the pushed prefix is committed, the run is ok but not caught up and says what held the rest
// back, and the next run ships the rest.
func TestRateCapHoldsWhatTheRunHasNoTimeForUntilTheNextRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := jobtest.New()
		srv, sink := receiver(t, simloki.Options{})
		opts := baseOptions()
		opts.MaxDuration = 30 * time.Second // pushes end 24 s in: about 2 500 entries at 100 lines/s
		opts.PushEntries = 5000
		opts.Egress = job.EgressOptions{LinesPerSecond: 100}
		totals := map[string]int{"a": 5000}
		deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(totals)}}, Sink: sink}
		rep := job.Run(context.Background(), deps, opts)
		cp := checkpoints(t, coord)
		if rep.Outcome != job.OutcomeOK || rep.CaughtUp || rep.Records == 0 || rep.Records == 5000 || int64(cp["a"]) != rep.Records {
			t.Fatalf("first run: outcome %s, caught up %v, %d records, stored cursor %d (%s); want ok, not caught up, part of the "+
				"batch shipped and committed", rep.Outcome, rep.CaughtUp, rep.Records, cp["a"], rep.Error)
		}
		if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[len(rep.Notes)-1], "egress.lines_per_second") {
			t.Errorf("first run notes %q; want one naming the rate caps", rep.Notes)
		}
		if len(rep.Frozen) != 0 {
			t.Errorf("first run froze %+v; held entries are no failure", rep.Frozen)
		}
		rep = job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeOK || !rep.CaughtUp {
			t.Fatalf("second run: outcome %s, caught up %v, %d records (%s)", rep.Outcome, rep.CaughtUp, rep.Records, rep.Error)
		}
		assertExactlyOnce(t, delivered(t, srv), totals)
	})
}

// An entry the byte rate cap cannot let through within one push reserve (20 bytes/s, 5 s, an
// entry of 200 bytes) would hold its key back run after run: the key is frozen at it, the run
// is a configuration error naming the settings to change, and the other keys ship.
func TestEntryLargerThanTheRateCapAllowsIsAConfigError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := jobtest.New()
		srv, sink := receiver(t, simloki.Options{})
		opts := baseOptions()
		opts.Egress = job.EgressOptions{BytesPerSecond: 20}
		small := &sourcetest.Numbered{SourceName: "small", Totals: map[string]int{"a": 5}, Base: time.Now().Add(-time.Hour)}
		big := &sourcetest.Numbered{SourceName: "big", Totals: map[string]int{"b": 5}, Base: time.Now().Add(-time.Hour), LineBytes: 200}
		deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: small}, {Source: big}}, Sink: sink}
		rep := job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeConfig || rep.CaughtUp ||
			!strings.Contains(rep.Error, "egress.bytes_per_second") || !strings.Contains(rep.Error, "run.push_timeout") {
			t.Fatalf("outcome %s, caught up %v, error %q; want config_error naming egress.bytes_per_second and run.push_timeout",
				rep.Outcome, rep.CaughtUp, rep.Error)
		}
		if len(rep.Frozen) != 1 || rep.Frozen[0].Key != "b" || !strings.Contains(rep.Frozen[0].Reason, "egress.bytes_per_second") {
			t.Errorf("frozen %+v; want b, naming egress.bytes_per_second", rep.Frozen)
		}
		if cp := checkpoints(t, coord); cp["a"] != 5 || cp["b"] != 0 {
			t.Errorf("stored cursors %v; want a at 5, b not moved", cp)
		}
		if got := delivered(t, srv); len(got["a"]) != 5 || len(got["b"]) != 0 {
			t.Errorf("the receiver holds %v; want a 1..5 and nothing of b", got)
		}
	})
}

// slowSink pushes to a receiver after a while (a slow receiver, a client retrying).
type slowSink struct {
	job.Pusher
	took time.Duration
}

func (s slowSink) Push(ctx context.Context, entries []loki.Entry) loki.Result {
	time.Sleep(s.took)
	return s.Pusher.Push(ctx, entries)
}

// The daily budget cuts the run's one batch, and the push of what it admits, started before
// the intake deadline, ends after it: intake had already stopped for its deadline when the
// push ended, yet the run is budget_paused, not ok and caught up with the rest of the batch
// left for a later run.
func TestBudgetPauseAfterTheIntakeDeadlineIsBudgetPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := jobtest.New()
		srv, sink := receiver(t, simloki.Options{})
		src := numbered(map[string]int{"a": 10})
		src.LineBytes = 100
		deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: slowSink{Pusher: sink, took: 90 * time.Second}}
		// Intake stops 60 s in; the push may last 2 minutes and ends 90 s in.
		opts := job.Options{MaxDuration: 4 * time.Minute, PushReserve: 2 * time.Minute, CommitReserve: 30 * time.Second,
			ReleaseReserve: 30 * time.Second}
		opts.Egress = job.EgressOptions{DailyBytes: 500, OnBudget: job.BudgetPause}
		start := time.Now()
		rep := job.Run(context.Background(), deps, opts)
		if took := time.Since(start); took < 90*time.Second {
			t.Fatalf("setup: the run took %v, want the push to end past the intake deadline", took)
		}
		if n := srv.Count(); n == 0 || n == 10 || rep.Records != int64(n) || checkpoints(t, coord)["a"] != n {
			t.Fatalf("setup: the receiver holds %d entries, %d records reported, stored cursor %d; want part of the batch "+
				"shipped and committed", n, rep.Records, checkpoints(t, coord)["a"])
		}
		if rep.Outcome != job.OutcomeBudgetPaused || rep.CaughtUp {
			t.Fatalf("the budget held %d of 10 entries back: outcome %s, caught up %v (%s); want budget_paused, not caught up",
				10-srv.Count(), rep.Outcome, rep.CaughtUp, rep.Error)
		}
	})
}
