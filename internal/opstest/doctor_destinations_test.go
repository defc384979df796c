package opstest

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/doctor"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// TestDoctorChecksEveryDestination: two orgs, one on sink.loki and one on a receiver of its
// own (orgs[].sink.loki). doctor checks both; when only the org's receiver refuses structured
// metadata, only that destination's write check fails, and its checks are named after it.
func TestDoctorChecksEveryDestination(t *testing.T) {
	o := startOrg(t, simsf.AllPermissions())
	o.addFiles(t, []string{"Login"}, time.Now().Add(-2*time.Hour), 2, 5)
	main, own := startLoki(t, simloki.Options{}), startLoki(t, simloki.Options{RequireTenant: true})
	dir := t.TempDir()
	org := func(name, sink string) string {
		return fmt.Sprintf(`  - name: %s
    salesforce:
      login_url: %s
      client_id: %s
      username: %s
      private_key_file: %s
      max_retries: 1
    sources:
      eventlogfile:
        enabled: true
        interval: Hourly
        event_types: [Login]
        settle_window: 0s
        lookback: 72h
%s`, name, o.URL, testClientID, testUser, o.KeyFile, sink)
	}
	y := "orgs:\n" + org("acme", "") + org("globex", "    sink:\n      loki:\n        url: "+own.PushURL()+"\n        tenant_id: globex\n") +
		fmt.Sprintf(`sink:
  loki:
    url: %s
    max_retries: 1
    min_backoff: 10ms
    max_backoff: 50ms
state:
  store: file
  file:
    path: %s
lease:
  type: store
  name: sf2loki
log:
  level: warn
`, main.PushURL(), filepath.Join(dir, "state.json"))
	cfg := filepath.Join(dir, "sf2loki.yaml")
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	firstRun(t, cfg)
	if main.Count() == 0 || own.Count() == 0 {
		t.Fatalf("the first run shipped %d entries to sink.loki and %d to globex's receiver", main.Count(), own.Count())
	}

	u, err := url.Parse(own.PushURL())
	if err != nil {
		t.Fatal(err)
	}
	prefix := "destination[globex@" + u.Host + "]."
	res, rep := runDoctor(t, cfg)
	if res.code != 0 {
		t.Fatalf("clean: %s", res)
	}
	requireStatuses(t, rep, doctor.StatusPass, nil)
	for _, id := range []string{"loki.write", prefix + "loki.write", prefix + "loki.ordering"} {
		if _, ok := rep.byID()[id]; !ok {
			t.Errorf("no check %s", id)
		}
	}

	own.SetAllowStructuredMetadata(false)
	checkFault(t, cfg, prefix+"loki.write", "allow_structured_metadata", []string{prefix + "loki.ordering"})
}
