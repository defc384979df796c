package soql_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/soql"
)

// TestThroughJob runs the source under job.Run against the strict simulated Loki: a
// LoginHistory tie group and a Big Object tie group served round-robin with a 700-record
// budget per invocation; every row reaches the receiver once and the cursors persist through
// the store.
func TestThroughJob(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	tie := epoch.Add(-30 * time.Minute)
	var logins, events []simsf.Record
	for i := range 1500 {
		ts := tie
		if i >= 1000 {
			ts = epoch.Add(-29*time.Minute + time.Duration(i)*time.Second)
		}
		logins = append(logins, loginRow(ts, i))
		events = append(events, loginEvent(ts, i))
	}
	loginIDs := insertShuffled(t, e.org.Org, "LoginHistory", logins, 21)
	eventIDs := eventIDs(t, e.org.Org, insertShuffled(t, e.org.Org, "LoginEvent", events, 22))

	srv := simloki.New(simloki.Options{Now: e.clock.Now})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Now: e.clock.Now,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	coord := jobtest.New()
	var pushed int64
	for run := 0; ; run++ {
		if run > 20 {
			t.Fatal("not caught up after 20 invocations")
		}
		src, err := soql.New(soql.Options{Client: e.client(t), Now: e.clock.Now, Objects: []soql.Object{
			{Name: "LoginHistory"}, {Name: "LoginEvent", BigObject: true},
		}})
		if err != nil {
			t.Fatal(err)
		}
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Sink: sink, Bindings: []job.Binding{{Source: src}}},
			job.Options{MaxRecords: 700, MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second,
				ReleaseReserve: time.Second, Log: slog.New(slog.DiscardHandler), Now: e.clock.Now})
		if rep.Outcome != job.OutcomeOK || len(rep.Errors) > 0 {
			t.Fatalf("run %d: outcome %s, errors %v", run, rep.Outcome, rep.Errors)
		}
		pushed += rep.Records
		if rep.Records > 700 {
			t.Fatalf("run %d shipped %d records, budget 700", run, rep.Records)
		}
		if rep.CaughtUp {
			break
		}
		e.clock.Advance(10 * time.Second)
	}
	got := map[string]int{}
	for _, en := range srv.Entries() {
		var m map[string]any
		if err := json.Unmarshal([]byte(en.Line), &m); err != nil {
			t.Fatal(err)
		}
		if ei, ok := m["EventIdentifier"].(string); ok {
			got[ei]++
			continue
		}
		got[m["Id"].(string)]++
	}
	for _, id := range loginIDs {
		if got[id] != 1 {
			t.Fatalf("LoginHistory %s received %d times", id, got[id])
		}
	}
	for ei := range eventIDs {
		if got[ei] != 1 {
			t.Fatalf("LoginEvent %s received %d times", ei, got[ei])
		}
	}
	if want := int64(len(loginIDs) + len(eventIDs)); pushed != want {
		t.Fatalf("%d entries pushed over all runs, want %d (a duplicate was pushed)", pushed, want)
	}
}

// TestLateProbeRowsBehindTheStreamHead: the late probe finds rows 90 minutes older than the
// newest entry already shipped to their stream (inserted after the run that passed their
// timestamp). Against Loki's default limits (a 1 h window) none is refused: they are shipped at
// the stream's head with their own time in event_time, and every row arrives exactly once.
func TestLateProbeRowsBehindTheStreamHead(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 120 {
		rows = append(rows, loginRow(epoch.Add(-2*time.Hour+time.Duration(i)*time.Minute), i))
	}
	ids := insertShuffled(t, e.org.Org, "LoginHistory", rows, 5)
	srv := simloki.New(simloki.Options{Now: e.clock.Now})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	coord := jobtest.New()
	run := func() *job.Report {
		src, err := soql.New(soql.Options{Client: e.client(t), Now: e.clock.Now, Objects: []soql.Object{{Name: "LoginHistory", Lookback: 3 * time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Sink: sink, Bindings: []job.Binding{{Source: src}}},
			job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second,
				ReleaseReserve: time.Second, Log: slog.New(slog.DiscardHandler), Now: e.clock.Now})
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("outcome %s: %s %v", rep.Outcome, rep.Error, rep.Errors)
		}
		return rep
	}
	run()
	// The head is the last row, at -1m. Rows at -91m and later, visible only now, have Ids
	// above every Id read: the probe finds them.
	var late []simsf.Record
	for i := range 5 {
		late = append(late, loginRow(epoch.Add(-91*time.Minute+time.Duration(i)*time.Second), 1000+i))
	}
	lateIDs, err := e.org.Insert("LoginHistory", late...)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	rep := run()
	if rep.Records != 5 || rep.Events["soql.late_rows"] != 5 || rep.Restamped["too_far_behind"] != 5 {
		t.Fatalf("second run: %d records, events %v, restamped %v", rep.Records, rep.Events, rep.Restamped)
	}
	if n := srv.RejectedCount(""); n != 0 {
		t.Fatalf("the receiver refused %d entries: %+v", n, srv.Rejected()[0])
	}
	got := map[string]int{}
	for _, en := range srv.Entries() {
		var m map[string]any
		if err := json.Unmarshal([]byte(en.Line), &m); err != nil {
			t.Fatal(err)
		}
		got[m["Id"].(string)]++
		// Each moved row takes a nanosecond of its own above the head, so that Loki keeps rows
		// whose lines are alike.
		head := epoch.Add(-time.Minute)
		if et := en.MetadataValue(job.EventTimeMetadata); et != "" && (m["LoginTime"] == nil || !en.Timestamp.After(head) || en.Timestamp.After(head.Add(5))) {
			t.Fatalf("re-stamped entry at %s (event_time %s): want just above the stream's head", en.Timestamp, et)
		}
	}
	for _, id := range append(ids, lateIDs...) {
		if got[id] != 1 {
			t.Fatalf("LoginHistory %s received %d times", id, got[id])
		}
	}
}
