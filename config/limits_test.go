package config

import (
	"testing"
	"time"
)

func TestOrgLimitsConfig(t *testing.T) {
	if d := Defaults().Salesforce.Limits; d.Interval != 0 || d.Ship {
		t.Errorf("the poller must be off by default: %+v", d)
	}
	_, err := load(t, sfCreds+"  limits:\n    interval: 30s\n")
	wantErrors(t, err, "salesforce.limits.interval: 30s is too short")
	_, err = load(t, sfCreds+"  limits:\n    ship: true\n")
	wantErrors(t, err, "salesforce.limits.ship: needs an interval")

	// With job groups, only the first group shipping a source of the org samples its limits.
	org := func(name string) string {
		return "  - name: " + name + "\n    salesforce:\n      client_id: id\n      username: u\n      private_key: |\n        -----BEGIN PRIVATE KEY-----\n        MIIB\n        -----END PRIVATE KEY-----\n" +
			"      limits:\n        interval: 15m\n    sources:\n      eventlogfile:\n        enabled: true\n        event_types: [API]\n      soql:\n        enabled: true\n        objects:\n          - name: SetupAuditTrail\n"
	}
	cfg := mustLoad(t, "orgs:\n"+org("prod")+org("uat")+`jobs:
  - name: soql
    sources: [soql]
  - name: elf
    sources: [eventlogfile]
  - name: prod-only
    orgs: [prod]
    sources: [apexlog]
`)
	want := map[string]time.Duration{"soql": 15 * time.Minute, "elf": 0, "prod-only": 0}
	for group, interval := range want {
		g, err := cfg.ForJob(group)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range g.OrgList() {
			if got := o.Salesforce.Limits.Interval.D(); got != interval {
				t.Errorf("group %s, org %s: limits interval %s, want %s", group, o.Name, got, interval)
			}
		}
	}
}
