package soql_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source/soql"
)

func loginEvent(ts time.Time, i int) simsf.Record {
	return simsf.Record{"EventDate": ts, "Username": fmt.Sprintf("user%d@example.com", i%7), "SourceIp": fmt.Sprintf("10.1.%d.%d", i/250, i%250), "Status": "Success"}
}

// pullAll runs until a run produces nothing and returns the EventIdentifiers delivered, in
// order, with their EventDate, and the number of runs.
func pullAll(t *testing.T, e *env, opts soql.Options, budget int) (order [][2]string, runs int, events map[string]int64) {
	t.Helper()
	cursors := map[string]json.RawMessage{}
	events = map[string]int64{}
	for ; runs < 100; runs++ {
		res := e.run(t, opts, cursors, budget)
		noErrors(t, res)
		for k, v := range res.events {
			events[k] += v
		}
		if len(res.records) == 0 {
			return order, runs, events
		}
		if budget > 0 && len(res.entries()) > budget {
			t.Fatalf("run %d delivered %d records, budget %d", runs, len(res.entries()), budget)
		}
		for _, rec := range res.entries() {
			// Like a real org, the simulated one gives every Big Object row the empty Id: the
			// source keys rows on EventIdentifier and never relies on Id.
			if id := lineField(t, rec, "Id"); id != simsf.EmptyID {
				t.Fatalf("Big Object row with Id %q, want %s: %s", id, simsf.EmptyID, rec.Entry.Line)
			}
			order = append(order, [2]string{lineField(t, rec, "EventDate"), lineField(t, rec, "EventIdentifier")})
		}
		cursors = res.cursors
		e.clock.Advance(5 * time.Second)
	}
	t.Fatalf("not caught up after %d runs", runs)
	return nil, runs, nil
}

