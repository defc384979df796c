package soql

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCheckWhere(t *testing.T) {
	tests := []struct {
		where string
		ok    bool
	}{
		{"Status = 'Success'", true},
		{"(Status = 'Success' OR LoginType = 'SAML') AND SourceIp != null", true},
		{`Display LIKE '%order by%' AND Section = 'it\'s'`, true},
		{"CreatedBy.Username IN ('a@x.com','b@x.com')", true},
		{"", false},
		{"Status = 'open", false},
		{"(Status = 'x'", false},
		{"Status = 'x')", false},
		{"Status = 'x') OR (Id != null", false},
		{"Status = 'x' ORDER BY Name", false},
		{"Status = 'x' LIMIT 1", false},
		{"Id IN (SELECT Id FROM User)", false},
		{"Status = 'x'; DELETE", false},
	}
	for _, tc := range tests {
		err := CheckWhere(tc.where)
		if (err == nil) != tc.ok {
			t.Errorf("CheckWhere(%q) = %v, want ok=%v", tc.where, err, tc.ok)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	ts := time.Date(2026, 6, 30, 11, 0, 0, 123e6, time.UTC)
	w := newWindow(nil)
	for i := range 5 {
		w.add(byID.hash48(fmt.Sprintf("0Ya00000000000%d", i)), position{ts: ts, key: fmt.Sprintf("0Ya00000000000%d", i)})
	}
	from := position{ts: ts.Add(-time.Minute)}
	raw := encodeCursor("LoginTime", byID, position{ts: ts, key: "0Ya000000000004AAA"}, &from, w, "0Ya000000000009AAA")
	st, ok, err := decodeCursor(raw, "LoginTime", byID)
	if err != nil || !ok {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if !st.pos.ts.Equal(ts) || st.pos.key != "0Ya000000000004AAA" || st.from == nil || !st.from.ts.Equal(from.ts) ||
		st.maxID != "0Ya000000000009AAA" || len(st.seen) != 5 {
		t.Fatalf("decoded %+v from %s", st, raw)
	}
	for i, h := range st.seen {
		if h != w.list[i].h {
			t.Fatalf("seen[%d] = %x, want %x", i, h, w.list[i].h)
		}
	}
	// The same cursor read for a Big Object (another key) is refused.
	if _, _, err := decodeCursor(raw, "EventDate", byEventIdentifier); err == nil {
		t.Fatal("a LoginTime/Id cursor was accepted for EventDate/EventIdentifier")
	}
}

func TestLongFieldListFallsBackToFieldsAll(t *testing.T) {
	var fields []string
	for i := range 1500 {
		fields = append(fields, fmt.Sprintf("Custom_Field_%04d__c", i))
	}
	q := &querier{object: "Audit__c", tsField: "CreatedDate", selectList: strings.Join(fields, ", ")}
	k := &keysetReader{q: q, start: position{ts: time.Now()}, startIncl: true}
	if !k.tooLong() {
		t.Fatal("a 1500-field query was not found too long for a URL")
	}
	q.selectList = "Id, CreatedDate, Name"
	if k.tooLong() {
		t.Fatal("a 3-field query was found too long")
	}
}

// BenchmarkCursor measures the per-row cost of the cursor with a full overlap window.
func BenchmarkCursor(b *testing.B) {
	ts := time.Date(2026, 6, 30, 11, 0, 0, 0, time.UTC)
	w := newWindow(nil)
	for i := range DefaultMaxOverlapIDs {
		id := fmt.Sprintf("0Ya%012d", i)
		w.add(byID.hash48(id), position{ts: ts.Add(time.Duration(i) * time.Millisecond), key: id})
	}
	from := position{ts: ts}
	pos := position{ts: ts.Add(time.Second), key: "0Ya000000000999AAA"}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		raw := encodeCursor("LoginTime", byID, pos, &from, w, pos.key)
		n = len(raw)
	}
	b.ReportMetric(float64(n), "bytes/cursor")
	_ = json.Valid
}
