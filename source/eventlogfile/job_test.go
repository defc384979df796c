package eventlogfile

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
)

// TestThroughJob runs the source under job.Run, served round-robin with two other types,
// against the strict simulated Loki, with a budget that ends every invocation inside a file and
// a push failure in the middle: every row reaches the receiver, none is lost, duplicates come
// only from the failed push, the stored cursors resume mid-file at the committed row, and each
// invocation downloads each file it touches once.
func TestThroughJob(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	day := epoch.Truncate(24 * time.Hour)
	want := map[string]bool{}
	addFile := func(typ string, rows int, logDate time.Time, created time.Duration) {
		id := e.addFile(simsf.EventLogFileSpec{EventType: typ, Rows: rows, LogDate: logDate, CreatedDate: epoch.Add(created)})
		for _, r := range e.requestIDs(id) {
			want[r] = true
		}
	}
	addFile("Login", 1500, day.Add(-48*time.Hour), -5*time.Hour)
	addFile("Login", 1200, day.Add(-24*time.Hour), -4*time.Hour)
	addFile("API", 900, day.Add(-24*time.Hour), -3*time.Hour)
	addFile("Logout", 10, day.Add(-24*time.Hour), -3*time.Hour)

	srv := simloki.New(simloki.Options{Now: e.clock.Now})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Now: e.clock.Now,
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxAttempts: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	coord := jobtest.New()
	opts := job.Options{MaxRecords: 1000, PushEntries: 250, MaxDuration: time.Minute, PushReserve: 5 * time.Second,
		CommitReserve: 5 * time.Second, ReleaseReserve: time.Second, Log: slog.New(slog.DiscardHandler), Now: e.clock.Now}

	for run := 1; run <= 10; run++ {
		if run == 2 {
			srv.FailNext(2, 500, "") // one push fails for good: its keys freeze for the run
		}
		e.org.ResetCalls()
		src := e.source(Options{EventTypes: []string{"Login", "API", "Logout"}})
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
		if run != 2 && rep.Outcome != job.OutcomeOK {
			t.Fatalf("run %d: outcome %s: %s %v", run, rep.Outcome, rep.Error, rep.Errors)
		}
		if dl, files := e.org.CallCount(simsf.KindDownload), 4; dl > files {
			t.Fatalf("run %d downloaded %d times for %d files", run, dl, files)
		}
		stored := coord.Stored(t)
		for k, v := range stored {
			if _, _, ok, err := decodeCursor(v); !ok || err != nil {
				t.Fatalf("run %d stored an unusable cursor for %s: %s", run, k, v)
			}
		}
		if run == 1 {
			// Round-robin with a quantum of 1000: API (900 rows) finishes, Login stops inside its
			// first file when the 1000-record budget is spent.
			if c := decoded(t, stored, Key("API")); !c.Done {
				t.Fatalf("run 1: API cursor %+v, want done", c)
			}
			if c := decoded(t, stored, Key("Login")); c.Done || c.Row != 100 {
				t.Fatalf("run 1: Login cursor %+v, want mid-file at row 100", c)
			}
		}
		if run == 2 && rep.Outcome == job.OutcomeOK {
			t.Fatal("run 2: the failed push must not end as ok")
		}
		if rep.Records == 0 && rep.CaughtUp {
			break
		}
	}
	got := map[string]int{}
	for _, en := range srv.Entries() {
		got[requestID(en.Line)]++
	}
	dups := 0
	for r := range want {
		switch c := got[r]; {
		case c == 0:
			t.Fatalf("row %s never reached the receiver", r)
		case c > 1:
			dups += c - 1
		}
	}
	if len(got) != len(want) {
		t.Fatalf("receiver holds %d distinct rows, want %d", len(got), len(want))
	}
	if dups > 250 {
		t.Fatalf("%d duplicates; at most the one failed push (250 entries) may repeat", dups)
	}
	stored := coord.Stored(t)
	for _, typ := range []string{"Login", "API", "Logout"} {
		if c := decoded(t, stored, Key(typ)); !c.Done {
			t.Fatalf("%s cursor not done at the end: %+v", typ, c)
		}
	}
}

