package cli

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

func TestEventLogFileOptionsFromConfig(t *testing.T) {
	cfg := config.Defaults()
	cfg.Orgs = []config.Org{{Name: "eu"}, {Name: "us"}}
	us := &cfg.Orgs[1].Sources
	us.EventLogFile = cfg.Sources.EventLogFile // the defaults
	us.EventLogFile.Enabled = true
	us.EventLogFile.EventTypes = []string{"*"}
	us.EventLogFile.SettleWindow = 0
	us.EventLogFile.TypedValues = false
	cfg.Orgs[1].Salesforce.OrgID = "00D000000000001AAA"
	sh, err := buildShaper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o, err := eventLogFileOptions(orgEnv{Name: "us", Config: cfg}, sh)
	if err != nil {
		t.Fatal(err)
	}
	if o.Interval != eventlogfile.IntervalHourly || o.EventTypes[0] != "*" || o.Lookback != 24*time.Hour || o.PageSize != 1000 ||
		o.SettleWindow >= 0 || !o.StringValues || o.OrgID != "00D000000000001AAA" || o.MaxRowBytes != 8<<20 ||
		len(o.Labels) != 1 || o.Labels[0].Value != "us" || o.DownloadMaxAge != 24*time.Hour {
		t.Fatalf("options %+v", o)
	}
	if len(o.OwnedCategories) != 0 {
		t.Fatalf("owned categories %v with no other source", o.OwnedCategories)
	}
	// A soql source in another job group still owns its category.
	full := *cfg
	full.Orgs = append([]config.Org(nil), cfg.Orgs...)
	full.Orgs[1].Sources.SOQL = config.SOQLSource{Enabled: true, Objects: []config.SOQLObject{{Name: "LoginEvent"}}}
	o, err = eventLogFileOptions(orgEnv{Name: "us", Config: cfg, Full: &full}, sh)
	if err != nil || len(o.OwnedCategories) != 1 || o.OwnedCategories[0] != "login" {
		t.Fatalf("owned categories %v (%v), want login from the full configuration", o.OwnedCategories, err)
	}
	if _, err := eventLogFileOptions(orgEnv{Name: "nope", Config: cfg}, sh); err == nil {
		t.Fatal("an unknown org must be an error")
	}
}
