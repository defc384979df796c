package salesforce

import (
	"testing"
	"time"
)

func bigEnv(t *testing.T, opts Options) (*env, time.Time) {
	t.Helper()
	e := newEnv(t, opts)
	tie := epoch.Add(-time.Hour)
	var recs []Record
	for i := 0; i < 300; i++ { // 300 rows at one EventDate
		recs = append(recs, Record{"EventDate": tie, "Username": "a@example.com"})
	}
	for i := 0; i < 100; i++ {
		recs = append(recs, Record{"EventDate": tie.Add(time.Duration(i+1) * time.Second), "Username": "b@example.com"})
	}
	must[[]string](t)(e.org.Insert("LoginEvent", recs...))
	e.login()
	return e, tie
}

func TestBigObjectRules(t *testing.T) {
	type tc struct {
		q                  string
		strict, permissive string // expected error code ("" = accepted)
	}
	const ok = ""
	cases := []tc{
		{"SELECT Id FROM LoginEvent WHERE EventDate >= 2026-06-30T10:00:00Z ORDER BY EventDate DESC LIMIT 200", ok, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate >= 2026-06-30T10:00:00Z AND EventDate <= 2026-06-30T11:00:00Z ORDER BY EventDate DESC", ok, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate = 2026-06-30T11:00:00Z AND EventIdentifier > 'a'", ok, ok},
		{"SELECT Id FROM LoginEvent", ok, ok},
		{"SELECT Id FROM LoginEvent WHERE EventIdentifier = 'x'", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate > 2026-06-30T10:00:00Z AND EventIdentifier > 'a'", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate = 2026-06-30T11:00:00Z AND Id NOT IN ('0Yc000000000001')", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate != 2026-06-30T11:00:00Z", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE Username = 'a@example.com'", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate > 2026-06-30T10:00:00Z OR EventDate < 2026-06-29T10:00:00Z", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate > 2026-06-30T10:00:00Z ORDER BY EventDate DESC, Id", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent WHERE EventDate > 2026-06-30T10:00:00Z ORDER BY EventDate DESC, EventIdentifier ASC", CodeBigObjectUnsupported, ok},
		{"SELECT Id FROM LoginEvent ORDER BY EventDate ASC", CodeBigObjectUnsupported, CodeBigObjectUnsupported},
		{"SELECT Id FROM LoginEvent ORDER BY Username DESC", CodeBigObjectUnsupported, CodeBigObjectUnsupported},
		{"SELECT COUNT() FROM LoginEvent", CodeBigObjectUnsupported, CodeBigObjectUnsupported},
		{"SELECT Username, COUNT(Id) FROM LoginEvent GROUP BY Username", CodeBigObjectUnsupported, CodeBigObjectUnsupported},
		{"SELECT Id FROM LoginEvent LIMIT 10 OFFSET 10", CodeBigObjectUnsupported, CodeBigObjectUnsupported},
		{"SELECT FIELDS(ALL) FROM LoginEvent ORDER BY EventDate DESC", CodeMalformedQuery, CodeMalformedQuery},
	}
	for _, mode := range []BigObjectMode{BigObjectStrict, BigObjectPermissive} {
		e, _ := bigEnv(t, Options{BigObjectMode: mode})
		for _, c := range cases {
			want := c.strict
			if mode == BigObjectPermissive {
				want = c.permissive
			}
			status, _, code := e.query(c.q)
			if code != want || (want == ok) != (status == 200) {
				t.Errorf("mode %d: %s\n got %d %q, want %q", mode, c.q, status, code, want)
			}
		}
	}
}

func TestBigObjectPaging(t *testing.T) {
	e, tie := bigEnv(t, Options{})
	// A full page comes back done:true with no nextRecordsUrl, newest first.
	code, p, _ := e.query("SELECT Id, EventDate, EventIdentifier FROM LoginEvent WHERE EventDate >= 2026-06-30T00:00:00Z ORDER BY EventDate DESC LIMIT 2000")
	if code != 200 || len(p.Records) != 200 || !p.Done || p.NextRecordsURL != "" {
		t.Fatalf("page: %d n=%d done=%v next=%q", code, len(p.Records), p.Done, p.NextRecordsURL)
	}
	if p.Records[0]["EventDate"] != sfDateTime(tie.Add(100*time.Second)) {
		t.Errorf("first row %v is not the newest", p.Records[0]["EventDate"])
	}
	// As in real orgs, every row carries the empty id, and attributes.url is built from it.
	for _, r := range p.Records {
		if r["Id"] != EmptyID || r["attributes"].(map[string]any)["url"] != ver+"/sobjects/LoginEvent/"+EmptyID {
			t.Fatalf("big object row: Id %v, attributes %v", r["Id"], r["attributes"])
		}
	}
	// Within the tie, index order is EventIdentifier ascending, so the
	// documented pager EventDate = tie AND EventIdentifier > last drains it.
	lit := tie.Format("2006-01-02T15:04:05.000Z")
	seen := map[string]bool{}
	last := ""
	for pages := 0; pages < 5; pages++ {
		q := "SELECT Id, EventIdentifier FROM LoginEvent WHERE EventDate = " + lit
		if last != "" {
			q += " AND EventIdentifier > '" + last + "'"
		}
		_, p, ec := e.query(q + " ORDER BY EventDate DESC LIMIT 200")
		if ec != "" {
			t.Fatal(ec)
		}
		for _, r := range p.Records {
			ei := r["EventIdentifier"].(string)
			if seen[ei] || ei <= last {
				t.Fatalf("tie pager returned %s after %s", ei, last)
			}
			seen[ei] = true
			last = ei
		}
		if len(p.Records) < 200 {
			break
		}
	}
	if len(seen) != 300 {
		t.Fatalf("tie pager drained %d of 300 rows", len(seen))
	}
}

func TestBigObjectEmptyIDs(t *testing.T) {
	e, _ := bigEnv(t, Options{BigObjectEmptyIDs: true})
	_, p, _ := e.query("SELECT Id, EventIdentifier FROM LoginEvent ORDER BY EventDate DESC LIMIT 5")
	for _, r := range p.Records {
		if r["Id"] != emptyBigObjectID || r["EventIdentifier"] == "" {
			t.Fatalf("row %v", r)
		}
	}
}

func TestBigObjectNeedsRTEMPermission(t *testing.T) {
	e, _ := bigEnv(t, Options{})
	p := AllPermissions()
	p.ViewRealTimeEventMonitoring = false
	noErr(t, e.org.SetPermissions(testUser, p))
	if code, _, ec := e.query("SELECT Id FROM LoginEvent"); code != 400 || ec != CodeInvalidType {
		t.Errorf("without RTEM permission: %d %s", code, ec)
	}
}

func TestBigObjectRealIDs(t *testing.T) {
	e, _ := bigEnv(t, Options{BigObjectRealIDs: true})
	_, p, ec := e.query("SELECT Id, EventIdentifier FROM LoginEvent WHERE EventDate >= 2026-06-30T00:00:00Z ORDER BY EventDate DESC LIMIT 200")
	if ec != "" || len(p.Records) == 0 {
		t.Fatalf("query: %s, %d rows", ec, len(p.Records))
	}
	ids := map[any]bool{}
	for _, r := range p.Records {
		id, _ := r["Id"].(string)
		if id == EmptyID || r["attributes"].(map[string]any)["url"] != ver+"/sobjects/LoginEvent/"+id {
			t.Fatalf("row %v", r)
		}
		ids[id] = true
	}
	if len(ids) != len(p.Records) {
		t.Fatalf("%d distinct ids for %d rows", len(ids), len(p.Records))
	}
}
