package job_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/loki"
)

// The report counts a line's bytes as the receiver got them (after the line cap), and counts
// the truncation.
func TestReportCountsBytesAsSentAndTruncations(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 2})
	src.LineBytes = 400_000 // over Loki's default 256 KiB line limit: the client cuts it
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 2 {
		t.Fatalf("outcome %s with %d records (%s)", rep.Outcome, rep.Records, rep.Error)
	}
	var received int64
	for _, e := range srv.Entries() {
		received += int64(len(e.Line))
	}
	if rep.Bytes != received || rep.Bytes > 2*loki.DefaultMaxLineBytes {
		t.Fatalf("report bytes %d, the receiver got %d line bytes (cap %d per line)", rep.Bytes, received, loki.DefaultMaxLineBytes)
	}
	if rep.Truncated != 2 {
		t.Fatalf("report counts %d truncations, want 2", rep.Truncated)
	}
}

// Under on_permanent_reject: freeze, entries of the frozen key that the receiver accepted
// after the frozen one are counted: they reached it, and they will be sent again by the next
// run (uncommitted).
func TestReportCountsAcceptedEntriesBeyondAFrozenOne(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return strings.Contains(e.Line, `"n":3}`) }, "injected")
	src := numbered(map[string]int{"a": 10})
	opts := baseOptions()
	opts.OnPermanentReject = job.RejectFreeze
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomePartial || len(rep.Frozen) != 1 {
		t.Fatalf("outcome %s, %d frozen keys (%s), want partial with a:3 frozen", rep.Outcome, len(rep.Frozen), rep.Error)
	}
	stored := len(srv.Entries()) // 1, 2 and 4..10
	if stored != 9 || rep.Records != int64(stored) || rep.Uncommitted != 7 {
		t.Fatalf("receiver holds %d entries; the report counts %d records and %d uncommitted, want 9 and the 7 beyond the frozen one",
			stored, rep.Records, rep.Uncommitted)
	}
}

// A push cut by a lost lease after the receiver stored its entries is reported in doubt: the
// receiver may hold them although nothing was counted as shipped.
func TestReportCountsAPushCutInFlightAsInDoubt(t *testing.T) {
	coord := jobtest.New()
	srv := simloki.Start(t, simloki.Options{})
	srv.HoldAnswers(time.Minute)
	sink, err := loki.New(loki.Options{URL: srv.PushURL(), MaxAttempts: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { // lose the lease once the push has landed
		for len(srv.Entries()) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		coord.Sessions()[0].LoseLease(lease.ErrLost)
	}()
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 5})}}, Sink: sink}, baseOptions())
	if rep.Records != 0 || rep.Pushes != 0 {
		t.Fatalf("the report counts %d records in %d pushes: the push was never answered", rep.Records, rep.Pushes)
	}
	if got := len(srv.Entries()); rep.InDoubt != int64(got) || got != 5 {
		t.Fatalf("receiver holds %d entries, report says %d in doubt (outcome %s: %s)", got, rep.InDoubt, rep.Outcome, rep.Error)
	}
}

// The report gives each committed cursor's time position, read by its own source (the metrics
// export it; nothing outside the source parses its cursor).
func TestReportGivesTheCommittedCursorsTime(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 7})
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Org: "prod", Source: src}}, Sink: sink}, baseOptions())
	c, ok := rep.Cursors["org=prod:a"]
	if rep.Outcome != job.OutcomeOK || !ok || !c.At.Equal(src.Base.Add(7*time.Millisecond)) {
		t.Fatalf("outcome %s, cursor %+v: want at %v", rep.Outcome, c, src.Base.Add(7*time.Millisecond))
	}
}

func TestReportSummaries(t *testing.T) {
	rep := &job.Report{Outcome: job.OutcomePartial, ExitCode: 4, Epoch: 9, Records: 120, Bytes: 4096, Pushes: 2, Commits: 2,
		Sources: map[string]*job.SourceReport{"soql": {Records: 20, Keys: 1}, "eventlogfile": {Records: 100, Bytes: 4000, Keys: 2}},
		Error:   "pushing: receiver unavailable", Notes: []string{"one note"},
		Dropped: map[string]int64{"too_far_behind": 2, "line_too_long": 1}, Restamped: map[string]int64{"soql": 3},
		Frozen: []job.FrozenKey{{Key: "k", Reason: "rate_limited"}}}
	s := rep.Summary()
	for _, want := range []string{"outcome partial (exit 4) epoch 9: 120 records, 4096 bytes in 2 pushes, 2 commits", "error: pushing", "note: one note"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "eventlogfile") > strings.Index(s, "soql") {
		t.Errorf("sources not in name order:\n%s", s)
	}
	r := rep.ReplaySummary("dead.jsonl")
	for _, want := range []string{"deadletter replay dead.jsonl: partial; 120 entries shipped, 3 refused again (line_too_long 1, too_far_behind 2)",
		"; 3 re-stamped", "stopped at an entry refused again (rate_limited)"} {
		if !strings.Contains(r, want) {
			t.Errorf("replay summary lacks %q:\n%s", want, r)
		}
	}
}

// acceptAll is a receiver that accepts every entry without looking at it.
type acceptAll struct{}

func (acceptAll) Push(_ context.Context, entries []loki.Entry) loki.Result {
	res := loki.Result{Outcomes: make([]loki.Outcome, len(entries)), Accepted: make([]uint64, len(entries)), Requests: 1}
	for i, e := range entries {
		res.Outcomes[i], res.Accepted[i] = loki.Accepted, e.Ref
	}
	return res
}

// TestAnOrgCostsNoAllocationPerRecord: counting a settled record into its source's report
// allocates nothing, with an org or without one. (The report is found by a name that, with an
// org, is built of the org prefix and the source's name: looked up per record, that was one
// allocation per record.)
func TestAnOrgCostsNoAllocationPerRecord(t *testing.T) {
	const records = 20000
	mallocs := func(org string) uint64 {
		src := numbered(map[string]int{"a": records})
		deps := job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Org: org, Source: src}}, Sink: acceptAll{}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rep := job.Run(context.Background(), deps, baseOptions())
		runtime.ReadMemStats(&after)
		if rep.Outcome != job.OutcomeOK || rep.Records != records {
			t.Fatalf("org %q: outcome %s with %d records (%s)", org, rep.Outcome, rep.Records, rep.Error)
		}
		if sr := rep.Sources[job.Binding{Org: org, Source: src}.ReportName()]; sr == nil || sr.Records != records {
			t.Fatalf("org %q: the source's report %+v, want %d records", org, sr, records)
		}
		return after.Mallocs - before.Mallocs
	}
	without, with := mallocs(""), mallocs("prod")
	if with > without+records/4 {
		t.Fatalf("a run with an org made %d allocations, one without %d: more than one per %d records", with, without, 4)
	}
	t.Logf("allocations: %d without an org, %d with one, for %d records", without, with, records)
}
