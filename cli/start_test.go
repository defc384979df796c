package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// TestStartShipsAFreshKeyFromThatTimeAndIsIgnoredOnceACursorExists: with start set 40 hours
// back (beyond every lookback), a first run ships what the EventLogFile, SOQL and ApexLog sources
// hold from that time on and nothing older; a second run with start moved before everything ships
// only what is new since the cursors, never the records before the first start.
func TestStartShipsAFreshKeyFromThatTimeAndIsIgnoredOnceACursorExists(t *testing.T) {
	w := newSimWorld(t, 4)
	now := time.Now().UTC()
	old, recent := now.Add(-50*time.Hour), now.Add(-30*time.Hour)
	start := now.Add(-40 * time.Hour)
	addData := func(at time.Time, files, logins, logs int) {
		t.Helper()
		if files > 0 {
			if _, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Interval: simsf.IntervalHourly,
				LogDate: at.Add(-time.Hour).Truncate(time.Hour), CreatedDate: at, Rows: files}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range logins {
			if _, err := w.org.Insert("LoginHistory", simsf.Record{"LoginTime": at.Add(time.Duration(i) * time.Second), "Status": "Success"}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range logs {
			if _, err := w.org.AddApexLog(simsf.ApexLogSpec{LogUser: "feature@example.com", StartTime: at.Add(time.Duration(i) * time.Second), Body: []byte("body")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	addData(old, 10, 3, 2)
	addData(recent, 20, 4, 1)
	sources := func(start time.Time) string {
		s := start.Format(time.RFC3339)
		return fmt.Sprintf(`  eventlogfile:
    enabled: true
    interval: Hourly
    event_types: [API]
    start: %[1]s
  soql:
    enabled: true
    objects:
      - name: LoginHistory
        start: %[1]s
  apexlog:
    enabled: true
    start: %[1]s
`, s)
	}
	perSource := func(rep *job.Report) string {
		var b strings.Builder
		for _, n := range []string{"eventlogfile", "soql", "apexlog"} {
			if sr := rep.Sources[n]; sr != nil {
				fmt.Fprintf(&b, "%s=%d ", n, sr.Records)
			}
		}
		return strings.TrimSpace(b.String())
	}

	rep, _ := runOnce(t, w.config(t, "", sources(start), ""))
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("first run: %s: %s", rep.Outcome, rep.Error)
	}
	if got, want := perSource(rep), "eventlogfile=20 soql=4 apexlog=1"; got != want {
		t.Errorf("first run shipped %s, want %s (what is at or after start, nothing older)", got, want)
	}

	addData(now.Add(-10*time.Minute), 5, 2, 1)
	rep, _ = runOnce(t, w.config(t, "", sources(now.Add(-100*time.Hour)), ""))
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("second run: %s: %s", rep.Outcome, rep.Error)
	}
	if got, want := perSource(rep), "eventlogfile=5 soql=2 apexlog=1"; got != want {
		t.Errorf("second run shipped %s, want %s (the cursors win over the moved start)", got, want)
	}
	if n := w.receiver.Count(); n != 33 {
		t.Errorf("receiver holds %d entries, want 25 + 8", n)
	}
}
