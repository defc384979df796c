package job_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
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
