package salesforce

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func insertLoginHistory(t *testing.T, o *Org, n int) {
	t.Helper()
	uid := o.mustUser(t, testUser)
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{"UserId": uid, "LoginTime": epoch.Add(-time.Duration(n-i) * time.Second), "Status": "Success", "SourceIp": "10.0.0." + strconv.Itoa(i%250)}
	}
	must[[]string](t)(o.Insert("LoginHistory", recs...))
}

// drain follows nextRecordsUrl and returns every record and the page count.
func (e *env) drain(q string, hdr ...string) ([]map[string]any, int) {
	e.t.Helper()
	code, p, ec := e.query(q, hdr...)
	if code != 200 {
		e.t.Fatalf("%s: %d %s", q, code, ec)
	}
	recs, pages := p.Records, 1
	for !p.Done {
		code, p, ec = e.queryPath(p.NextRecordsURL, hdr...)
		if code != 200 {
			e.t.Fatalf("next page: %d %s", code, ec)
		}
		recs = append(recs, p.Records...)
		pages++
	}
	return recs, pages
}

var locatorRE = regexp.MustCompile(`^/services/data/v62\.0/query/01g[0-9A-Za-z]{15}-(\d+)$`)

func TestPaginationCostsOneCallPerPage(t *testing.T) {
	e := newEnv(t, Options{})
	insertLoginHistory(t, e.org, 10000)
	e.login()
	e.org.ResetCalls()
	code, first, _ := e.query("SELECT Id, LoginTime, Status FROM LoginHistory ORDER BY LoginTime, Id")
	if code != 200 || first.TotalSize != 10000 || len(first.Records) != 2000 || first.Done {
		t.Fatalf("first page: %d total=%d n=%d done=%v", code, first.TotalSize, len(first.Records), first.Done)
	}
	if m := locatorRE.FindStringSubmatch(first.NextRecordsURL); m == nil || m[1] != "2000" {
		t.Fatalf("nextRecordsUrl %q", first.NextRecordsURL)
	}
	recs, pages := e.drain("SELECT Id, LoginTime, Status FROM LoginHistory ORDER BY LoginTime, Id")
	if len(recs) != 10000 || pages != 5 {
		t.Fatalf("drained %d records in %d pages", len(recs), pages)
	}
	seen := map[string]bool{}
	prev := ""
	for _, r := range recs {
		id := r["Id"].(string)
		if seen[id] || id <= prev {
			t.Fatalf("duplicate or out-of-order id %s after %s", id, prev)
		}
		seen[id], prev = true, id
	}
	if got := e.org.Calls(); got[KindQuery] != 2 || got[KindQueryMore] != 4 {
		t.Errorf("calls %v, want 2 query (one probe) + 4 query_more", got)
	}
	// FIELDS(ALL) is capped at 200 rows per query.
	if code, _, ec := e.query("SELECT FIELDS(ALL) FROM LoginHistory LIMIT 2000"); code != 400 || ec != CodeMalformedQuery {
		t.Errorf("FIELDS(ALL) LIMIT 2000: %d %s", code, ec)
	}
	_, p, _ := e.query("SELECT FIELDS(ALL) FROM LoginHistory LIMIT 200")
	if len(p.Records) != 200 || !p.Done {
		t.Errorf("FIELDS(ALL) LIMIT 200: %d records done=%v", len(p.Records), p.Done)
	}
}

func TestBatchSizeHeader(t *testing.T) {
	e := newEnv(t, Options{})
	insertLoginHistory(t, e.org, 1000)
	e.login()
	for _, tc := range []struct {
		hdr   string
		pages int
	}{
		{"batchSize=500", 2}, {"batchSize=200", 5}, {"batchSize=100", 5}, {"batchSize=5000", 1}, {"", 1}, {"batchSize=abc", 1},
	} {
		_, pages := e.drain("SELECT Id FROM LoginHistory", "Sforce-Query-Options", tc.hdr)
		if pages != tc.pages {
			t.Errorf("%q: %d pages, want %d", tc.hdr, pages, tc.pages)
		}
	}
	// LIMIT below the batch size: one page, done; above it: pages.
	_, p, _ := e.query("SELECT Id FROM LoginHistory LIMIT 150", "Sforce-Query-Options", "batchSize=200")
	if !p.Done || len(p.Records) != 150 || p.TotalSize != 150 {
		t.Errorf("LIMIT 150 batch 200: done=%v n=%d total=%d", p.Done, len(p.Records), p.TotalSize)
	}
	recs, pages := e.drain("SELECT Id FROM LoginHistory LIMIT 300", "Sforce-Query-Options", "batchSize=200")
	if len(recs) != 300 || pages != 2 {
		t.Errorf("LIMIT 300 batch 200: %d records in %d pages", len(recs), pages)
	}
}

