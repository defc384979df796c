package eventlogfile

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
)

// lateSequences is the late-file case: Hourly files of hours h0..h0+3 are shipped, then the
// Sequence 2 and 3 files of hour h0 appear (Salesforce writes one or more files per hour; a
// later file carries events that arrived late) while the stream's newest entry is more than
// three hours newer than their rows. It returns the rows of every file and of the late files.
func lateSequences(t *testing.T, e *env, sink job.Pusher) (all, late map[string]time.Time, rep *job.Report) {
	t.Helper()
	h0 := epoch.Add(-5 * time.Hour) // 07:00
	all, late = map[string]time.Time{}, map[string]time.Time{}
	add := func(into map[string]time.Time, hour time.Time, seq int, created time.Time) {
		id := e.addFile(simsf.EventLogFileSpec{Interval: simsf.IntervalHourly, LogDate: hour, Sequence: seq, CreatedDate: created, Rows: 30})
		for _, r := range e.requestIDs(id) {
			into[r] = time.Time{}
		}
	}
	for h := range 4 {
		hour := h0.Add(time.Duration(h) * time.Hour)
		add(all, hour, 1, hour.Add(65*time.Minute))
	}
	coord := jobtest.New()
	run := func() *job.Report {
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: e.source(Options{Interval: IntervalHourly})}}, Sink: sink},
			job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second, ReleaseReserve: time.Second,
				Log: slog.New(slog.DiscardHandler), Now: e.clock.Now})
		if rep.Outcome != job.OutcomeOK || !rep.CaughtUp {
			t.Fatalf("outcome %s (caught up %v): %s %v", rep.Outcome, rep.CaughtUp, rep.Error, rep.Errors)
		}
		return rep
	}
	if rep := run(); rep.Records != 120 {
		t.Fatalf("first run shipped %d rows, want the 4 hours' 120", rep.Records)
	}
	add(late, h0, 2, epoch.Add(10*time.Minute))
	add(late, h0, 3, epoch.Add(20*time.Minute))
	for r := range late {
		all[r] = time.Time{}
	}
	e.clock.Advance(30 * time.Minute)
	rep = run()
	if rep.Records != 60 {
		t.Fatalf("second run shipped %d rows, want the late files' 60", rep.Records)
	}
	return all, late, rep
}

// TestLateSequenceFilesReachTheReceiver: against the strict receiver with Loki's default
// limits, the rows of the late Sequence 2 and 3 files (3-4 hours behind the stream's newest
// entry) are refused by nobody: they are shipped at the stream's head with their own time in
// event_time, and every row of every file arrives exactly once.
func TestLateSequenceFilesReachTheReceiver(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	srv := simloki.New(simloki.Options{Now: e.clock.Now})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	all, late, rep := lateSequences(t, e, sink)
	if n := srv.RejectedCount("too_far_behind"); n != 0 || srv.RejectedCount("") != 0 {
		t.Fatalf("the receiver refused %d entries as too far behind (%d in all)", n, srv.RejectedCount(""))
	}
	if rep.Restamped["too_far_behind"] != int64(len(late)) {
		t.Fatalf("restamped %v, want the %d late rows", rep.Restamped, len(late))
	}
	got := map[string]int{}
	for _, en := range srv.Entries() {
		id := requestID(en.Line)
		got[id]++
		checkEventTime(t, id, en.Timestamp, en.MetadataValue(job.EventTimeMetadata), en.Line, late)
	}
	exactlyOnce(t, got, all)
}

