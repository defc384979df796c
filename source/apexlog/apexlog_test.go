package apexlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/apexlog"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

var epoch = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	org   *sftest.Org
	clock *sftest.Clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := sftest.NewClock(epoch)
	return &env{org: sftest.Start(t, simsf.Options{Now: c.Now, Seed: 5}), clock: c}
}

func (e *env) client(t *testing.T) *salesforce.Client {
	t.Helper()
	return e.org.Client(t, func(o *salesforce.Options) { o.RetryWaitMax = 2 * time.Millisecond })
}

type result struct {
	records []source.Record
	cursor  json.RawMessage
	events  map[string]int64
	err     error
	logs    *bytes.Buffer
}

// run opens the source and pulls until EOF, an error, or max records (0 = no limit).
func (e *env) run(t *testing.T, opts apexlog.Options, cursor json.RawMessage, max int) *result {
	t.Helper()
	opts.Client, opts.Now = e.client(t), e.clock.Now
	src, err := apexlog.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	res := &result{cursor: cursor, events: map[string]int64{}, logs: &bytes.Buffer{}}
	streams, err := src.Open(context.Background(), source.OpenRequest{
		Cursors: map[string]json.RawMessage{apexlog.Key: cursor},
		Budget:  source.Budget{MaxRecords: max},
		Log:     slog.New(slog.NewTextHandler(res.logs, nil)),
		Count:   func(ev string, n int64) { res.events[ev] += n },
		Note:    func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 1 || streams[0].Key() != apexlog.Key {
		t.Fatalf("streams %v", streams)
	}
	for max == 0 || len(res.records) < max {
		rec := sourcetest.Stale() // Next must overwrite it whole
		err := streams[0].Next(context.Background(), &rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.err = err
			break
		}
		if left := sourcetest.LeftStale(rec); len(left) > 0 {
			t.Errorf("Next left %v of the record it was given", left)
		}
		res.records = append(res.records, rec)
		res.cursor = rec.Cursor.JSON()
	}
	if err := streams[0].Close(); err != nil {
		t.Fatal(err)
	}
	return res
}

func meta(e loki.Entry, name string) string {
	for _, m := range e.Metadata {
		if m.Name == name {
			return m.Value
		}
	}
	return ""
}

// TestBodies is the acceptance test: bodies under the cap are shipped as the line with the
// metadata as structured metadata; a log over the cap is shipped as metadata only, flagged
// skipped, without downloading its body.
func TestBodies(t *testing.T) {
	e := newEnv(t)
	bodies := map[string][]byte{}
	for i := range 5 {
		body := []byte(fmt.Sprintf("62.0 APEX_CODE,FINEST\n12:00:0%d.000 (1)|USER_DEBUG|[1]|DEBUG|hello \"%d\", ünïcode\n", i, i))
		id, err := e.org.AddApexLog(simsf.ApexLogSpec{LogUser: sftest.User, StartTime: epoch.Add(-time.Duration(30-i) * time.Minute), Body: body, Operation: "/apex/Page" + fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		bodies[id] = body
	}
	big, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-10 * time.Minute), BodyBytes: 6 << 20})
	if err != nil {
		t.Fatal(err)
	}
	res := e.run(t, apexlog.Options{}, nil, 0)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.records) != 6 {
		t.Fatalf("%d records, want 6", len(res.records))
	}
	for _, rec := range res.records {
		id := meta(rec.Entry, "Id")
		if org, _ := rec.Entry.Labels.Get("sf_org_id"); org != e.org.OrgID() {
			t.Fatalf("labels %s", rec.Entry.Labels)
		}
		if src, _ := rec.Entry.Labels.Get("source"); src != "apexlog" {
			t.Fatalf("labels %s", rec.Entry.Labels)
		}
		if id == big {
			if meta(rec.Entry, "body_skipped") != "true" || meta(rec.Entry, "body_skip_reason") != apexlog.ReasonSize {
				t.Fatalf("big log metadata %v, want body_skipped=true body_skip_reason=size", rec.Entry.Metadata)
			}
			if !strings.Contains(rec.Entry.Line, "body not shipped") {
				t.Fatalf("big log line %q", rec.Entry.Line)
			}
			continue
		}
		if rec.Entry.Line != string(bodies[id]) {
			t.Fatalf("log %s line %q, want its body %q", id, rec.Entry.Line, bodies[id])
		}
		if meta(rec.Entry, "body_skipped") != "" || meta(rec.Entry, "Operation") == "" || meta(rec.Entry, "LogUser_Username") == "" {
			t.Fatalf("log %s metadata %v", id, rec.Entry.Metadata)
		}
	}
	if got := e.org.CallCount(simsf.KindApexLogBody); got != 5 {
		t.Fatalf("%d body downloads, want 5 (none for the log over the cap)", got)
	}
	if res.events[apexlog.EventBodySkipped] != 1 {
		t.Fatalf("events %v", res.events)
	}
}

