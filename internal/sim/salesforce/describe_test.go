package salesforce

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestDescribe(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	resp, b := e.get(ver + "/sobjects/")
	var g struct {
		SObjects []struct {
			Name      string `json:"name"`
			Queryable bool   `json:"queryable"`
			Custom    bool   `json:"custom"`
			KeyPrefix string `json:"keyPrefix"`
		} `json:"sobjects"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &g) != nil {
		t.Fatalf("describeGlobal: %d %s", resp.StatusCode, b)
	}
	names := map[string]bool{}
	for _, s := range g.SObjects {
		names[s.Name] = s.Queryable
	}
	for _, n := range []string{"EventLogFile", "LoginHistory", "SetupAuditTrail", "Audit_Event__c", "LoginEvent", "ApiEvent", "ApiAnomalyEventStore", "ApexLog"} {
		if q, ok := names[n]; !ok || !q {
			t.Errorf("describeGlobal: %s missing or not queryable", n)
		}
	}
	for _, n := range []string{"LoginEventStream", "ApiAnomalyEvent"} {
		if q, ok := names[n]; !ok || q {
			t.Errorf("describeGlobal: streaming channel %s missing or queryable", n)
		}
	}
	if _, ok := names["TraceFlag"]; ok {
		t.Error("TraceFlag is a Tooling object")
	}

	resp, b = e.get(ver + "/sobjects/eventlogfile/describe")
	var d struct {
		Name   string `json:"name"`
		Fields []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Filterable bool   `json:"filterable"`
			Groupable  bool   `json:"groupable"`
		} `json:"fields"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &d) != nil || d.Name != "EventLogFile" {
		t.Fatalf("describe: %d %s", resp.StatusCode, b)
	}
	types := map[string]string{}
	for _, f := range d.Fields {
		types[f.Name] = f.Type
		if f.Name == "EventType" && (!f.Filterable || !f.Groupable) {
			t.Error("EventType must be filterable and groupable")
		}
	}
	if types["CreatedDate"] != "datetime" || types["LogFileLength"] != "double" || types["Sequence"] != "int" || types["EventType"] != "picklist" || types["LogFile"] != "base64" {
		t.Errorf("field types %v", types)
	}
	// The field list from describe makes a valid explicit SELECT.
	var list []string
	for _, f := range d.Fields {
		list = append(list, f.Name)
	}
	if code, _, ec := e.query("SELECT " + strings.Join(list, ", ") + " FROM EventLogFile"); code != 200 {
		t.Errorf("explicit SELECT of every described field: %s", ec)
	}
	if resp, _ := e.get(ver + "/tooling/sobjects/TraceFlag/describe"); resp.StatusCode != http.StatusOK {
		t.Errorf("tooling describe: %d", resp.StatusCode)
	}
	if resp, _ := e.get(ver + "/sobjects/Nope__c/describe"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown object describe: %d", resp.StatusCode)
	}
	if resp, b := e.get(ver + "/sobjects/LoginHistory"); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"objectDescribe"`) {
		t.Errorf("sobject basic info: %d %s", resp.StatusCode, b)
	}
}

// TestPermissions: a user lacking a permission gets Salesforce's errors.
func TestPermissions(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	elf := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "Login", Rows: 1}))
	apex := must[string](t)(e.org.AddApexLog(ApexLogSpec{LogUser: testUser}))
	noErr(t, e.org.SetPermissions(testUser, Permissions{APIEnabled: true, Objects: []string{"LoginHistory"}}))

	if code, _, ec := e.query("SELECT Id FROM EventLogFile"); code != 400 || ec != CodeInvalidType {
		t.Errorf("ELF query without View Event Log Files: %d %s", code, ec)
	}
	if resp, _ := e.get(ver + "/sobjects/EventLogFile/describe"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ELF describe without permission: %d", resp.StatusCode)
	}
	if code, _, ec := e.queryPath(ver + "/sobjects/EventLogFile/" + elf + "/LogFile"); code != 403 || ec != CodeInsufficientAccess {
		t.Errorf("ELF download without permission: %d %s", code, ec)
	}
	if code, _, ec := e.queryPath(ver + "/tooling/sobjects/ApexLog/" + apex + "/Body"); code != 403 || ec != CodeInsufficientAccess {
		t.Errorf("ApexLog body without permission: %d %s", code, ec)
	}
	for _, obj := range []string{"SetupAuditTrail", "Audit_Event__c", "LoginEvent"} {
		if code, _, ec := e.query("SELECT Id FROM " + obj + " LIMIT 1"); code != 400 || ec != CodeInvalidType {
			t.Errorf("%s without access: %d %s", obj, code, ec)
		}
	}
	for _, obj := range []string{"LoginHistory", "User"} {
		if code, _, ec := e.query("SELECT Id FROM " + obj + " LIMIT 1"); code != 200 {
			t.Errorf("%s with access: %d %s", obj, code, ec)
		}
	}
	_, b := e.get(ver + "/sobjects/")
	if strings.Contains(string(b), `"name":"EventLogFile"`) || !strings.Contains(string(b), `"name":"LoginHistory"`) {
		t.Error("describeGlobal does not follow permissions")
	}
	noErr(t, e.org.SetPermissions(testUser, Permissions{APIEnabled: true, ViewEventLogFiles: true}))
	if code, _, _ := e.query("SELECT Id FROM EventLogFile"); code != 200 {
		t.Error("View Event Log Files does not grant EventLogFile")
	}
}

func TestApexLog(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	other := e.org.AddUser("dev@example.com", AllPermissions())
	start := epoch.Add(-time.Hour)
	body := []byte("62.0 APEX_CODE,FINEST\n12:00:00.0 (1)|USER_DEBUG|[1]|DEBUG|hello\n")
	id1 := must[string](t)(e.org.AddApexLog(ApexLogSpec{LogUser: testUser, StartTime: start, Body: body}))
	must[string](t)(e.org.AddApexLog(ApexLogSpec{LogUser: other, StartTime: start, BodyBytes: 5000}))
	id3 := must[string](t)(e.org.AddApexLog(ApexLogSpec{LogUser: "dev@example.com", StartTime: start.Add(time.Minute)}))

	q := "SELECT Id, LogUserId, LogLength, StartTime, LogUser.Username FROM ApexLog WHERE StartTime >= 2026-06-30T11:00:00.000Z AND LogUser.Username IN ('dev@example.com') ORDER BY StartTime ASC, Id ASC LIMIT 200"
	code, p, ec := e.queryPath(ver + "/tooling/query?q=" + url.QueryEscape(q))
	if code != 200 || len(p.Records) != 2 || p.Records[1]["Id"] != id3 {
		t.Fatalf("tooling listing: %d %s %v", code, ec, p.Records)
	}
	if u := p.Records[0]["LogUser"].(map[string]any); u["Username"] != "dev@example.com" {
		t.Errorf("LogUser %v", u)
	}
	if !strings.Contains(p.Records[0]["attributes"].(map[string]any)["url"].(string), "/tooling/sobjects/ApexLog/") {
		t.Errorf("tooling record url: %v", p.Records[0]["attributes"])
	}
	for _, path := range []string{ver + "/tooling/sobjects/ApexLog/" + id1 + "/Body", ver + "/sobjects/ApexLog/" + id1 + "/Body/"} {
		resp, got := e.get(path, "Accept-Encoding", "identity")
		if resp.StatusCode != http.StatusOK || string(got) != string(body) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %d %q", path, resp.StatusCode, got)
		}
	}
	_, p, _ = e.queryPath(ver + "/tooling/query?q=" + url.QueryEscape("SELECT LogLength FROM ApexLog WHERE Id = '"+id3+"'"))
	resp, got := e.get(ver+"/tooling/sobjects/ApexLog/"+id3+"/Body", "Accept-Encoding", "identity")
	if resp.StatusCode != http.StatusOK || float64(len(got)) != p.Records[0]["LogLength"].(float64) || len(got) < 2048 {
		t.Errorf("generated body %d bytes, LogLength %v", len(got), p.Records[0]["LogLength"])
	}
	if e.org.CallCount(KindApexLogBody) != 3 || e.org.CallCount(KindToolingQuery) != 2 {
		t.Errorf("calls %v", e.org.Calls())
	}
}

// TestToolingResultShape: Tooling query results carry size, queryLocator and entityTypeName
// besides the REST keys, in Salesforce's order; ApexLog.Request is API or Application.
func TestToolingResultShape(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	start := epoch.Add(-time.Hour)
	for i := range 3 {
		must[string](t)(e.org.AddApexLog(ApexLogSpec{LogUser: testUser, StartTime: start.Add(time.Duration(i) * time.Second)}))
	}
	must[string](t)(e.org.AddApexLog(ApexLogSpec{LogUser: testUser, StartTime: start, Request: "Application"}))
	resp, b := e.get(ver + "/tooling/query?q=" + url.QueryEscape("SELECT Id, Request FROM ApexLog"))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), `{"size":4,"totalSize":4,"done":true,"queryLocator":null,"entityTypeName":"ApexLog","records":[`) {
		t.Fatalf("tooling page: %d %.200s", resp.StatusCode, b)
	}
	var p page
	_ = json.Unmarshal(b, &p)
	req := map[any]int{}
	for _, r := range p.Records {
		req[r["Request"]]++
	}
	if req["API"] != 3 || req["Application"] != 1 {
		t.Errorf("Request values %v", req)
	}
	_, empty := e.get(ver + "/tooling/query?q=" + url.QueryEscape("SELECT Id FROM ApexLog WHERE Id = '07L000000000000AAA'"))
	if string(empty) != `{"size":0,"totalSize":0,"done":true,"queryLocator":null,"entityTypeName":null,"records":[]}` {
		t.Errorf("empty tooling page: %s", empty)
	}
	// A REST (non-Tooling) page has none of the Tooling keys.
	_, rest := e.get(ver + "/query?q=" + url.QueryEscape("SELECT Id FROM User LIMIT 1"))
	if !strings.HasPrefix(string(rest), `{"totalSize":1,"done":true,"records":[`) {
		t.Errorf("REST page: %.100s", rest)
	}
}

// TestFieldLevelSecurity: a field the user's field-level security hides is left out of
// describe and of FIELDS(), and naming it anywhere in a query answers INVALID_FIELD "No such
// column", as for a field that does not exist; other users still see it.
func TestFieldLevelSecurity(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	perms := AllPermissions()
	perms.HiddenFields = []string{"Audit_Event__c.Source_Ip__c", "user.Username"}
	noErr(t, e.org.SetPermissions(testUser, perms))

	_, b := e.get(ver + "/sobjects/Audit_Event__c/describe")
	if strings.Contains(string(b), `"name":"Source_Ip__c"`) || !strings.Contains(string(b), `"name":"Actor__c"`) {
		t.Error("describe lists the hidden field Source_Ip__c, or lost the visible Actor__c")
	}
	for _, q := range []string{
		"SELECT Id, Source_Ip__c FROM Audit_Event__c",
		"SELECT Id FROM Audit_Event__c WHERE source_ip__c = '10.0.0.1'",
		"SELECT Id FROM Audit_Event__c ORDER BY Source_Ip__c",
		"SELECT Id, CreatedBy.Username FROM Audit_Event__c",
	} {
		if code, _, ec := e.query(q); code != 400 || ec != CodeInvalidField {
			t.Errorf("%s: %d %s, want 400 %s", q, code, ec, CodeInvalidField)
		}
	}
	if code, _, ec := e.query("SELECT Id, Actor__c FROM Audit_Event__c"); code != 200 {
		t.Errorf("visible fields: %d %s", code, ec)
	}
	must[[]string](t)(e.org.Insert("Audit_Event__c", Record{"Name": "x", "Source_Ip__c": "10.0.0.1", "Actor__c": "a"}))
	if _, p, _ := e.query("SELECT FIELDS(ALL) FROM Audit_Event__c LIMIT 1"); len(p.Records) != 1 {
		t.Fatalf("FIELDS(ALL) rows %v", p.Records)
	} else if _, ok := p.Records[0]["Source_Ip__c"]; ok {
		t.Errorf("FIELDS(ALL) returned the hidden field: %v", p.Records[0])
	} else if _, ok := p.Records[0]["Actor__c"]; !ok {
		t.Errorf("FIELDS(ALL) lost a visible field: %v", p.Records[0])
	}
	perms.HiddenFields = nil
	noErr(t, e.org.SetPermissions(testUser, perms))
	if code, _, ec := e.query("SELECT Id, Source_Ip__c FROM Audit_Event__c"); code != 200 {
		t.Errorf("field granted again: %d %s", code, ec)
	}
}
