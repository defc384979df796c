package salesforce

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func populatedEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e := newEnv(t, opts)
	if err := e.org.Populate(DataSet{HourlyFiles: 2, DailyFiles: 1, RowsPerFile: 10, LoginHistory: 50,
		SetupAuditTrail: 20, AuditEvents: 30, LoginEvents: 300, ApiEvents: 30, ApexLogs: 20, TieGroup: 220}); err != nil {
		t.Fatal(err)
	}
	e.login()
	return e
}

// TestQueryAcceptanceTable lists statements the org must accept or reject,
// with Salesforce's error codes.
func TestQueryAcceptanceTable(t *testing.T) {
	e := populatedEnv(t, Options{})
	cases := []struct {
		name    string
		q       string
		tooling bool
		status  int
		code    string
	}{
		// Accepted: the exact statement shapes sf2loki and the original emit.
		{"elf listing", "SELECT Id,EventType,Interval,LogDate,CreatedDate,LogFileLength,Sequence FROM EventLogFile WHERE EventType='Login' AND Interval='Hourly' AND CreatedDate >= 2026-06-29T00:00:00.000Z ORDER BY CreatedDate, Id LIMIT 1000", false, 200, ""},
		{"elf discovery", "SELECT EventType FROM EventLogFile WHERE Interval='Hourly' GROUP BY EventType", false, 200, ""},
		{"elf discovery with count", "SELECT EventType, COUNT(Id) n FROM EventLogFile WHERE Interval = 'Daily' GROUP BY EventType ORDER BY EventType", false, 200, ""},
		{"fields all with limit", "SELECT FIELDS(ALL) FROM LoginHistory LIMIT 200", false, 200, ""},
		{"fields standard unbounded", "SELECT FIELDS(STANDARD) FROM LoginHistory", false, 200, ""},
		{"fields custom with limit", "SELECT FIELDS(CUSTOM) FROM Audit_Event__c LIMIT 10", false, 200, ""},
		{"fields plus explicit custom", "SELECT Event_Time__c, FIELDS(STANDARD) FROM Audit_Event__c", false, 200, ""},
		{"keyset cursor", "SELECT Id, LoginTime FROM LoginHistory WHERE (LoginTime > 2026-06-30T00:00:00Z OR (LoginTime = 2026-06-30T00:00:00Z AND Id > '0Ya000000000001')) ORDER BY LoginTime ASC, Id ASC LIMIT 200", false, 200, ""},
		{"offset literal", "SELECT Id FROM LoginHistory WHERE LoginTime >= 2026-06-30T00:00:00+02:00", false, 200, ""},
		{"fractional offset literal", "SELECT Id FROM LoginHistory WHERE LoginTime >= 2026-06-30T00:00:00.123-05:30", false, 200, ""},
		{"in and not in", "SELECT Id FROM LoginHistory WHERE Status IN ('Success','Invalid Password') AND Status NOT IN ('X')", false, 200, ""},
		{"apexlog listing", "SELECT Id, LogUserId, LogLength, Operation, Request, Status, StartTime, Application, DurationMilliseconds, Location FROM ApexLog WHERE (StartTime > 2026-06-29T00:00:00.000Z OR (StartTime = 2026-06-29T00:00:00.000Z AND Id > '07L000000000001')) AND LogUser.Username IN ('alice@acme.example.com','bob@acme.example.com') ORDER BY StartTime ASC, Id ASC LIMIT 200", true, 200, ""},
		{"apexlog on data api", "SELECT Id FROM ApexLog LIMIT 5", false, 200, ""},
		{"trace flags", "SELECT Id FROM TraceFlag WHERE ExpirationDate > 2026-06-30T12:00:00.000Z LIMIT 200", true, 200, ""},
		{"big object drain", "SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate >= 2026-06-29T00:00:00.000Z AND EventDate <= 2026-06-30T00:00:00.000Z ORDER BY EventDate DESC LIMIT 200", false, 200, ""},
		{"big object tie pager", "SELECT Id, EventIdentifier FROM LoginEvent WHERE EventDate = 2026-06-30T04:00:00.000Z AND EventIdentifier > 'a' ORDER BY EventDate DESC LIMIT 200", false, 200, ""},
		{"eventstore is standard", "SELECT Id FROM ApiAnomalyEventStore WHERE EventDate > 2026-06-29T00:00:00Z ORDER BY EventDate ASC, Id ASC", false, 200, ""},
		{"lower case and date keyword", "select id from loginhistory where logintime > yesterday limit 5", false, 200, ""},
		{"last n days", "SELECT Id FROM LoginHistory WHERE LoginTime = LAST_N_DAYS:7", false, 200, ""},
		{"count()", "SELECT COUNT() FROM LoginHistory WHERE Status = 'Success'", false, 200, ""},
		{"like", "SELECT Name FROM Audit_Event__c WHERE Name LIKE 'AE-%'", false, 200, ""},
		{"number and boolean", "SELECT Id FROM Audit_Event__c WHERE Severity__c >= 5 AND Success__c = true", false, 200, ""},
		{"null comparisons", "SELECT Id FROM LoginHistory WHERE UserId != null AND AuthMethodReference = null", false, 200, ""},
		{"escaped string", `SELECT Id FROM User WHERE Username = 'o\'brien\\x'`, false, 200, ""},
		{"order nulls offset", "SELECT Id FROM LoginHistory ORDER BY LoginTime DESC NULLS LAST LIMIT 5 OFFSET 5", false, 200, ""},
		{"not", "SELECT Id FROM LoginHistory WHERE NOT Status = 'Success'", false, 200, ""},
		{"relationship", "SELECT CreatedBy.Username, Action FROM SetupAuditTrail ORDER BY CreatedDate LIMIT 10", false, 200, ""},
		{"15-char id", "SELECT Id FROM LoginHistory WHERE Id = '0Ya000000000001'", false, 200, ""},
		{"object-qualified field", "SELECT LoginHistory.Id FROM LoginHistory LIMIT 1", false, 200, ""},
		{"min max", "SELECT MIN(LoginTime), MAX(LoginTime) FROM LoginHistory", false, 200, ""},

		// Rejected.
		{"+0000 literal", "SELECT Id FROM LoginHistory WHERE LoginTime > 2026-06-30T00:00:00.000+0000", false, 400, CodeMalformedQuery},
		{"datetime without zone", "SELECT Id FROM LoginHistory WHERE LoginTime > 2026-06-30T00:00:00", false, 400, CodeMalformedQuery},
		{"impossible date", "SELECT Id FROM LoginHistory WHERE LoginTime > 2026-13-01T00:00:00Z", false, 400, CodeMalformedQuery},
		{"unbalanced quote", "SELECT Id FROM LoginHistory WHERE Status = 'Success", false, 400, CodeMalformedQuery},
		{"bad escape", `SELECT Id FROM LoginHistory WHERE Status = 'a\qb'`, false, 400, CodeMalformedQuery},
		{"fields all without limit", "SELECT FIELDS(ALL) FROM LoginHistory", false, 400, CodeMalformedQuery},
		{"fields all limit 201", "SELECT FIELDS(ALL) FROM LoginHistory LIMIT 201", false, 400, CodeMalformedQuery},
		{"fields custom limit 1000", "SELECT FIELDS(CUSTOM) FROM Audit_Event__c LIMIT 1000", false, 400, CodeMalformedQuery},
		{"fields all on big object without limit", "SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate > 2026-06-29T00:00:00Z ORDER BY EventDate DESC", false, 400, CodeMalformedQuery},
		{"duplicate via fields", "SELECT Id, FIELDS(ALL) FROM LoginHistory LIMIT 200", false, 400, CodeInvalidField},
		{"duplicate explicit", "SELECT Id, id FROM LoginHistory", false, 400, CodeInvalidField},
		{"unknown field", "SELECT Bogus FROM LoginHistory", false, 400, CodeInvalidField},
		{"unknown object", "SELECT Id FROM Bogus__c", false, 400, CodeInvalidType},
		{"tooling-only object on data api", "SELECT Id FROM TraceFlag", false, 400, CodeInvalidType},
		{"data object on tooling api", "SELECT Id FROM LoginHistory", true, 400, CodeInvalidType},
		{"streaming channel", "SELECT Id FROM LoginEventStream", false, 400, CodeInvalidType},
		{"quoted datetime", "SELECT Id FROM LoginHistory WHERE LoginTime > '2026-06-30T00:00:00Z'", false, 400, CodeInvalidField},
		{"date literal on datetime", "SELECT Id FROM LoginHistory WHERE LoginTime > 2026-06-30", false, 400, CodeInvalidField},
		{"unquoted string", "SELECT Id FROM LoginHistory WHERE Status = Success", false, 400, CodeMalformedQuery},
		{"quoted number", "SELECT Id FROM Audit_Event__c WHERE Severity__c = '5'", false, 400, CodeInvalidField},
		{"number for string", "SELECT Id FROM LoginHistory WHERE Status = 5", false, 400, CodeInvalidField},
		{"bad id literal", "SELECT Id FROM LoginHistory WHERE Id = 'abc'", false, 400, CodeInvalidQueryFilter},
		{"bad id in list", "SELECT Id FROM LoginEvent WHERE Id NOT IN ('0Yc000000000001', 'x''y')", false, 400, CodeMalformedQuery},
		{"and or without parentheses", "SELECT Id FROM LoginHistory WHERE Status = 'a' AND Status = 'b' OR Status = 'c'", false, 400, CodeMalformedQuery},
		{"dangling order by", "SELECT Id FROM LoginHistory ORDER BY", false, 400, CodeMalformedQuery},
		{"missing from", "SELECT Id LoginHistory", false, 400, CodeMalformedQuery},
		{"empty select", "SELECT FROM LoginHistory", false, 400, CodeMalformedQuery},
		{"negative limit", "SELECT Id FROM LoginHistory LIMIT -1", false, 400, CodeMalformedQuery},
		{"not a statement", "DELETE FROM LoginHistory", false, 400, CodeMalformedQuery},
		{"bind variable", "SELECT Id FROM LoginHistory WHERE LoginTime > :since", false, 400, CodeMalformedQuery},
		{"trailing garbage", "SELECT Id FROM LoginHistory LIMIT 5 5", false, 400, CodeMalformedQuery},
		{"long text filter", "SELECT Id FROM Audit_Event__c WHERE Details__c = 'x'", false, 400, CodeInvalidField},
		{"long text order", "SELECT Id FROM Audit_Event__c ORDER BY Details__c", false, 400, CodeInvalidField},
		{"ungrouped field", "SELECT Id, COUNT(Id) FROM LoginHistory GROUP BY Status", false, 400, CodeMalformedQuery},
		{"datetime not groupable", "SELECT LoginTime FROM LoginHistory GROUP BY LoginTime", false, 400, CodeInvalidField},
		{"offset too large", "SELECT Id FROM LoginHistory LIMIT 10 OFFSET 2001", false, 400, CodeNumberOutsideRange},
		{"unknown relationship", "SELECT Foo.Username FROM ApexLog", true, 400, CodeInvalidField},
		{"unknown field through relationship", "SELECT LogUser.Bogus FROM ApexLog", true, 400, CodeInvalidField},
		{"like on number", "SELECT Id FROM Audit_Event__c WHERE Severity__c LIKE '5%'", false, 400, CodeInvalidField},
		{"range on boolean", "SELECT Id FROM Audit_Event__c WHERE Success__c > true", false, 400, CodeInvalidField},
		{"unknown function", "SELECT SUMX(Severity__c) FROM Audit_Event__c", false, 400, CodeMalformedQuery},
		{"empty query", "   ", false, 400, CodeMalformedQuery},
		{"big object asc", "SELECT Id FROM LoginEvent WHERE EventDate > 2026-06-29T00:00:00Z ORDER BY EventDate ASC LIMIT 10", false, 400, CodeBigObjectUnsupported},
		{"big object implicit asc", "SELECT Id FROM LoginEvent ORDER BY EventDate LIMIT 10", false, 400, CodeBigObjectUnsupported},
		{"big object count", "SELECT COUNT() FROM LoginEvent", false, 400, CodeBigObjectUnsupported},
		{"big object group by", "SELECT Username, COUNT(Id) FROM LoginEvent GROUP BY Username", false, 400, CodeBigObjectUnsupported},
		{"big object non-index filter", "SELECT Id FROM LoginEvent WHERE Username = 'x'", false, 400, CodeBigObjectUnsupported},
		{"big object not in", "SELECT Id FROM LoginEvent WHERE EventDate = 2026-06-30T04:00:00Z AND Id NOT IN ('0Yc000000000001')", false, 400, CodeBigObjectUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := ver + "/query?q=" + url.QueryEscape(tc.q)
			if tc.tooling {
				path = ver + "/tooling/query?q=" + url.QueryEscape(tc.q)
			}
			status, _, code := e.queryPath(path)
			if status != tc.status || code != tc.code {
				_, body := e.get(path)
				t.Fatalf("%s\n got %d %q, want %d %q: %s", tc.q, status, code, tc.status, tc.code, body)
			}
		})
	}
}

