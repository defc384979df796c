package keyset

import (
	"strings"
	"testing"
	"time"
)

// TestPagerReadsProbeRowsInIdOrder follows the pager through a run whose first query finds
// probe rows: it abandons that query, reads the probe in Id order (continued after a full LIMIT
// from the last Id read), then sends the first query again with the probe arm after the last
// probe row, and from then on only keyset continuations.
func TestPagerReadsProbeRowsInIdOrder(t *testing.T) {
	start := Position{TS: time.Date(2026, 6, 30, 11, 55, 0, 0, time.UTC)}
	p := &Pager{Query: Query{Object: "ApexLog", Select: "Id, StartTime", TSField: "StartTime", Kind: ByID, Where: "LogUser.Username IN ('a@x')"},
		Start: start, StartIncl: true, ProbeMax: "07L000000000010AAA"}
	next := func(n int, want ...string) {
		t.Helper()
		q, err := p.Next(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(q, w) {
				t.Fatalf("query %q lacks %q", q, w)
			}
		}
	}
	row := func(ts time.Time, id string, want bool) {
		t.Helper()
		got, err := p.Row(Position{TS: ts, Key: id})
		if err != nil || got != want {
			t.Fatalf("Row(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	old := start.TS.Add(-time.Hour)
	next(2, "(StartTime >= 2026-06-30T11:55:00.000Z OR (Id > '07L000000000010AAA' AND StartTime < 2026-06-30T11:55:00.000Z))",
		"ORDER BY StartTime ASC, Id ASC LIMIT 2", "(LogUser.Username IN ('a@x')) AND ")
	row(old.Add(time.Minute), "07L000000000012AAA", false) // a probe row first: abandon
	next(2, "WHERE (LogUser.Username IN ('a@x')) AND Id > '07L000000000010AAA' AND StartTime < 2026-06-30T11:55:00.000Z ORDER BY Id ASC LIMIT 2")
	row(old.Add(time.Minute), "07L000000000011AAA", true)
	row(old, "07L000000000012AAA", true)
	next(2, "Id > '07L000000000012AAA' AND", "ORDER BY Id ASC") // full LIMIT: continued after the last Id
	row(old, "07L000000000013AAA", true)
	if !p.Drained() {
		t.Fatal("after the probe, Drained reports no query to follow")
	}
	next(-1, "OR (Id > '07L000000000013AAA' AND StartTime <", "ORDER BY StartTime ASC, Id ASC")
	row(start.TS, "07L000000000020AAA", true)
	next(-1, "(StartTime > 2026-06-30T11:55:00.000Z OR (StartTime = 2026-06-30T11:55:00.000Z AND Id > '07L000000000020AAA'))")
	row(start.TS.Add(time.Second), "07L000000000009AAA", true)
	if p.Drained() {
		t.Fatal("the main query drained, and Drained reports another query")
	}
	if _, err := p.Row(Position{TS: start.TS.Add(time.Second), Key: "07L000000000009AAA"}); err == nil {
		t.Fatal("a row returned again after itself was accepted")
	}
}
