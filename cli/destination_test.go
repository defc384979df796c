package cli

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/demo"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
)

// tenantRows is how many LoginHistory rows the simulated org holds: each configured org
// reads them all.
const tenantRows = 300

// twoTenantOrgs returns a configuration of two orgs, acme and globex, reading the same
// simulated org (each entry carries its org's label), pushing to pushURL, with the orgs' sink
// sections set by the caller.
func twoTenantOrgs(t *testing.T, pushURL string, acme, globex config.OrgSink) *config.Config {
	t.Helper()
	org := simsf.New(simsf.Options{Seed: 21, Logger: slog.New(slog.DiscardHandler)})
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	org.AddUser(demo.User, simsf.AllPermissions())
	if err := org.AddJWTApp(demo.Client, keys.Certificate, demo.User); err != nil {
		t.Fatal(err)
	}
	if err := org.Populate(simsf.DataSet{Window: 6 * time.Hour, EventTypes: []string{"Login"}, HourlyFiles: -1, DailyFiles: -1,
		LoginHistory: tenantRows, SetupAuditTrail: -1, AuditEvents: -1, LoginEvents: -1, ApiEvents: -1, ApiAnomalyEventStore: -1,
		ApexLogs: -1, LateRows: -1}); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	base := demo.Config(srv.URL, string(keys.KeyPEM), pushURL, filepath.Join(t.TempDir(), "state.json"), 10_000)
	base.Sources.EventLogFile.Enabled, base.Sources.ApexLog.Enabled = false, false
	base.Sources.SOQL.Objects = []config.SOQLObject{demo.Object("LoginHistory")}
	base.Salesforce.Limits = config.OrgLimits{}
	cfg := config.Defaults()
	cfg.Sink, cfg.State, cfg.Batch = base.Sink, base.State, base.Batch
	cfg.Orgs = []config.Org{
		{Name: "acme", Salesforce: base.Salesforce, Sources: base.Sources, Sink: acme},
		{Name: "globex", Salesforce: base.Salesforce, Sources: base.Sources, Sink: globex},
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	return cfg
}

// Two orgs routed to two tenants of the strict receiver (which refuses a push without a
// tenant): each tenant receives exactly its org's entries, once each, and the run report
// breaks the entries down by tenant.
func TestOrgsRoutedToTwoTenantsOfTheStrictReceiver(t *testing.T) {
	recv := simloki.Start(t, simloki.Options{RequireTenant: true})
	cfg := twoTenantOrgs(t, recv.PushURL(),
		config.OrgSink{Loki: config.OrgLoki{TenantID: "tenant-acme"}},
		config.OrgSink{Loki: config.OrgLoki{TenantID: "tenant-globex"}})

	rep := runInvocation(context.Background(), cfg, slog.New(slog.DiscardHandler), invocationFlags{})
	if rep.Outcome != job.OutcomeOK || rep.Records != 2*tenantRows {
		t.Fatalf("run: %s, %d records (%s)", rep.Outcome, rep.Records, rep.Error)
	}
	got := map[string]int{} // tenant/org -> entries
	for _, e := range recv.Entries() {
		got[e.Tenant+"/"+e.Label("org")]++
	}
	want := map[string]int{"tenant-acme/acme": tenantRows, "tenant-globex/globex": tenantRows}
	if len(got) != len(want) || got["tenant-acme/acme"] != tenantRows || got["tenant-globex/globex"] != tenantRows {
		t.Errorf("entries by tenant/org %v, want %v", got, want)
	}
	if d := recv.Duplicates(); len(d) > 0 {
		t.Errorf("%d duplicates", len(d))
	}
	for _, name := range []string{"tenant-acme", "tenant-globex"} {
		if d := rep.Destinations[name]; d == nil || d.Records != tenantRows || d.Pushes == 0 {
			t.Errorf("report for %s: %+v, want %d records", name, d, tenantRows)
		}
	}
}

// Two orgs routed to two VictoriaLogs tenants through its AccountID and ProjectID headers:
// each tenant holds exactly its org's entries and the default tenant none.
func TestOrgsRoutedToTwoVictoriaLogsAccounts(t *testing.T) {
	vl := testenv.StartVictoriaLogs(t)
	cfg := twoTenantOrgs(t, vl.PushURL(),
		config.OrgSink{Loki: config.OrgLoki{Headers: map[string]string{"AccountID": "1"}}},
		config.OrgSink{Loki: config.OrgLoki{Headers: map[string]string{"AccountID": "2", "ProjectID": "7"}}})

	rep := runInvocation(context.Background(), cfg, slog.New(slog.DiscardHandler), invocationFlags{})
	if rep.Outcome != job.OutcomeOK || rep.Records != 2*tenantRows {
		t.Fatalf("run: %s, %d records (%s)", rep.Outcome, rep.Records, rep.Error)
	}
	byOrg := func(rows []map[string]any) map[string]int {
		out := map[string]int{}
		for _, r := range rows {
			org, _ := r["org"].(string)
			out[org]++
		}
		return out
	}
	for _, tc := range []struct {
		account, project, org string
	}{{"1", "0", "acme"}, {"2", "7", "globex"}} {
		got := byOrg(vl.QueryTenant(t, tc.account, tc.project, "*"))
		if len(got) != 1 || got[tc.org] != tenantRows {
			t.Errorf("tenant %s:%s holds %v, want only %s's %d entries", tc.account, tc.project, got, tc.org, tenantRows)
		}
	}
	if rows := vl.Query(t, "*"); len(rows) != 0 {
		t.Errorf("the default tenant holds %d entries, want none", len(rows))
	}
}

// TestLimitsSamplesCarryTheOrgsOwnLabels: an org's limits samples (salesforce.limits.ship) go
// to its tenant with the static labels of its own sink section, like its records: an org
// labelled environment=acme-prod sends no sample under sink.loki's environment.
func TestLimitsSamplesCarryTheOrgsOwnLabels(t *testing.T) {
	recv := simloki.Start(t, simloki.Options{RequireTenant: true})
	cfg := twoTenantOrgs(t, recv.PushURL(),
		config.OrgSink{Loki: config.OrgLoki{TenantID: "tenant-acme", Labels: map[string]string{"environment": "acme-prod"}}},
		config.OrgSink{Loki: config.OrgLoki{TenantID: "tenant-globex"}})
	cfg.Sink.Loki.Labels = map[string]string{"environment": "shared"}
	for i := range cfg.Orgs {
		cfg.Orgs[i].Salesforce.Limits = config.OrgLimits{Interval: config.Duration(time.Minute), Ship: true}
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	rep := runInvocation(context.Background(), cfg, slog.New(slog.DiscardHandler), invocationFlags{})
	if rep.Outcome != job.OutcomeOK || len(rep.Limits) != 2 {
		t.Fatalf("run: %s (%s), limits samples %+v", rep.Outcome, rep.Error, rep.Limits)
	}
	got := map[string]string{} // tenant/org -> environment of its limits sample
	for _, e := range recv.Entries() {
		if e.Label("source") == "limits" {
			got[e.Tenant+"/"+e.Label("org")] = e.Label("environment")
		}
	}
	want := map[string]string{"tenant-acme/acme": "acme-prod", "tenant-globex/globex": "shared"}
	if len(got) != len(want) || got["tenant-acme/acme"] != want["tenant-acme/acme"] || got["tenant-globex/globex"] != want["tenant-globex/globex"] {
		t.Fatalf("limits samples' environment by tenant/org %v, want %v", got, want)
	}
}
