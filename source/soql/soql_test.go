package soql_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/soql"
)

// loginRow is a LoginHistory row at ts.
func loginRow(ts time.Time, i int) simsf.Record {
	return simsf.Record{"LoginTime": ts, "LoginType": "Application", "SourceIp": fmt.Sprintf("10.0.%d.%d", i/250, i%250), "Status": "Success"}
}

// insertShuffled inserts rows in a random order, so that Id order is not timestamp order.
func insertShuffled(t *testing.T, org *simsf.Org, object string, rows []simsf.Record, seed uint64) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	ids, err := org.Insert(object, rows...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// ordered checks that the records' (timestamp, Id) positions strictly increase.
func ordered(t *testing.T, recs [][2]string) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		a, b := recs[i-1], recs[i]
		if a[0] > b[0] || a[0] == b[0] && strings.Compare(a[1][:15], b[1][:15]) >= 0 {
			t.Fatalf("delivery %d (%v) is not after delivery %d (%v)", i, b, i-1, a)
		}
	}
}

// TestTieGroupAcrossRuns is the acceptance test: 5 000 LoginHistory rows of which 2 500 share
// one LoginTime, pulled 700 records per run, arrive exactly once and in order, and no request
// is refused for its URL length.
func TestTieGroupAcrossRuns(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	tie := epoch.Add(-30 * time.Minute)
	var rows []simsf.Record
	for i := range 1250 {
		rows = append(rows, loginRow(epoch.Add(-50*time.Minute+time.Duration(i)*500*time.Millisecond), i))
	}
	for i := range 2500 {
		rows = append(rows, loginRow(tie, 1250+i))
	}
	for i := range 1250 {
		rows = append(rows, loginRow(epoch.Add(-29*time.Minute+time.Duration(i)*500*time.Millisecond), 3750+i))
	}
	ids := insertShuffled(t, e.org.Org, "LoginHistory", rows, 1)

	opts := soql.Options{Objects: []soql.Object{{Name: "LoginHistory"}}}
	cursors := map[string]json.RawMessage{}
	seen := map[string]int{}
	var order [][2]string
	runs, queries, shrunk := 0, int64(0), int64(0)
	for ; runs < 50; runs++ {
		res := e.run(t, opts, cursors, 700)
		noErrors(t, res)
		queries += res.calls[string(salesforce.KindQuery)]
		shrunk += res.events[soql.EventOverlapShrunk]
		if len(res.records) == 0 {
			break
		}
		if n := len(res.entries()); n > 700 {
			t.Fatalf("run %d delivered %d records, budget 700", runs, n)
		}
		for _, rec := range res.entries() {
			id := lineField(t, rec, "Id")
			seen[id]++
			order = append(order, [2]string{lineField(t, rec, "LoginTime"), id})
		}
		cursors = res.cursors
		if l := len(cursors[soql.Key("LoginHistory")]); l > 10_000 {
			t.Fatalf("cursor is %d bytes; the overlap ids are not bounded", l)
		}
		e.clock.Advance(10 * time.Second)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("row %s delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("%d distinct rows delivered, want %d", len(seen), len(ids))
	}
	ordered(t, order)
	if shrunk == 0 {
		t.Fatal("2 500 rows in the overlap window never shrank it below max_overlap_ids")
	}
	if got := e.org.CallCount(simsf.KindQuery) + e.org.CallCount(simsf.KindQueryMore); int64(got) != queries {
		t.Fatalf("org counted %d queries, source %d", got, queries)
	}
	t.Logf("%d runs, %d queries", runs, queries)
	if queries > int64(2*runs) {
		t.Fatalf("%d queries over %d runs: more than two per run", queries, runs)
	}
}

// TestAPICallsPer10000 measures the API calls of one run over 10 000 rows: one query page per
// 2000 rows and one describe.
func TestAPICallsPer10000(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 10_000 {
		rows = append(rows, loginRow(epoch.Add(-55*time.Minute+time.Duration(i)*300*time.Millisecond), i))
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 2)
	e.org.ResetCalls()
	res := e.run(t, soql.Options{Objects: []soql.Object{{Name: "LoginHistory"}}}, nil, 0)
	noErrors(t, res)
	if n := len(res.entries()); n != 10_000 {
		t.Fatalf("delivered %d rows, want 10000", n)
	}
	q, d := res.calls[string(salesforce.KindQuery)], res.calls[string(salesforce.KindDescribe)]
	t.Logf("10000 rows: %d query calls, %d describe calls", q, d)
	if q > 5 || d != 1 {
		t.Fatalf("10000 rows cost %d query calls and %d describes; want at most 5 and 1", q, d)
	}
}

// TestLateRows: a row that becomes visible after the position passed its timestamp is delivered
// when it lies inside the overlap window, and reported as late (counted) and still delivered
// when it is older than the window; nothing is delivered twice.
func TestLateRows(t *testing.T) {
	tests := []struct {
		name    string
		overlap time.Duration
		noProbe bool
		// want counts of the second run
		recovered, late int64
	}{
		{name: "window", overlap: 5 * time.Minute, recovered: 1, late: 1},
		{name: "no window", overlap: -1, recovered: 0, late: 2},
		// Without the probe the row older than the window is missed: the documented cost.
		{name: "window without probe", overlap: 5 * time.Minute, noProbe: true, recovered: 1, late: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			var rows []simsf.Record
			for i := range 100 {
				rows = append(rows, loginRow(epoch.Add(-30*time.Minute+time.Duration(i)*15*time.Second), i))
			}
			insertShuffled(t, e.org.Org, "LoginHistory", rows, 3)
			// Committed with an older timestamp, visible only after the first run.
			hidden, err := e.org.Insert("LoginHistory", loginRow(epoch.Add(-8*time.Minute), 500))
			if err != nil {
				t.Fatal(err)
			}
			if err := e.org.SetVisibleAfter(hidden[0], epoch.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			opts := soql.Options{Objects: []soql.Object{{Name: "LoginHistory", Overlap: tc.overlap, NoLateProbe: tc.noProbe}}}
			first := e.run(t, opts, nil, 0)
			noErrors(t, first)
			if n := len(first.entries()); n != 100 {
				t.Fatalf("first run delivered %d rows, want 100", n)
			}
			// The last row is at −5m15s; the hidden row (−8m) is inside a 5m window; a row
			// inserted now at −40m is older than it.
			old, err := e.org.Insert("LoginHistory", loginRow(epoch.Add(-40*time.Minute), 501))
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(2 * time.Minute)
			second := e.run(t, opts, first.cursors, 0)
			noErrors(t, second)
			got := map[string]bool{}
			for _, rec := range second.entries() {
				got[lineField(t, rec, "Id")] = true
			}
			want := map[string]bool{hidden[0]: true}
			if !tc.noProbe {
				want[old[0]] = true
			}
			if len(got) != len(want) || !got[hidden[0]] || got[old[0]] != want[old[0]] {
				t.Fatalf("second run delivered %v, want %v (the hidden row %s, the old row %s)", got, want, hidden[0], old[0])
			}
			if second.events[soql.EventLateRecovered] != tc.recovered || second.events[soql.EventLateRows] != tc.late {
				t.Fatalf("events %v, want %s=%d and %s=%d", second.events, soql.EventLateRecovered, tc.recovered, soql.EventLateRows, tc.late)
			}
			if w := strings.Count(second.logs.String(), "level=WARN msg=\"a row became visible later than the overlap window"); int64(w) != tc.late {
				t.Fatalf("%d late-row warnings, want %d:\n%s", w, tc.late, second.logs)
			}
			third := e.run(t, opts, second.cursors, 0)
			noErrors(t, third)
			if n := len(third.records); n != 0 {
				t.Fatalf("third run delivered %d records, want none", n)
			}
		})
	}
}

// TestLateProbeCutAtAnyRow: rows that become visible after the position passed them, older than
// the overlap window, are found only by the late-row probe ((before the window) AND
// Id > max_id). Their timestamps run against their Ids (the oldest has the highest Id), and the
// run that finds them ends after any one of them (batch.max_records, a deadline, a frozen key):
// the cursor it commits must not carry a max_id past a late row it has not delivered. Every
// row arrives exactly once over the following runs.
func TestLateProbeCutAtAnyRow(t *testing.T) {
	const late = 4
	for cut := 1; cut <= late; cut++ {
		t.Run(fmt.Sprint("cut after ", cut), func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			var rows []simsf.Record
			for i := range 20 {
				rows = append(rows, loginRow(epoch.Add(-40*time.Minute+time.Duration(i)*time.Minute), i))
			}
			if _, err := e.org.Insert("LoginHistory", rows...); err != nil {
				t.Fatal(err)
			}
			opts := soql.Options{Objects: []soql.Object{{Name: "LoginHistory"}}} // default 5m window, probe on
			first := e.run(t, opts, nil, 0)
			noErrors(t, first)
			if n := len(first.entries()); n != 20 {
				t.Fatalf("first run delivered %d rows, want 20", n)
			}
			// Inserted after everything read, so with higher Ids, each older than the one
			// before: the probe's timestamp order is the reverse of their Id order.
			var lateIDs []string
			for i := range late {
				ids, err := e.org.Insert("LoginHistory", loginRow(epoch.Add(-30*time.Minute-time.Duration(i)*time.Minute), 100+i))
				if err != nil {
					t.Fatal(err)
				}
				lateIDs = append(lateIDs, ids[0])
			}
			e.clock.Advance(time.Minute)
			got := map[string]int{}
			cursors := first.cursors
			for run := range 4 {
				budget := 0
				if run == 0 {
					budget = cut
				}
				res := e.run(t, opts, cursors, budget)
				noErrors(t, res)
				for _, rec := range res.entries() {
					got[lineField(t, rec, "Id")]++
				}
				cursors = res.cursors
				e.clock.Advance(time.Minute)
			}
			for i, id := range lateIDs {
				if got[id] != 1 {
					t.Errorf("late row %d (%s, -%dm) delivered %d times, want once", i, id, 30+i, got[id])
				}
			}
			if len(got) != late {
				t.Errorf("delivered %v, want the %d late rows only", got, late)
			}
		})
	}
}