// TestThroughJobUnderAnOrgPrefix: the same source under an org binding gets its keys prefixed
// by the job ("org=eu:eventlogfile:Login"), continues from the legacy unprefixed key written
// by a single-org configuration, and labels its entries with the org.
func TestThroughJobUnderAnOrgPrefix(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	day := epoch.Truncate(24 * time.Hour)
	e.addFile(simsf.EventLogFileSpec{Rows: 40, LogDate: day.Add(-48 * time.Hour), CreatedDate: epoch.Add(-5 * time.Hour)})
	srv, sink, opts := e.receiver(t)
	coord := jobtest.New()
	single := job.Binding{Source: e.source(Options{})}
	if rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{single}, Sink: sink}, opts); rep.Outcome != job.OutcomeOK || rep.Records != 40 {
		t.Fatalf("single-org run: %s, %d records", rep.Outcome, rep.Records)
	}
	e.addFile(simsf.EventLogFileSpec{Rows: 25, LogDate: day.Add(-24 * time.Hour), CreatedDate: epoch.Add(-4 * time.Hour)})
	eu := job.Binding{Org: "eu", LegacyFallback: true, Source: e.source(Options{Labels: []loki.Label{{Name: "org", Value: "eu"}}})}
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{eu}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomeOK || rep.Records != 25 {
		t.Fatalf("org run: %s, %d records; want only the 25 rows after the legacy cursor", rep.Outcome, rep.Records)
	}
	stored := coord.Stored(t)
	if c := decoded(t, stored, "org=eu:"+Key("Login")); !c.Done || c.Row != 25 {
		t.Fatalf("prefixed cursor %+v", c)
	}
	n := 0
	for _, en := range srv.Entries() {
		for _, l := range en.Labels {
			if l.Name == "org" && l.Value == "eu" {
				n++
			}
		}
	}
	if n != 25 {
		t.Fatalf("%d entries carry org=eu, want the 25 of the org run", n)
	}
}

// TestRequestLimitsThroughJob: REQUEST_LIMIT_EXCEEDED in the middle of a run, on the second
// download, after the API file has shipped (the keys are served in order: API, then Login). A
// concurrent-request limit is retried within the run and the run ends ok with every row
// delivered; the daily limit stops every source for the run, which ends partial (something had
// shipped, troubleshooting.md) and downloads nothing more.
func TestRequestLimitsThroughJob(t *testing.T) {
	for _, tc := range []struct {
		limit     simsf.RequestLimit
		outcome   job.Outcome
		records   int64
		downloads int
	}{
		{simsf.LimitConcurrentRequests, job.OutcomeOK, 30 + 25 + 20, 3 + 2},
		{simsf.LimitConcurrentLongTxn, job.OutcomeOK, 30 + 25 + 20, 3 + 2},
		{simsf.LimitTotalRequests, job.OutcomePartial, 20, 2},
	} {
		t.Run(string(tc.limit), func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			day := epoch.Truncate(24 * time.Hour)
			e.addFile(simsf.EventLogFileSpec{Rows: 30, LogDate: day.Add(-48 * time.Hour), CreatedDate: epoch.Add(-5 * time.Hour)})
			e.addFile(simsf.EventLogFileSpec{Rows: 25, LogDate: day.Add(-24 * time.Hour), CreatedDate: epoch.Add(-4 * time.Hour)})
			e.addFile(simsf.EventLogFileSpec{EventType: "API", Rows: 20, LogDate: day.Add(-24 * time.Hour), CreatedDate: epoch.Add(-4 * time.Hour)})
			e.org.AddFault(simsf.Fault{Kind: simsf.KindDownload, After: 1, Times: 2, Status: 403, Limit: tc.limit})
			srv, sink, opts := e.receiver(t)
			src := e.source(Options{EventTypes: []string{"Login", "API"}})
			rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
			if rep.Outcome != tc.outcome || rep.Records != tc.records {
				t.Fatalf("outcome %s with %d records (%s %v), want %s with %d", rep.Outcome, rep.Records, rep.Error, rep.Errors, tc.outcome, tc.records)
			}
			if n := int64(len(srv.Entries())); n != tc.records {
				t.Fatalf("the receiver holds %d entries, want %d", n, tc.records)
			}
			if n := e.org.CallCount(simsf.KindDownload); n != tc.downloads {
				t.Fatalf("%d downloads, want %d", n, tc.downloads)
			}
		})
	}
}