// TestE2ELateSequenceFilesVictoriaLogs: the same case against VictoriaLogs (which keeps every
// duplicate it is sent): every row once, the late ones findable by their own hour through
// event_time.
func TestE2ELateSequenceFilesVictoriaLogs(t *testing.T) {
	vl := testenv.StartVictoriaLogs(t)
	e := newEnv(t, simsf.Options{})
	sink, err := loki.New(loki.Options{URL: vl.PushURL(), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	all, late, _ := lateSequences(t, e, sink)
	rows := vl.Query(t, `{source="eventlogfile"}`)
	got := map[string]int{}
	for _, row := range rows {
		msg, _ := row["_msg"].(string)
		et, _ := row[job.EventTimeMetadata].(string)
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(row["_time"]))
		if err != nil {
			t.Fatal(err)
		}
		id := requestID(msg)
		got[id]++
		checkEventTime(t, id, ts, et, msg, late)
	}
	exactlyOnce(t, got, all)
	// One hour of events, whatever their timestamp: the late rows by their event time.
	hour := epoch.Add(-5 * time.Hour).Format("2006-01-02T15")
	if n := len(vl.Query(t, fmt.Sprintf(`{source="eventlogfile"} %s:%q*`, job.EventTimeMetadata, hour))); n != len(late) {
		t.Fatalf("%d rows with event_time in hour %s, want the %d late rows", n, hour, len(late))
	}
}

// checkEventTime: a late row carries its own time (TIMESTAMP_DERIVED) in event_time and a later
// timestamp; any other row is at its own time without event_time.
func checkEventTime(t *testing.T, id string, ts time.Time, eventTime, line string, late map[string]time.Time) {
	t.Helper()
	_, rest, _ := strings.Cut(line, `"TIMESTAMP_DERIVED":"`)
	own, _, _ := strings.Cut(rest, `"`)
	ownT, err := time.Parse(time.RFC3339Nano, own)
	if err != nil {
		t.Fatalf("row %s: TIMESTAMP_DERIVED %q", id, own)
	}
	if _, isLate := late[id]; isLate {
		et, err := time.Parse(time.RFC3339Nano, eventTime)
		if err != nil || !et.Equal(ownT) || !ts.After(ownT) {
			t.Fatalf("late row %s at %s with event_time %q, its own time %s", id, ts, eventTime, own)
		}
		return
	}
	if eventTime != "" || !ts.Equal(ownT) {
		t.Fatalf("row %s at %s (event_time %q), its own time %s", id, ts, eventTime, own)
	}
}

func exactlyOnce(t *testing.T, got map[string]int, want map[string]time.Time) {
	t.Helper()
	for r := range want {
		if got[r] != 1 {
			t.Fatalf("row %s reached the receiver %d times, want once", r, got[r])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("the receiver holds %d distinct rows, want %d", len(got), len(want))
	}
}

// TestDailySwitchedToHourly: a type shipped Daily is switched to Hourly. The last Daily file
// (day D-1) was written at 02:00 on day D, after the Hourly file of D 00:00; the Hourly listing
// starts where the Daily files' coverage ended, not at that CreatedDate, so no hour is skipped.
// Against Loki's default limits every row of every file arrives exactly once and none is
// refused as too far behind.
func TestDailySwitchedToHourly(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	day := epoch.Truncate(24 * time.Hour) // D
	all := map[string]time.Time{}
	add := func(spec simsf.EventLogFileSpec) {
		spec.Rows = 24
		for _, r := range e.requestIDs(e.addFile(spec)) {
			all[r] = time.Time{}
		}
	}
	for d := 3; d >= 1; d-- {
		logDate := day.Add(-time.Duration(d) * 24 * time.Hour)
		add(simsf.EventLogFileSpec{Interval: simsf.IntervalDaily, LogDate: logDate, CreatedDate: logDate.Add(26 * time.Hour)})
	}
	for h := range 11 {
		hour := day.Add(time.Duration(h) * time.Hour)
		add(simsf.EventLogFileSpec{Interval: simsf.IntervalHourly, LogDate: hour, CreatedDate: hour.Add(65 * time.Minute)})
	}
	srv := simloki.New(simloki.Options{Now: e.clock.Now})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	coord := jobtest.New()
	run := func(interval string) *job.Report {
		src := e.source(Options{Interval: interval, Lookback: 4 * 24 * time.Hour})
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink},
			job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second, ReleaseReserve: time.Second,
				Log: slog.New(slog.DiscardHandler), Now: e.clock.Now})
		if rep.Outcome != job.OutcomeOK || !rep.CaughtUp {
			t.Fatalf("%s: outcome %s: %s %v", interval, rep.Outcome, rep.Error, rep.Errors)
		}
		return rep
	}
	if rep := run(IntervalDaily); rep.Records != 72 {
		t.Fatalf("Daily run shipped %d rows, want the 3 days' 72", rep.Records)
	}
	if c := decoded(t, coord.Stored(t), Key("Login")); c.Interval != IntervalDaily || !c.Done {
		t.Fatalf("cursor after the Daily run %+v", c)
	}
	e.clock.Advance(time.Hour)
	rep := run(IntervalHourly)
	if rep.Records != 11*24 || rep.Events["eventlogfile.interval_switched"] != 1 {
		t.Fatalf("Hourly run shipped %d rows (events %v), want the 11 hours' %d", rep.Records, rep.Events, 11*24)
	}
	if c := decoded(t, coord.Stored(t), Key("Login")); c.Interval != "" || !c.Done {
		t.Fatalf("cursor after the Hourly run %+v", c)
	}
	if n := srv.RejectedCount(""); n != 0 {
		t.Fatalf("the receiver refused %d entries (%d too far behind)", n, srv.RejectedCount("too_far_behind"))
	}
	got := map[string]int{}
	for _, en := range srv.Entries() {
		got[requestID(en.Line)]++
	}
	exactlyOnce(t, got, all)
}
