package soql

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source/keyset"
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
	from := keyset.Position{TS: ts.Add(-time.Minute)}
	want := keyset.State{Pos: keyset.Position{TS: ts, Key: "0Ya000000000004AAA"}, From: &from,
		Seen: []uint64{1, 2, 3, 1 << 40, 1<<48 - 1}, MaxID: "0Ya000000000009AAA"}
	raw := cursorLayout("LoginTime", keyset.ByID).Encode(want)
	st, ok, err := decodeCursor(raw, "LoginTime", keyset.ByID)
	if err != nil || !ok {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if !st.Pos.TS.Equal(ts) || st.Pos.Key != want.Pos.Key || st.From == nil || !st.From.TS.Equal(from.TS) ||
		st.MaxID != want.MaxID || !slices.Equal(st.Seen, want.Seen) {
		t.Fatalf("decoded %+v from %s", st, raw)
	}
	// The same cursor read for a Big Object (another key) is refused.
	if _, _, err := decodeCursor(raw, "EventDate", keyset.ByEventIdentifier); err == nil {
		t.Fatal("a LoginTime/Id cursor was accepted for EventDate/EventIdentifier")
	}
}

func TestLongFieldListFallsBackToFieldsAll(t *testing.T) {
	var fields []string
	for i := range 1500 {
		fields = append(fields, fmt.Sprintf("Custom_Field_%04d__c", i))
	}
	q := keyset.Query{Object: "Audit__c", TSField: "CreatedDate", Select: strings.Join(fields, ", ")}
	k := &keysetReader{pager: keyset.Pager{Query: q, Start: keyset.Position{TS: time.Now()}, StartIncl: true}}
	if !k.tooLong() {
		t.Fatal("a 1500-field query was not found too long for a URL")
	}
	k.pager.Select = "Id, CreatedDate, Name"
	if k.tooLong() {
		t.Fatal("a 3-field query was found too long")
	}
}