// exactlyOnceInOrder checks that order holds every identifier of want once, ascending by
// (EventDate, EventIdentifier).
func exactlyOnceInOrder(t *testing.T, order [][2]string, want map[string]bool) {
	t.Helper()
	got := map[string]int{}
	for i, o := range order {
		got[o[1]]++
		if i > 0 {
			a, b := order[i-1], o
			if a[0] > b[0] || a[0] == b[0] && strings.ToLower(a[1]) >= strings.ToLower(b[1]) {
				t.Fatalf("delivery %d %v is not after %v", i, b, a)
			}
		}
	}
	for id := range want {
		if got[id] != 1 {
			t.Fatalf("row %s delivered %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d distinct rows delivered, want %d", len(got), len(want))
	}
}

func eventIDs(t *testing.T, org *simsf.Org, ids []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range ids {
		r, err := org.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		out[r["EventIdentifier"].(string)] = true
	}
	return out
}

// TestBigObjectTieGroup is the acceptance test: a Big Object with 1 200 rows sharing one
// EventDate, pulled 500 records per run, in strict and permissive mode: every row delivered
// once, oldest first, and no query refused.
func TestBigObjectTieGroup(t *testing.T) {
	modes := []struct {
		name string
		mode simsf.BigObjectMode
	}{{"strict", simsf.BigObjectStrict}, {"permissive", simsf.BigObjectPermissive}}
	windows := []struct {
		name    string
		overlap time.Duration
	}{{"overlap", 0}, {"no overlap", -1}}
	for _, m := range modes {
		for _, w := range windows {
			t.Run(m.name+"/"+w.name, func(t *testing.T) {
				e := newEnv(t, simsf.Options{BigObjectMode: m.mode})
				tie := epoch.Add(-20 * time.Minute)
				var rows []simsf.Record
				for i := range 150 {
					rows = append(rows, loginEvent(epoch.Add(-40*time.Minute+time.Duration(i)*time.Second), i))
				}
				for i := range 1200 {
					rows = append(rows, loginEvent(tie, 150+i))
				}
				for i := range 150 {
					rows = append(rows, loginEvent(epoch.Add(-19*time.Minute+time.Duration(i)*time.Second), 1350+i))
				}
				ids := insertShuffled(t, e.org.Org, "LoginEvent", rows, 7)
				opts := soql.Options{Objects: []soql.Object{{Name: "LoginEvent", BigObject: true, Overlap: w.overlap}}}
				order, runs, events := pullAll(t, e, opts, 500)
				exactlyOnceInOrder(t, order, eventIDs(t, e.org.Org, ids))
				// 1 200 rows in the window exceed max_overlap_ids (500): the window shrinks.
				if shrunk := events[soql.EventOverlapShrunk] > 0; shrunk != (w.overlap >= 0) {
					t.Fatalf("events %v: overlap_shrunk counted %v, want %v", events, shrunk, w.overlap >= 0)
				}
				t.Logf("%d runs, %d queries", runs, e.org.CallCount(simsf.KindQuery))
			})
		}
	}
}

// TestBigObjectCatchUp: a backlog much larger than the buffer is walked in windows sized to the
// buffer, oldest first, with several tie groups and no row twice.
func TestBigObjectCatchUp(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 3000 {
		ts := epoch.Add(-55*time.Minute + time.Duration(i)*time.Second)
		if i%1000 < 250 {
			ts = epoch.Add(-55*time.Minute + time.Duration(i/1000)*15*time.Minute)
		}
		rows = append(rows, loginEvent(ts, i))
	}
	ids := insertShuffled(t, e.org.Org, "LoginEvent", rows, 8)
	opts := soql.Options{Objects: []soql.Object{{Name: "LoginEvent", BigObject: true, BufferRows: 1000}}}
	order, runs, _ := pullAll(t, e, opts, 1000)
	exactlyOnceInOrder(t, order, eventIDs(t, e.org.Org, ids))
	q := e.org.CallCount(simsf.KindQuery)
	t.Logf("%d runs, %d queries for 3000 rows", runs, q)
	if q > 3000/200*3 {
		t.Fatalf("%d queries for 3000 rows: the windows are not sized to the data", q)
	}
}

// TestBigObjectLateRow: a Big Object row persisted late (visible after the position passed its
// EventDate) is delivered by the overlap window once it shows up.
func TestBigObjectLateRow(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 50 {
		rows = append(rows, loginEvent(epoch.Add(-20*time.Minute+time.Duration(i)*20*time.Second), i))
	}
	ids := insertShuffled(t, e.org.Org, "LoginEvent", rows, 9)
	late, err := e.org.Insert("LoginEvent", loginEvent(epoch.Add(-5*time.Minute), 99))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.org.SetVisibleAfter(late[0], epoch.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	opts := soql.Options{Objects: []soql.Object{{Name: "LoginEvent", BigObject: true}}}
	first := e.run(t, opts, nil, 0)
	noErrors(t, first)
	if len(first.entries()) != len(ids) {
		t.Fatalf("first run delivered %d rows, want %d", len(first.entries()), len(ids))
	}
	e.clock.Advance(2 * time.Minute)
	second := e.run(t, opts, first.cursors, 0)
	noErrors(t, second)
	want := eventIDs(t, e.org.Org, late)
	if len(second.entries()) != 1 || !want[lineField(t, second.entries()[0], "EventIdentifier")] {
		t.Fatalf("second run delivered %d rows, want only the late one", len(second.entries()))
	}
	if second.events[soql.EventLateRecovered] != 1 {
		t.Fatalf("events %v, want one late_rows_recovered", second.events)
	}
	third := e.run(t, opts, second.cursors, 0)
	noErrors(t, third)
	if len(third.records) != 0 {
		t.Fatalf("third run delivered %d records, want none", len(third.records))
	}
	if q := third.calls[string(salesforce.KindQuery)]; q > 2 {
		t.Fatalf("a run with nothing new cost %d queries", q)
	}
}

// TestBigObjectAPICallsPer10000 measures a Big Object's query calls for 10 000 rows in one run:
// at least one per 200 rows (the Big Object page), plus the windows' boundaries.
func TestBigObjectAPICallsPer10000(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	var rows []simsf.Record
	for i := range 10_000 {
		rows = append(rows, loginEvent(epoch.Add(-55*time.Minute+time.Duration(i)*300*time.Millisecond), i))
	}
	insertShuffled(t, e.org.Org, "LoginEvent", rows, 10)
	res := e.run(t, soql.Options{Objects: []soql.Object{{Name: "LoginEvent", BigObject: true}}}, nil, 0)
	noErrors(t, res)
	if n := len(res.entries()); n != 10_000 {
		t.Fatalf("delivered %d rows, want 10000", n)
	}
	q, d := res.calls[string(salesforce.KindQuery)], res.calls[string(salesforce.KindDescribe)]
	t.Logf("10000 Big Object rows: %d query calls, %d describe calls; all calls %v", q, d, res.calls)
	if q > 10_000/200*5/4 || d != 1 {
		t.Fatalf("10000 rows cost %d query calls and %d describes; want at most 62 and 1", q, d)
	}
}