// TestBodiesAheadStayInOrderWithinTheLimit: with bodies fetched ahead DownloadConcurrency at a
// time against an org that answers in 20-40 ms and refuses more concurrent requests than that,
// every log is shipped once, in listing order, with its own body, and no request is refused;
// with a concurrency of 1 the org never sees two requests at once.
func TestBodiesAheadStayInOrderWithinTheLimit(t *testing.T) {
	for _, conc := range []int{4, 1} {
		t.Run(fmt.Sprint(conc), func(t *testing.T) {
			e := newEnv(t)
			var ids []string
			for i := range 30 {
				id, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(40-i) * time.Minute), Body: []byte(fmt.Sprint("body ", i))})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			e.org.SetLatencyRange(20*time.Millisecond, 40*time.Millisecond)
			e.org.SetConcurrentLimit(conc)
			res := e.run(t, apexlog.Options{DownloadConcurrency: conc, PageSize: 12}, nil, 0)
			if res.err != nil {
				t.Fatal(res.err)
			}
			if len(res.records) != len(ids) {
				t.Fatalf("%d records, want %d", len(res.records), len(ids))
			}
			for i, rec := range res.records {
				if meta(rec.Entry, "Id") != ids[i] || rec.Entry.Line != fmt.Sprint("body ", i) {
					t.Fatalf("record %d is log %s with %q, want log %s with its body", i, meta(rec.Entry, "Id"), rec.Entry.Line, ids[i])
				}
			}
			if peak := e.org.PeakConcurrent(); peak > conc || conc > 1 && peak < 2 {
				t.Fatalf("the org saw %d requests at once; want at most %d, and more than one when fetching ahead", peak, conc)
			}
		})
	}
}

// TestUserFilter: only the configured users' logs are listed.
func TestUserFilter(t *testing.T) {
	e := newEnv(t)
	users := []string{"ann@example.com", "bob@example.com", "cy@example.com"}
	want := map[string]bool{}
	for _, u := range users {
		e.org.AddUser(u, simsf.Permissions{APIEnabled: true})
	}
	for i := range 12 {
		u := users[i%3]
		id, err := e.org.AddApexLog(simsf.ApexLogSpec{LogUser: u, StartTime: epoch.Add(-time.Duration(40-i) * time.Minute), BodyBytes: 300})
		if err != nil {
			t.Fatal(err)
		}
		if u == "ann@example.com" {
			want[id] = true
		}
	}
	if err := (apexlog.Options{Users: []string{"ann@example.com", "o'hara@example.com"}}).Validate(); err == nil {
		t.Fatal("a username with a quote was accepted")
	}
	res := e.run(t, apexlog.Options{Users: []string{"ann@example.com"}}, nil, 0)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.records) != 4 {
		t.Fatalf("%d logs, want ann's 4", len(res.records))
	}
	for _, rec := range res.records {
		if u := meta(rec.Entry, "LogUser_Username"); u != "ann@example.com" {
			t.Fatalf("log of %q shipped", u)
		}
		if !want[meta(rec.Entry, "Id")] {
			t.Fatalf("unexpected log %s", meta(rec.Entry, "Id"))
		}
	}
}

// TestTieAcrossRuns: 300 logs sharing one StartTime, 70 per run, arrive once each in Id order.
func TestTieAcrossRuns(t *testing.T) {
	e := newEnv(t)
	ids := map[string]bool{}
	for range 300 {
		id, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-20 * time.Minute), BodyBytes: 200})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	var cur json.RawMessage
	got := map[string]int{}
	last := ""
	for run := 0; ; run++ {
		if run > 10 {
			t.Fatal("not caught up")
		}
		res := e.run(t, apexlog.Options{}, cur, 70)
		if res.err != nil {
			t.Fatal(res.err)
		}
		if len(res.records) == 0 {
			break
		}
		for _, rec := range res.records {
			id := meta(rec.Entry, "Id")
			got[id]++
			if id[:15] <= last {
				t.Fatalf("log %s after %s", id, last)
			}
			last = id[:15]
		}
		cur = res.cursor
	}
	for id := range ids {
		if got[id] != 1 {
			t.Fatalf("log %s shipped %d times", id, got[id])
		}
	}
}