func TestMalformedQueryMessageIsPositioned(t *testing.T) {
	e := populatedEnv(t, Options{})
	_, b := e.get(ver + "/query?q=" + url.QueryEscape("SELECT Id FROM LoginHistory WHERE LoginTime > 2026-06-30T00:00:00.000+0000"))
	for _, want := range []string{`"errorCode":"MALFORMED_QUERY"`, `ERROR at Row:1:Column:47`, `^`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("error body lacks %q: %s", want, b)
		}
	}
	_, b = e.get(ver + "/query?q=" + url.QueryEscape("SELECT FIELDS(ALL) FROM LoginHistory"))
	if !strings.Contains(string(b), "LIMIT of at most 200") {
		t.Errorf("FIELDS error does not name the limit: %s", b)
	}
	_, b = e.get(ver + "/query?q=" + url.QueryEscape("SELECT Id FROM Nope"))
	if !strings.Contains(string(b), "sObject type 'Nope' is not supported") {
		t.Errorf("INVALID_TYPE message: %s", b)
	}
}

// TestQuerySemantics checks results, not just acceptance.
func TestQuerySemantics(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	uid := e.org.mustUser(t, testUser)
	base := time.Date(2026, 6, 30, 10, 0, 0, 0, time.UTC)
	var recs []Record
	for i := 0; i < 10; i++ {
		recs = append(recs, Record{"Name": "AE-" + string(rune('a'+i)), "CreatedDate": base.Add(time.Duration(i/2) * time.Minute),
			"Severity__c": float64(i), "Success__c": i%2 == 0, "Action__c": []string{"Create", "Update", "Export"}[i%3],
			"OwnerId": uid, "Actor__c": map[bool]string{true: "Alice", false: "Bob"}[i < 5]})
	}
	recs[3]["Actor__c"] = nil
	ids := must[[]string](t)(e.org.Insert("Audit_Event__c", recs...))

	names := func(q string) []string {
		t.Helper()
		code, p, ec := e.query(q)
		if code != 200 {
			t.Fatalf("%s: %d %s", q, code, ec)
		}
		var out []string
		for _, r := range p.Records {
			out = append(out, r["Name"].(string))
		}
		return out
	}
	eq := func(got []string, want ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	eq(names("SELECT Name FROM Audit_Event__c WHERE Severity__c > 6"), "AE-h", "AE-i", "AE-j")
	eq(names("SELECT Name FROM Audit_Event__c WHERE Action__c = 'export' AND Success__c = true"), "AE-c", "AE-i")
	eq(names("SELECT Name FROM Audit_Event__c WHERE Action__c IN ('Update') OR Severity__c = 0"), "AE-a", "AE-b", "AE-e", "AE-h")
	eq(names("SELECT Name FROM Audit_Event__c WHERE Action__c NOT IN ('Create','Update')"), "AE-c", "AE-f", "AE-i")
	eq(names("SELECT Name FROM Audit_Event__c WHERE Actor__c = null"), "AE-d")
	eq(names("SELECT Name FROM Audit_Event__c WHERE Actor__c != 'alice' AND Severity__c < 6"), "AE-d", "AE-f")
	eq(names("SELECT Name FROM Audit_Event__c WHERE NOT (Severity__c >= 2)"), "AE-a", "AE-b")
	eq(names("SELECT Name FROM Audit_Event__c WHERE Name LIKE 'ae-_'  AND Severity__c <= 1"), "AE-a", "AE-b")
	eq(names("SELECT Name FROM Audit_Event__c ORDER BY CreatedDate DESC, Name ASC LIMIT 4"), "AE-i", "AE-j", "AE-g", "AE-h")
	eq(names("SELECT Name FROM Audit_Event__c ORDER BY Severity__c DESC LIMIT 2 OFFSET 1"), "AE-i", "AE-h")
	eq(names("SELECT Name FROM Audit_Event__c ORDER BY Actor__c NULLS LAST, Name LIMIT 2"), "AE-a", "AE-b")
	eq(names("SELECT Name FROM Audit_Event__c ORDER BY Actor__c, Name LIMIT 1"), "AE-d")
	// Keyset cursor: rows after (10:02:00, ids[4]).
	eq(names("SELECT Name FROM Audit_Event__c WHERE (CreatedDate > 2026-06-30T10:02:00Z OR (CreatedDate = 2026-06-30T10:02:00.000Z AND Id > '"+ids[4]+"')) ORDER BY CreatedDate, Id"),
		"AE-f", "AE-g", "AE-h", "AE-i", "AE-j")
	// Offsets in literals are honored.
	eq(names("SELECT Name FROM Audit_Event__c WHERE CreatedDate >= 2026-06-30T12:04:00+02:00"), "AE-i", "AE-j")
	// 15-character ids match 18-character ones.
	eq(names("SELECT Name FROM Audit_Event__c WHERE Id = '"+ids[2][:15]+"'"), "AE-c")

	// Relationship fields are nested objects.
	_, p, _ := e.query("SELECT Name, Owner.Username FROM Audit_Event__c WHERE Name = 'AE-a'")
	owner, _ := p.Records[0]["Owner"].(map[string]any)
	if owner["Username"] != testUser {
		t.Errorf("Owner.Username = %v", p.Records[0]["Owner"])
	}

	// Aggregates.
	_, p, _ = e.query("SELECT Action__c, COUNT(Id) cnt, MAX(Severity__c) FROM Audit_Event__c GROUP BY Action__c ORDER BY Action__c DESC")
	if len(p.Records) != 3 || p.Records[0]["Action__c"] != "Update" || p.Records[0]["cnt"] != float64(3) || p.Records[0]["expr0"] != 7.0 || p.Records[0]["expr1"] != nil {
		t.Errorf("aggregate rows: %v", p.Records)
	}
	if at := p.Records[0]["attributes"].(map[string]any)["type"]; at != "AggregateResult" {
		t.Errorf("aggregate attributes.type = %v", at)
	}
	code, p, _ := e.query("SELECT COUNT() FROM Audit_Event__c WHERE Success__c = false")
	if code != 200 || p.TotalSize != 5 || len(p.Records) != 0 {
		t.Errorf("COUNT(): %d %+v", code, p)
	}
}

func TestValueFormats(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "Login", Rows: 3,
		LogDate: time.Date(2026, 6, 29, 0, 0, 0, 0, time.UTC), CreatedDate: time.Date(2026, 6, 30, 1, 2, 3, 4e6, time.UTC)}))
	_, b := e.get(ver + "/query?q=" + url.QueryEscape("SELECT Id, CreatedDate, LogFileLength, Sequence, LogFile FROM EventLogFile"))
	s := string(b)
	for _, want := range []string{
		`"CreatedDate":"2026-06-30T01:02:03.004+0000"`, // no colon in the offset
		`"Sequence":0`,
		`"LogFile":"/services/data/v62.0/sobjects/EventLogFile/` + id + `/LogFile"`,
		`"attributes":{"type":"EventLogFile","url":"/services/data/v62.0/sobjects/EventLogFile/` + id + `"}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("response lacks %s: %s", want, s)
		}
	}
	if !strings.Contains(s, `.0,"Sequence"`) {
		t.Errorf("LogFileLength is not serialized as a double (N.0): %s", s)
	}
	for v, want := range map[float64]string{12899: "12899.0", 1073741824: "1.073741824E9", 0: "0.0", 1.5: "1.5", 0.0001: "1.0E-4", 1e7: "1.0E7"} {
		if got := javaDouble(v); got != want {
			t.Errorf("javaDouble(%v) = %s, want %s", v, got, want)
		}
	}
}