// TestHeldFileIsNotCaughtUpThroughJob: under job.Run, a file whose body is shorter than its
// LogFileLength (listed before Salesforce finished writing it) ships its whole rows and is held:
// the run is ok but not caught up, its report lists the type as waiting and a note names the file
// and why. The other type ships whole. Once the file is written, the next run ships the rest,
// and is caught up; every row reaches the receiver once.
func TestHeldFileIsNotCaughtUpThroughJob(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	day := epoch.Truncate(24 * time.Hour)
	held := e.addFile(simsf.EventLogFileSpec{Rows: 40, LogDate: day.Add(-24 * time.Hour), CreatedDate: epoch.Add(-2 * time.Hour),
		PartialUntil: epoch.Add(time.Hour)})
	api := e.addFile(simsf.EventLogFileSpec{EventType: "API", Rows: 20, LogDate: day.Add(-24 * time.Hour), CreatedDate: epoch.Add(-2 * time.Hour)})
	want := append(e.requestIDs(held), e.requestIDs(api)...)
	srv, sink, opts := e.receiver(t)
	coord := jobtest.New()
	run := func() *job.Report {
		src := e.source(Options{EventTypes: []string{"Login", "API"}})
		return job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	}

	rep := run()
	if rep.Outcome != job.OutcomeOK || rep.CaughtUp || len(rep.Errors) > 0 || rep.Records <= 20 || rep.Records >= 60 {
		t.Fatalf("short body: outcome %s caught_up %v, %d records, errors %v; want ok, not caught up, API and part of Login",
			rep.Outcome, rep.CaughtUp, rep.Records, rep.Errors)
	}
	if len(rep.Waiting) != 1 || rep.Waiting[0].Key != Key("Login") || !strings.Contains(rep.Waiting[0].Reason, held) {
		t.Fatalf("waiting %+v; want Login, naming file %s", rep.Waiting, held)
	}
	note := ""
	for _, n := range rep.Notes {
		if strings.Contains(n, held) {
			note = n
		}
	}
	for _, s := range []string{Key("Login"), "shorter than its LogFileLength", "the next run downloads it again"} {
		if !strings.Contains(note, s) {
			t.Fatalf("note %q (notes %q); want one naming the file and saying %q", note, rep.Notes, s)
		}
	}
	if c := decoded(t, coord.Stored(t), Key("Login")); c.Done || c.ShortBytes == nil {
		t.Fatalf("Login cursor %+v; want the file held", c)
	}

	e.clock.Advance(2 * time.Hour) // the file is written now
	rep = run()
	if rep.Outcome != job.OutcomeOK || !rep.CaughtUp || len(rep.Waiting) > 0 {
		t.Fatalf("complete body: outcome %s caught_up %v waiting %v (%s); want ok and caught up", rep.Outcome, rep.CaughtUp, rep.Waiting, rep.Error)
	}
	got := map[string]int{}
	for _, en := range srv.Entries() {
		got[requestID(en.Line)]++
	}
	for _, id := range want {
		if got[id] != 1 {
			t.Fatalf("row %s reached the receiver %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("the receiver holds %d distinct rows, want %d", len(got), len(want))
	}
}

// receiver returns a simulated Loki on the test clock, a sink pushing to it, and the options of
// a job run on that clock.
func (e *env) receiver(t *testing.T) (*simloki.Server, *loki.Client, job.Options) {
	t.Helper()
	srv := simloki.New(simloki.Options{Now: e.clock.Now})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	opts := job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second,
		ReleaseReserve: time.Second, Log: slog.New(slog.DiscardHandler), Now: e.clock.Now}
	return srv, sink, opts
}