// TestDownloadFailure: a recent log whose body fails holds the key (nothing passes it) until it
// downloads; one older than download_max_age is shipped as metadata, flagged; a vanished body
// (404) is shipped as metadata too.
// TestDownloadFailure: a body that keeps failing to download (a 5xx, or a page of HTML answered
// 200 by a proxy or Salesforce's maintenance) holds the key at a log younger than
// DownloadMaxAge, and ships an older one as metadata flagged download_failed; the next run,
// the body answering again, ships the held log with its body. A body gone (404) is shipped as
// metadata flagged not_found.
func TestDownloadFailure(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault simsf.Fault
		want  error
	}{
		{"503", simsf.Fault{Kind: simsf.KindApexLogBody, Times: -1, Status: 503}, salesforce.ErrUnavailable},
		{"an HTML page", simsf.Fault{Kind: simsf.KindApexLogBody, Times: -1, HTMLBody: true}, salesforce.ErrBadResponse},
	} {
		t.Run(c.name, func(t *testing.T) { testDownloadFailure(t, c.fault, c.want) })
	}
}

func testDownloadFailure(t *testing.T, fault simsf.Fault, want error) {
	e := newEnv(t)
	old, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-3 * time.Hour), Body: []byte("old")})
	if err != nil {
		t.Fatal(err)
	}
	recent, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Minute), Body: []byte("recent")})
	if err != nil {
		t.Fatal(err)
	}
	opts := apexlog.Options{Lookback: 4 * time.Hour}
	e.org.AddFault(fault)
	first := e.run(t, opts, nil, 0)
	if first.err == nil || !errors.Is(first.err, salesforce.ErrUnavailable) || !errors.Is(first.err, want) {
		t.Fatalf("first run error %v, want the recent log's unavailable body (%v)", first.err, want)
	}
	if len(first.records) != 1 || meta(first.records[0].Entry, "Id") != old || meta(first.records[0].Entry, "body_skip_reason") != apexlog.ReasonFailed {
		t.Fatalf("first run shipped %v; want only the old log, flagged download_failed", first.records)
	}
	if first.events[apexlog.EventBodyFailed] != 1 {
		t.Fatalf("events %v", first.events)
	}
	e.org.ClearFaults()
	second := e.run(t, opts, first.cursor, 0)
	if second.err != nil {
		t.Fatal(second.err)
	}
	if len(second.records) != 1 || second.records[0].Entry.Line != "recent" || meta(second.records[0].Entry, "Id") != recent {
		t.Fatalf("second run shipped %v, want the recent log with its body", second.records)
	}

	gone, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-30 * time.Second), Body: []byte("gone")})
	if err != nil {
		t.Fatal(err)
	}
	e.org.FailNext(simsf.KindApexLogBody, 1, 404)
	third := e.run(t, opts, second.cursor, 0)
	if third.err != nil {
		t.Fatal(third.err)
	}
	if len(third.records) != 1 || meta(third.records[0].Entry, "Id") != gone || meta(third.records[0].Entry, "body_skip_reason") != apexlog.ReasonNotFound {
		t.Fatalf("third run shipped %v, want the log flagged not_found", third.records)
	}
}