func TestLocators(t *testing.T) {
	e := newEnv(t, Options{MaxOpenLocators: 2})
	insertLoginHistory(t, e.org, 500)
	e.org.AddUser("other@example.com", AllPermissions())
	key, _ := keys(t)
	noErr(t, e.org.AddJWTApp("other-app", &key.PublicKey, "other@example.com"))
	e.login()
	open := func() string {
		_, p, _ := e.query("SELECT Id FROM LoginHistory", "Sforce-Query-Options", "batchSize=200")
		return p.NextRecordsURL
	}
	l1, l2 := open(), open()
	if code, _, _ := e.queryPath(l1); code != 200 {
		t.Fatalf("locator 1: %d", code)
	}
	l3 := open() // releases the oldest (l1)
	if code, _, ec := e.queryPath(l1); code != 400 || ec != CodeInvalidQueryLocator {
		t.Errorf("released locator: %d %s", code, ec)
	}
	if code, _, _ := e.queryPath(l2); code != 200 {
		t.Errorf("locator 2: %d", code)
	}
	// Another user cannot use them.
	mine := e.token
	c := e.claims()
	c["iss"], c["sub"] = "other-app", "other@example.com"
	_, m := e.postToken(map[string][]string{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(t, key, c)}})
	e.token = m["access_token"].(string)
	if code, _, ec := e.queryPath(l3); code != 400 || ec != CodeInvalidQueryLocator {
		t.Errorf("foreign locator: %d %s", code, ec)
	}
	e.token = mine
	// Idle locators expire.
	e.clock.Advance(16 * time.Minute)
	e.login()
	if code, _, ec := e.queryPath(l3); code != 400 || ec != CodeInvalidQueryLocator {
		t.Errorf("idle locator: %d %s", code, ec)
	}
	if code, _, ec := e.queryPath(ver + "/query/garbage"); code != 400 || ec != CodeInvalidQueryLocator {
		t.Errorf("garbage locator: %d %s", code, ec)
	}
}

func TestSessionExpiringMidPagination(t *testing.T) {
	e := newEnv(t, Options{})
	insertLoginHistory(t, e.org, 3000)
	e.login()
	_, p, _ := e.query("SELECT Id FROM LoginHistory")
	e.org.ExpireSessionBefore(KindQueryMore, 1)
	if code, _, ec := e.queryPath(p.NextRecordsURL); code != 401 || ec != CodeInvalidSessionID {
		t.Fatalf("expired mid-pagination: %d %s", code, ec)
	}
	e.login() // a fresh session of the same user continues the cursor
	if code, p2, _ := e.queryPath(p.NextRecordsURL); code != 200 || len(p2.Records) != 1000 || !p2.Done {
		t.Fatalf("resumed page: %d %d", code, len(p2.Records))
	}
}

func TestVisibilityDelay(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	ids := must[[]string](t)(e.org.Insert("LoginHistory", Record{"LoginTime": epoch.Add(-time.Minute)}, Record{"LoginTime": epoch.Add(-2 * time.Minute)}))
	noErr(t, e.org.SetVisibleAfter(ids[1], epoch.Add(5*time.Minute)))
	count := func() int {
		_, p, _ := e.query("SELECT Id FROM LoginHistory WHERE LoginTime > 2026-06-30T11:00:00Z")
		return len(p.Records)
	}
	if n := count(); n != 1 {
		t.Fatalf("before visibility: %d rows", n)
	}
	e.clock.Advance(5 * time.Minute)
	if n := count(); n != 2 {
		t.Fatalf("after visibility: %d rows", n)
	}
}

func TestQueryAllAndRetrieve(t *testing.T) {
	e := newEnv(t, Options{})
	insertLoginHistory(t, e.org, 3)
	e.login()
	code, p, _ := e.queryPath(ver + "/queryAll?q=SELECT+Id+FROM+LoginHistory")
	if code != 200 || len(p.Records) != 3 || e.org.CallCount(KindQueryAll) != 1 {
		t.Fatalf("queryAll: %d %d", code, len(p.Records))
	}
	id := p.Records[0]["Id"].(string)
	insertLoginHistory(t, e.org, 2500)
	code, p2, _ := e.queryPath(ver + "/queryAll?q=SELECT+Id+FROM+LoginHistory")
	if code != 200 || !strings.HasPrefix(p2.NextRecordsURL, ver+"/queryAll/01g") {
		t.Fatalf("queryAll cursor: %d %q", code, p2.NextRecordsURL)
	}
	if code, p3, _ := e.queryPath(p2.NextRecordsURL); code != 200 || len(p3.Records) != 503 || !p3.Done {
		t.Fatalf("queryAll next page: %d %d", code, len(p3.Records))
	}
	resp, b := e.get(ver + "/sobjects/LoginHistory/" + id + "?fields=Id,Status")
	if resp.StatusCode != http.StatusOK || string(b) != `{"attributes":{"type":"LoginHistory","url":"/services/data/v62.0/sobjects/LoginHistory/`+id+`"},"Id":"`+id+`","Status":"Success"}` {
		t.Errorf("retrieve: %d %s", resp.StatusCode, b)
	}
	if resp, _ := e.get(ver + "/sobjects/LoginHistory/0Ya00000000zzzz"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("retrieve missing: %d", resp.StatusCode)
	}
}
