package cli

import (
	"context"
	"encoding/json"
	"github.com/sf2loki/sf2loki/internal/demo"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// Two orgs in one configuration, migrating from a single-org deployment: every entry carries its
// org label, keys are org=<name>:-prefixed, and the first org starts from the legacy unprefixed
// key while the second starts from its lookback.
func TestTwoOrgsPrefixKeysLabelEntriesAndMigrateTheLegacyKey(t *testing.T) {
	org := simsf.New(simsf.Options{Seed: 7})
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	org.AddUser(demo.User, simsf.AllPermissions())
	if err := org.AddJWTApp(demo.Client, keys.Certificate, demo.User); err != nil {
		t.Fatal(err)
	}
	if err := org.Populate(simsf.DataSet{Window: 6 * time.Hour, EventTypes: []string{"Login"}, HourlyFiles: -1, DailyFiles: -1,
		LoginHistory: 500, SetupAuditTrail: -1, AuditEvents: -1, LoginEvents: -1, ApiEvents: -1, ApiAnomalyEventStore: -1,
		ApexLogs: -1, LateRows: -1}); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	recv := simloki.Start(t, simloki.Options{})
	state := filepath.Join(t.TempDir(), "state.json")
	log := slog.New(slog.DiscardHandler)

	single := demo.Config(srv.URL, string(keys.KeyPEM), recv.PushURL(), state, 200)
	single.Sources.EventLogFile.Enabled, single.Sources.ApexLog.Enabled = false, false
	single.Sources.SOQL.Objects = []config.SOQLObject{demo.Object("LoginHistory")}
	single.Salesforce.Limits = config.OrgLimits{} // only the records count here
	if rep := runInvocation(context.Background(), single, log, invocationFlags{}); rep.Outcome != job.OutcomeOK || rep.Records != 200 {
		t.Fatalf("single-org run: %s, %d records (%s)", rep.Outcome, rep.Records, rep.Error)
	}
	recv.Reset()

	multi := config.Defaults()
	multi.Sink, multi.State, multi.Batch = single.Sink, single.State, single.Batch
	multi.Batch.MaxRecords = 10_000
	for _, name := range []string{"a", "b"} {
		multi.Orgs = append(multi.Orgs, config.Org{Name: name, Salesforce: single.Salesforce, Sources: single.Sources})
	}
	multi.Salesforce = config.Salesforce{}
	config.ApplyDefaults(&multi.Salesforce)
	if errs := multi.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	rep := runInvocation(context.Background(), multi, log, invocationFlags{})
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("two-org run: %s (%s)", rep.Outcome, rep.Error)
	}
	byOrg := map[string]int{}
	for _, e := range recv.Entries() {
		byOrg[e.Label("org")]++
	}
	if byOrg["a"] != 300 || byOrg["b"] != 500 || len(byOrg) != 2 {
		t.Errorf("entries by org label %v, want a=300 (resumed from the legacy key) and b=500 (from lookback)", byOrg)
	}
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Checkpoints map[string]json.RawMessage `json:"checkpoints"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"org=a:soql:LoginHistory", "org=b:soql:LoginHistory", "soql:LoginHistory"} {
		if _, ok := doc.Checkpoints[k]; !ok {
			t.Errorf("document has no key %s: %v", k, keysOf(doc.Checkpoints))
		}
	}
}

func keysOf(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