// TestLateVisibleLogs: Salesforce writes an ApexLog when its transaction ends, but lists it by
// StartTime, when it began. A long transaction that started before shorter ones ends after
// them: its log becomes visible after logs with a later StartTime were shipped. The next run
// ships it once: found by listing the overlap window again when its StartTime is inside it,
// by the late-row probe (its Id is above every Id listed) when it is older; without the probe
// such a log is missed, the documented cost. Nothing is shipped twice.
func TestLateVisibleLogs(t *testing.T) {
	tests := []struct {
		name      string
		startedAt time.Duration // the late log's StartTime, before epoch; the last log shipped is at -12m
		opts      apexlog.Options
		shipped   int
		events    map[string]int64
	}{
		{name: "inside the window", startedAt: 15 * time.Minute, shipped: 1, events: map[string]int64{apexlog.EventLateRecovered: 1}},
		{name: "older than the window", startedAt: 20 * time.Minute, shipped: 1, events: map[string]int64{apexlog.EventLateRows: 1}},
		{name: "no window", startedAt: 13 * time.Minute, opts: apexlog.Options{Overlap: -1}, shipped: 1, events: map[string]int64{apexlog.EventLateRows: 1}},
		{name: "older than the window, no probe", startedAt: 20 * time.Minute, opts: apexlog.Options{NoLateProbe: true}, shipped: 0, events: map[string]int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for i := range 10 {
				if _, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(30-2*i) * time.Minute), Body: []byte(fmt.Sprint("body ", i))}); err != nil {
					t.Fatal(err)
				}
			}
			// Still running: its log is written one minute from now.
			long, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-tc.startedAt), Body: []byte("long transaction"), VisibleAt: epoch.Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			first := e.run(t, tc.opts, nil, 0)
			if first.err != nil {
				t.Fatal(first.err)
			}
			if len(first.records) != 10 {
				t.Fatalf("first run shipped %d logs, want 10", len(first.records))
			}
			e.clock.Advance(2 * time.Minute)
			second := e.run(t, tc.opts, first.cursor, 0)
			if second.err != nil {
				t.Fatal(second.err)
			}
			if len(second.records) != tc.shipped || tc.shipped == 1 && (meta(second.records[0].Entry, "Id") != long || second.records[0].Entry.Line != "long transaction") {
				t.Fatalf("second run shipped %d logs (%v); want %d, the long transaction's %s", len(second.records), second.records, tc.shipped, long)
			}
			if !maps.Equal(second.events, tc.events) {
				t.Fatalf("second run counted %v, want %v", second.events, tc.events)
			}
			e.clock.Advance(time.Minute)
			third := e.run(t, tc.opts, second.cursor, 0)
			if third.err != nil || len(third.records) != 0 {
				t.Fatalf("third run: %d logs (%v); want none", len(third.records), third.err)
			}
		})
	}
}

// TestLateLogsCutAtAnyLog: several logs written late, older than the overlap window, whose
// StartTimes run against their Ids (the later written started earlier), found by a run that ends
// after any one of them: every log is shipped exactly once over the following runs.
func TestLateLogsCutAtAnyLog(t *testing.T) {
	const late = 3
	for cut := 1; cut <= late; cut++ {
		t.Run(fmt.Sprint("cut after ", cut), func(t *testing.T) {
			e := newEnv(t)
			for i := range 10 {
				if _, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(30-2*i) * time.Minute), BodyBytes: 100}); err != nil {
					t.Fatal(err)
				}
			}
			first := e.run(t, apexlog.Options{}, nil, 0)
			if first.err != nil || len(first.records) != 10 {
				t.Fatalf("first run: %d logs, %v", len(first.records), first.err)
			}
			var ids []string
			for i := range late {
				id, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(20+i) * time.Minute), BodyBytes: 100})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			got := map[string]int{}
			cur := first.cursor
			for run := range 3 {
				e.clock.Advance(time.Minute)
				budget := 0
				if run == 0 {
					budget = cut
				}
				res := e.run(t, apexlog.Options{}, cur, budget)
				if res.err != nil {
					t.Fatal(res.err)
				}
				for _, rec := range res.records {
					got[meta(rec.Entry, "Id")]++
				}
				cur = res.cursor
			}
			for i, id := range ids {
				if got[id] != 1 {
					t.Errorf("late log %d (%s) shipped %d times, want once", i, id, got[id])
				}
			}
			if len(got) != late {
				t.Errorf("shipped %v, want the %d late logs only", got, late)
			}
		})
	}
}

// TestCursorWithoutWindowResumes: a cursor as releases before the overlap window wrote it
// ({"v":1,"start_time","last_id"}) resumes just after its position, with no log lost or
// repeated, and the next cursor carries the window.
func TestCursorWithoutWindowResumes(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := range 6 {
		id, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(30-i) * time.Minute), BodyBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	old := json.RawMessage(fmt.Sprintf(`{"v":1,"start_time":"%s","last_id":"%s"}`, salesforce.FormatDateTime(epoch.Add(-27*time.Minute)), ids[3]))
	res := e.run(t, apexlog.Options{}, old, 0)
	if res.err != nil || len(res.events) != 0 {
		t.Fatalf("err %v, events %v", res.err, res.events)
	}
	if len(res.records) != 2 || meta(res.records[0].Entry, "Id") != ids[4] || meta(res.records[1].Entry, "Id") != ids[5] {
		t.Fatalf("shipped %d logs (%v), want the two after the cursor", len(res.records), res.records)
	}
	var c map[string]any
	if err := json.Unmarshal(res.cursor, &c); err != nil || c["from_ts"] == nil || c["seen"] == nil || c["max_id"] != ids[5] {
		t.Fatalf("cursor %s (%v) carries no window", res.cursor, err)
	}
}

