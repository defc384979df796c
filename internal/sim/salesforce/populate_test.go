package salesforce

import (
	"testing"
	"time"
)

func TestPopulate(t *testing.T) {
	e := newEnv(t, Options{})
	noErr(t, e.org.Populate(DataSet{EventTypes: []string{"Login", "API"}, HourlyFiles: 3, DailyFiles: 2, BytesPerFile: 1 << 20}))
	e.login()
	recs, _ := e.drain("SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength, Sequence FROM EventLogFile ORDER BY CreatedDate, Id")
	hourly, daily := 0, 0
	for _, r := range recs {
		created := must[time.Time](t)(time.Parse("2006-01-02T15:04:05.000-0700", r["CreatedDate"].(string)))
		if created.After(epoch) {
			t.Errorf("file %v listed before it was created", r["Id"])
		}
		if r["Interval"] == IntervalHourly {
			hourly++
			if r["Sequence"].(float64) < 1 {
				t.Errorf("hourly file with Sequence %v", r["Sequence"])
			}
		} else {
			daily++
		}
		if n := r["LogFileLength"].(float64); r["Sequence"].(float64) <= 1 && (n < 0.9*(1<<20) || n > 1.1*(1<<20)) {
			t.Errorf("LogFileLength %v, want about 1 MiB", n)
		}
	}
	if hourly == 0 || daily == 0 {
		t.Fatalf("hourly %d daily %d", hourly, daily)
	}
	// Late files and rows appear as time passes; the regenerated Daily file
	// keeps its id with a newer CreatedDate.
	before := len(recs)
	_, p, _ := e.query("SELECT COUNT() FROM LoginHistory")
	rowsBefore := p.TotalSize
	e.clock.Advance(2 * time.Hour)
	e.login()
	recs, _ = e.drain("SELECT Id, CreatedDate FROM EventLogFile ORDER BY CreatedDate, Id")
	if len(recs) <= before {
		t.Errorf("no late file appeared: %d then %d", before, len(recs))
	}
	if last := recs[len(recs)-1]; last["CreatedDate"] != sfDateTime(epoch.Add(time.Hour)) {
		t.Errorf("newest file %v is not the regenerated Daily file", last)
	}
	_, p, _ = e.query("SELECT COUNT() FROM LoginHistory")
	if p.TotalSize != rowsBefore+5 {
		t.Errorf("late LoginHistory rows: %d then %d", rowsBefore, p.TotalSize)
	}
	for _, q := range []string{
		"SELECT COUNT() FROM SetupAuditTrail", "SELECT COUNT() FROM Audit_Event__c", "SELECT COUNT() FROM ApiAnomalyEventStore",
	} {
		if _, p, ec := e.query(q); ec != "" || p.TotalSize == 0 {
			t.Errorf("%s: %s %d", q, ec, p.TotalSize)
		}
	}
	// The LoginEvent tie group: 250 rows share one EventDate.
	_, p, _ = e.query("SELECT EventDate FROM LoginEvent ORDER BY EventDate DESC LIMIT 200")
	_, tie, _ := e.query("SELECT Id FROM LoginEvent WHERE EventDate = " + epoch.Add(-8*time.Hour).Format("2006-01-02T15:04:05Z") + " LIMIT 200")
	if len(p.Records) != 200 || len(tie.Records) != 200 {
		t.Errorf("LoginEvent: %d newest, %d in the tie group (capped at 200)", len(p.Records), len(tie.Records))
	}
	if n := e.org.Count("ApexLog"); n != 50 {
		t.Errorf("ApexLog count %d", n)
	}
	_, p, _ = e.queryPath(ver + "/tooling/query?q=SELECT+Id+FROM+TraceFlag+WHERE+ExpirationDate+>+2026-06-30T12:00:00Z")
	if len(p.Records) != 1 {
		t.Errorf("active TraceFlags: %d", len(p.Records))
	}
}