// TestGarbageCursor: an unusable cursor falls back to the lookback with a warning counted as
// cursor_reset, and the next run proceeds from the cursor the first one wrote.
func TestGarbageCursor(t *testing.T) {
	garbage := []string{
		`not json`,
		`[]`,
		`"2026-06-30T10:00:00.000+0000"`,
		`{"v":99}`,
		`{"v":1,"field":"LoginTime","ts":"yesterday","last_id":"0Ya000000000001"}`,
		`{"v":1,"field":"LoginTime","ts":"2026-06-30T10:00:00.000Z","last_id":"x' OR Id != '"}`,
		`{"v":1,"field":"CreatedDate","ts":"2026-06-30T10:00:00.000Z","last_id":"0Ya000000000001"}`,
		`{"v":1,"field":"LoginTime","ts":"2026-06-30T10:00:00.000Z","last_id":"0Ya000000000001","seen":"abc"}`,
		`{"v":1,"field":"LoginTime","ts":"2026-06-30T10:00:00.000Z","last_id":"0Ya000000000001","from_ts":"2026-06-30T11:00:00.000Z"}`,
	}
	for i, g := range garbage {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			var rows []simsf.Record
			for i := range 30 {
				// 10 rows before the 1h lookback, 20 inside it.
				ts := epoch.Add(-90*time.Minute + time.Duration(i)*time.Minute)
				if i >= 10 {
					ts = epoch.Add(-50*time.Minute + time.Duration(i)*time.Minute)
				}
				rows = append(rows, loginRow(ts, i))
			}
			insertShuffled(t, e.org.Org, "LoginHistory", rows, 4)
			key := soql.Key("LoginHistory")
			opts := soql.Options{Objects: []soql.Object{{Name: "LoginHistory"}}}
			first := e.run(t, opts, map[string]json.RawMessage{key: json.RawMessage(g)}, 0)
			noErrors(t, first)
			if first.events[soql.EventCursorReset] != 1 {
				t.Fatalf("events %v, want one cursor_reset", first.events)
			}
			if !strings.Contains(first.logs.String(), "level=WARN msg=\"stored cursor is unusable") {
				t.Fatalf("no warning logged:\n%s", first.logs)
			}
			if n := len(first.entries()); n != 20 {
				t.Fatalf("delivered %d rows, want the 20 inside the lookback", n)
			}
			if _, err := e.org.Insert("LoginHistory", loginRow(epoch.Add(-time.Minute), 99)); err != nil {
				t.Fatal(err)
			}
			second := e.run(t, opts, first.cursors, 0)
			noErrors(t, second)
			if second.events[soql.EventCursorReset] != 0 || len(second.entries()) != 1 {
				t.Fatalf("second run: events %v, %d rows; want no reset and the one new row", second.events, len(second.entries()))
			}
		})
	}
}