// TestGarbageCursor: an unusable cursor restarts at the lookback, counted; the next run goes on
// from the new cursor.
func TestGarbageCursor(t *testing.T) {
	for _, g := range []string{`nope`, `{"v":2}`, `{"v":1,"start_time":"x","last_id":"07L000000000001"}`, `{"v":1,"start_time":"2026-06-30T11:00:00.000Z","last_id":"') OR ('1'='1"}`} {
		t.Run(g, func(t *testing.T) {
			e := newEnv(t)
			for i := range 4 {
				if _, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(100-30*i) * time.Minute), Body: []byte("x")}); err != nil {
					t.Fatal(err)
				}
			}
			first := e.run(t, apexlog.Options{}, json.RawMessage(g), 0)
			if first.err != nil || first.events[apexlog.EventCursorReset] != 1 || len(first.records) != 2 {
				t.Fatalf("err %v, events %v, %d records; want a reset and the 2 logs inside the lookback", first.err, first.events, len(first.records))
			}
			if !strings.Contains(first.logs.String(), "level=WARN msg=\"stored cursor is unusable") {
				t.Fatalf("no warning logged:\n%s", first.logs)
			}
			if _, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Second), Body: []byte("new")}); err != nil {
				t.Fatal(err)
			}
			second := e.run(t, apexlog.Options{}, first.cursor, 0)
			if second.err != nil || len(second.events) != 0 || len(second.records) != 1 || !bytes.Equal([]byte(second.records[0].Entry.Line), []byte("new")) {
				t.Fatalf("second run: err %v, events %v, %d records", second.err, second.events, len(second.records))
			}
		})
	}
}

// TestConcurrentLimitStopsTheKey: a concurrent-request limit that outlasts the client's
// retries is about the org, not the log: the key stops and waits, even for a log older than
// download_max_age, instead of shipping it as metadata only.
func TestConcurrentLimitStopsTheKey(t *testing.T) {
	e := newEnv(t)
	if _, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-3 * time.Hour), Body: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	e.org.AddFault(simsf.Fault{Kind: simsf.KindApexLogBody, Times: -1, Status: 403, Limit: simsf.LimitConcurrentRequests})
	res := e.run(t, apexlog.Options{Lookback: 4 * time.Hour}, nil, 0)
	if !errors.Is(res.err, salesforce.ErrConcurrentLimit) {
		t.Fatalf("error %v, want the concurrent limit", res.err)
	}
	if len(res.records) != 0 {
		t.Fatalf("shipped %d records (first flagged %q) while the org was at its concurrent limit", len(res.records),
			meta(res.records[0].Entry, "body_skip_reason"))
	}
}

// TestMaxRecordsPerRunWaits: a key stopped at MaxRecordsPerRun ends with source.ErrWaiting,
// saying so (the run is not caught up: more logs may follow), not io.EOF; the next runs go on
// after the last log shipped, and the run that finds fewer logs than the cap ends at io.EOF.
func TestMaxRecordsPerRunWaits(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		if _, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-time.Duration(30-i) * time.Minute), BodyBytes: 100}); err != nil {
			t.Fatal(err)
		}
	}
	var cur json.RawMessage
	seen := map[string]bool{}
	for i, want := range []int{2, 2, 1} {
		res := e.run(t, apexlog.Options{MaxRecordsPerRun: 2}, cur, 0)
		if len(res.records) != want {
			t.Fatalf("run %d: %d logs, want %d", i+1, len(res.records), want)
		}
		for _, rec := range res.records {
			seen[meta(rec.Entry, "Id")] = true
		}
		switch {
		case want == 2 && (!errors.Is(res.err, source.ErrWaiting) || !strings.Contains(res.err.Error(), "max_records_per_run")):
			t.Fatalf("run %d stopped at the cap with %v; want source.ErrWaiting naming max_records_per_run", i+1, res.err)
		case want < 2 && res.err != nil:
			t.Fatalf("run %d: %v; want the key caught up", i+1, res.err)
		}
		cur = res.cursor
	}
	if len(seen) != 5 {
		t.Fatalf("%d distinct logs shipped, want 5", len(seen))
	}
}

