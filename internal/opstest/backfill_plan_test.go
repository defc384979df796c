package opstest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

type planOut struct {
	Orgs []struct {
		Files     int64            `json:"files"`
		Bytes     int64            `json:"bytes"`
		Rows      int64            `json:"rows_estimated"`
		LokiBytes int64            `json:"loki_bytes_estimated"`
		Seconds   float64          `json:"wall_seconds_estimated"`
		APICalls  map[string]int64 `json:"api_calls"`
		Days      []struct {
			EventType string `json:"event_type"`
			Day       string `json:"day"`
			Files     int64  `json:"files"`
		} `json:"days"`
	} `json:"orgs"`
}

func sumCalls[K comparable](m map[K]int) (n int64) {
	for _, v := range m {
		n += int64(v)
	}
	return n
}

func within10(plan, actual int64) bool {
	d := plan - actual
	if d < 0 {
		d = -d
	}
	return actual > 0 && float64(d) <= 0.1*float64(actual)
}

// TestBackfillPlanMatchesTheBackfill: `backfill --plan` for 14 days of the simulated org
// downloads nothing and ships nothing, and the files, bytes and Salesforce API calls it
// predicts are within 10% of what the backfill of the same window then makes.
func TestBackfillPlanMatchesTheBackfill(t *testing.T) {
	o := startOrg(t, simsf.AllPermissions())
	if err := o.Populate(simsf.DataSet{Window: 16 * 24 * time.Hour, EventTypes: []string{"Login", "API"},
		HourlyFiles: 16 * 24, DailyFiles: -1, RowsPerFile: 12, LoginHistory: -1, SetupAuditTrail: -1, AuditEvents: -1,
		LoginEvents: -1, ApiEvents: -1, ApiAnomalyEventStore: -1, ApexLogs: -1, LateRows: -1}); err != nil {
		t.Fatal(err)
	}
	rcv := startLoki(t, simloki.Options{})
	s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login", "API"}}
	cfg := s.write(t)
	until := time.Now().UTC().Truncate(24 * time.Hour)
	since := until.Add(-14 * 24 * time.Hour)
	window := []string{"--config", cfg, "backfill", "--since", since.Format(time.DateOnly), "--until", until.Format(time.DateOnly)}

	before := o.Calls()
	res := run(append(window, "--plan", "--json")...)
	if res.code != 0 {
		t.Fatalf("plan: %s", res)
	}
	var plan planOut
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.stdout)), &plan); err != nil || len(plan.Orgs) != 1 {
		t.Fatalf("plan output: %v\n%s", err, res)
	}
	p := plan.Orgs[0]
	after := o.Calls()
	if after[simsf.KindDownload] != before[simsf.KindDownload] || rcv.Count() != 0 {
		t.Fatalf("the plan downloaded %d files and shipped %d entries; want none", after[simsf.KindDownload]-before[simsf.KindDownload], rcv.Count())
	}
	if p.Rows == 0 || p.LokiBytes == 0 || p.Seconds <= 0 || len(p.Days) < 2*14 {
		t.Fatalf("plan lacks rows, Loki bytes, time or per-day rows: %+v", p)
	}
	for _, d := range p.Days {
		if d.Files == 0 || (d.EventType != "Login" && d.EventType != "API") {
			t.Fatalf("day %+v", d)
		}
	}
	if table := run(append(window, "--plan")...); table.code != 0 || !strings.Contains(table.stdout, "total") || !strings.Contains(table.stdout, "Login") {
		t.Fatalf("plan table: %s", table)
	}
	after = o.Calls()
	var planCalls int64
	for _, n := range p.APICalls {
		planCalls += n
	}

	res = run(append(window, "--ingest-time")...)
	if res.code != 0 {
		t.Fatalf("backfill: %s", res)
	}
	var sum struct {
		Outcome       string `json:"outcome"`
		Files         int64  `json:"files"`
		DownloadBytes int64  `json:"download_bytes"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.stdout)), &sum); err != nil || sum.Outcome != "ok" {
		t.Fatalf("backfill summary: %v\n%s", err, res)
	}
	calls := sumCalls(o.Calls()) - sumCalls(after) // as the simulated org counted them
	t.Logf("plan: %d files, %d bytes, %d API calls; backfill: %d files, %d bytes, %d API calls",
		p.Files, p.Bytes, planCalls, sum.Files, sum.DownloadBytes, calls)
	if !within10(p.Files, sum.Files) || !within10(p.Bytes, sum.DownloadBytes) || !within10(planCalls, calls) {
		t.Errorf("the plan is more than 10%% off: files %d vs %d, bytes %d vs %d, API calls %d vs %d",
			p.Files, sum.Files, p.Bytes, sum.DownloadBytes, planCalls, calls)
	}
}