// TestShapedRowsAdvance: rows dropped by shaping are Skip records whose cursor advances, so a
// re-run does not read them again; the rest are shaped (hashed field).
func TestShapedRowsAdvance(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 40 {
		r := loginRow(epoch.Add(-30*time.Minute+time.Duration(i)*time.Second), i)
		if i%4 == 0 {
			r["Status"] = "Invalid Password"
		}
		rows = append(rows, r)
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 5)
	sh, err := shape.New(shape.Options{
		Salt: []byte("0123456789abcdef0123"),
		Transforms: []shape.Transform{
			{Op: shape.OpDropRow, Name: "failures", Match: map[string]string{"Status": "Invalid*"}},
			{Op: shape.OpHash, Fields: []string{"SourceIp"}},
		},
		Metadata: []string{"SourceIp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := soql.Options{Objects: []soql.Object{{Name: "LoginHistory"}}, Shaper: sh}
	first := e.run(t, opts, nil, 0)
	noErrors(t, first)
	skips := 0
	for _, rec := range first.records {
		if rec.Skip {
			skips++
			if rec.SkipReason != "drop_row:failures" {
				t.Fatalf("skip reason %q", rec.SkipReason)
			}
			continue
		}
		ip := lineField(t, rec, "SourceIp")
		if strings.HasPrefix(ip, "10.") || len(ip) != 64 {
			t.Fatalf("SourceIp %q is not hashed in the line", ip)
		}
		if src, _ := rec.Entry.Labels.Get("source"); src != "soql" {
			t.Fatalf("labels %s", rec.Entry.Labels)
		}
		if id, _ := rec.Entry.Labels.Get("sf_org_id"); id != e.org.OrgID() {
			t.Fatalf("sf_org_id label %q, want %q", id, e.org.OrgID())
		}
		if et, _ := rec.Entry.Labels.Get("event_type"); et != "LoginHistory" {
			t.Fatalf("labels %s", rec.Entry.Labels)
		}
	}
	if skips != 10 || len(first.entries()) != 30 {
		t.Fatalf("%d skips and %d entries, want 10 and 30", skips, len(first.entries()))
	}
	// The last row read is a dropped one: its Skip record carries the final cursor.
	second := e.run(t, opts, first.cursors, 0)
	noErrors(t, second)
	if len(second.records) != 0 {
		t.Fatalf("re-run produced %d records, want none", len(second.records))
	}
}

// TestWhereFilter: the operator's condition applies to every query.
func TestWhereFilter(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 20 {
		r := loginRow(epoch.Add(-30*time.Minute+time.Duration(i)*time.Second), i)
		if i%2 == 0 {
			r["Status"] = "Invalid Password"
		}
		rows = append(rows, r)
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 6)
	res := e.run(t, soql.Options{Objects: []soql.Object{{Name: "LoginHistory", Where: "Status = 'Success'"}}}, nil, 0)
	noErrors(t, res)
	if n := len(res.entries()); n != 10 {
		t.Fatalf("delivered %d rows, want the 10 successes", n)
	}
	for _, rec := range res.entries() {
		if s := lineField(t, rec, "Status"); s != "Success" {
			t.Fatalf("row with Status %q delivered", s)
		}
	}
}

// TestLineValuesAsSent: text values reach the line as Salesforce sent them, whether the page
// held them as they are (written without a second look), escaped, or not ASCII.
func TestLineValuesAsSent(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	values := []string{"Chrome 120", `say "hi"`, `back\slash`, "été 😀", "tab\there\nnewline", "<b>&amp;</b>", "", "\u2028 \x7f"}
	var rows []simsf.Record
	for i, v := range values {
		r := loginRow(epoch.Add(-30*time.Minute+time.Duration(i)*time.Second), i)
		r["Browser"] = v
		rows = append(rows, r)
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 9)
	sh, err := shape.New(shape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := e.run(t, soql.Options{Objects: []soql.Object{{Name: "LoginHistory"}}, Shaper: sh}, nil, 0)
	noErrors(t, res)
	got := map[string]bool{}
	for _, rec := range res.records {
		got[lineField(t, rec, "Browser")] = true
		if ip := lineField(t, rec, "SourceIp"); !strings.HasPrefix(ip, "10.0.0.") {
			t.Fatalf("SourceIp %q", ip)
		}
	}
	for _, v := range values {
		if !got[v] {
			t.Fatalf("no line with Browser %q (lines have %q)", v, slices.Sorted(maps.Keys(got)))
		}
	}
	if len(res.records) != len(values) {
		t.Fatalf("%d records, want %d", len(res.records), len(values))
	}
}

// TestMaxRecordsPerRunWaits: an object stopped at its MaxRecordsPerRun ends with
// source.ErrWaiting, saying so (the run is not caught up: more rows may follow), not io.EOF;
// the next runs go on after the last row shipped, and the run that finds fewer rows than the cap
// ends at io.EOF. Every row ships once.
func TestMaxRecordsPerRunWaits(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 25 {
		rows = append(rows, loginRow(epoch.Add(-30*time.Minute+time.Duration(i)*time.Second), i))
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 6)
	opts := soql.Options{Objects: []soql.Object{{Name: "LoginHistory", MaxRecordsPerRun: 10}}}
	key := soql.Key("LoginHistory")
	cursors := map[string]json.RawMessage{}
	seen := map[string]int{}
	for i, want := range []int{10, 10, 5} {
		res := e.run(t, opts, cursors, 0)
		if n := len(res.entries()); n != want {
			t.Fatalf("run %d: %d rows, want %d", i+1, n, want)
		}
		for _, rec := range res.entries() {
			seen[lineField(t, rec, "Id")]++
		}
		err := res.errs[key]
		switch {
		case want == 10 && (!errors.Is(err, source.ErrWaiting) || !strings.Contains(err.Error(), "max_records_per_run")):
			t.Fatalf("run %d stopped at the cap with %v; want source.ErrWaiting naming max_records_per_run", i+1, err)
		case want < 10 && err != nil:
			t.Fatalf("run %d: %v; want the object caught up", i+1, err)
		}
		cursors = res.cursors
	}
	if len(seen) != 25 {
		t.Fatalf("%d distinct rows shipped, want 25", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %s shipped %d times", id, n)
		}
	}
}

// TestFieldHiddenWhileTheClientLives: a warm Lambda keeps its Salesforce client, and with it
// the describes, across invocations. When an admin takes a field away from the integration
// user (field-level security) between two runs, the next run's query naming the field answers
// INVALID_FIELD; the object is described again, the query goes on without the field, and no
// row is lost. A field named in fields that the user cannot see is an error that says so.
func TestFieldHiddenWhileTheClientLives(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	client := e.client(t)
	opts := soql.Options{Client: client, Objects: []soql.Object{{Name: "LoginHistory"}}}
	var rows []simsf.Record
	for i := range 10 {
		rows = append(rows, loginRow(epoch.Add(-30*time.Minute+time.Duration(i)*time.Second), i))
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 3)
	res := e.run(t, opts, nil, 0)
	noErrors(t, res)
	if n := len(res.entries()); n != 10 || lineField(t, res.entries()[0], "SourceIp") == "" {
		t.Fatalf("first run: %d rows, want 10 with SourceIp", n)
	}

	perms := simsf.AllPermissions()
	perms.HiddenFields = []string{"LoginHistory.SourceIp"}
	if err := e.org.SetPermissions(sftest.User, perms); err != nil {
		t.Fatal(err)
	}
	rows = rows[:0]
	for i := range 5 {
		rows = append(rows, loginRow(epoch.Add(-10*time.Minute+time.Duration(i)*time.Second), 100+i))
	}
	insertShuffled(t, e.org.Org, "LoginHistory", rows, 4)
	res2 := e.run(t, opts, res.cursors, 0)
	noErrors(t, res2)
	if n := len(res2.entries()); n != 5 {
		t.Fatalf("second run: %d rows, want the 5 new ones", n)
	}
	if s := lineField(t, res2.entries()[0], "SourceIp"); s != "" {
		t.Fatalf("second run shipped the hidden SourceIp %q", s)
	}

	// A configured field the user cannot see: the error names it and the setting.
	opts.Objects[0].Fields = []string{"Status", "SourceIp"}
	res3 := e.run(t, opts, res2.cursors, 0)
	err := res3.errs[soql.Key("LoginHistory")]
	if err == nil || !strings.Contains(err.Error(), "SourceIp") || !strings.Contains(err.Error(), "fields") {
		t.Fatalf("configured hidden field: error %v, want one naming SourceIp and the fields setting", err)
	}
}