// TestLongTransactionBodyFailureWaitsFromItsEnd: a long transaction (started 3 h ago, lasting
// 2.5 h) writes its log when it ends, half an hour ago. Its StartTime is older than
// DownloadMaxAge, but the log could only be fetched since its end: a failed body download
// holds the key (nothing shipped, the run ends with the error) instead of shipping it as
// metadata only, and the next run, the body answering again, ships it with its body.
func TestLongTransactionBodyFailureWaitsFromItsEnd(t *testing.T) {
	e := newEnv(t)
	start, dur := epoch.Add(-3*time.Hour), 150*time.Minute
	long, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: start, DurationMilliseconds: int(dur / time.Millisecond),
		VisibleAt: start.Add(dur), Body: []byte("batch apex")})
	if err != nil {
		t.Fatal(err)
	}
	opts := apexlog.Options{Lookback: 4 * time.Hour}
	e.org.AddFault(simsf.Fault{Kind: simsf.KindApexLogBody, Times: -1, Status: 503})
	first := e.run(t, opts, nil, 0)
	if !errors.Is(first.err, salesforce.ErrUnavailable) || !strings.Contains(first.err.Error(), long) {
		t.Fatalf("first run error %v, want the log %s's unavailable body", first.err, long)
	}
	if len(first.records) != 0 || first.events[apexlog.EventBodyFailed] != 0 {
		t.Fatalf("first run shipped %d logs (events %v); want none: the log ended 30 minutes ago", len(first.records), first.events)
	}
	e.org.ClearFaults()
	e.clock.Advance(time.Minute)
	second := e.run(t, opts, first.cursor, 0)
	if second.err != nil {
		t.Fatal(second.err)
	}
	if len(second.records) != 1 || meta(second.records[0].Entry, "Id") != long || second.records[0].Entry.Line != "batch apex" {
		t.Fatalf("second run shipped %v, want the log %s with its body", second.records, long)
	}
}

// TestListingLocatorExpiredBetweenPages: a listing longer than one batch is read through
// nextRecordsUrl while the page's bodies download and the job pushes them. A locator left idle
// past Salesforce's timeout (or released because the user opened too many) answers
// INVALID_QUERY_LOCATOR; the run goes on from the last log handed out with a new keyset query,
// and every log is shipped exactly once.
func TestListingLocatorExpiredBetweenPages(t *testing.T) {
	e := newEnv(t)
	ids := map[string]bool{}
	for i := range 500 {
		id, err := e.org.AddApexLog(simsf.ApexLogSpec{StartTime: epoch.Add(-50*time.Minute + time.Duration(i)*time.Second), BodyBytes: 100})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	src, err := apexlog.New(apexlog.Options{
		Client: e.org.Client(t, func(o *salesforce.Options) {
			o.RetryWaitMax = 2 * time.Millisecond
			o.BatchSize = salesforce.MinBatchSize
		}),
		Now: e.clock.Now, PageSize: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	streams, err := src.Open(context.Background(), source.OpenRequest{
		Cursors: map[string]json.RawMessage{}, Log: slog.New(slog.DiscardHandler),
		Count: func(string, int64) {}, Note: func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for n := 0; ; n++ {
		if n == 150 {
			// The job is slow to take the rest of the first batch: the locator of the
			// listing's next page times out meanwhile.
			e.clock.Advance(simsf.DefaultLocatorIdleTimeout + time.Minute)
		}
		rec := sourcetest.Stale()
		err := streams[0].Next(context.Background(), &rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d logs: %v", len(got), err)
		}
		got[meta(rec.Entry, "Id")]++
	}
	_ = streams[0].Close()
	if len(got) != len(ids) {
		t.Fatalf("%d logs shipped, want %d", len(got), len(ids))
	}
	for id := range ids {
		if got[id] != 1 {
			t.Fatalf("log %s shipped %d times", id, got[id])
		}
	}
	if n := e.org.CallCount(simsf.KindToolingQueryMore); n == 0 {
		t.Fatal("the listing was never paged by nextRecordsUrl: the test does not exercise the locator")
	}
}
