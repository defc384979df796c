package cli

import (
	"log/slog"
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
	o, err := eventLogFileOptions(newOrgEnv(cfg, cfg.OrgList()[1], nil, slog.New(slog.DiscardHandler)), sh)
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
	cfg.Orgs[1].Sources.SOQL = config.SOQLSource{Enabled: true, Objects: []config.SOQLObject{{Name: "LoginEvent"}}}
	cfg.Jobs = []config.Job{{Name: "elf", Sources: []string{"eventlogfile"}}, {Name: "events", Sources: []string{"soql"}}}
	elf, err := cfg.ForJob("elf")
	if err != nil || elf.OrgList()[1].Sources.SOQL.Enabled {
		t.Fatalf("the elf group: soql %v (%v)", elf.OrgList()[1].Sources.SOQL.Enabled, err)
	}
	o, err = eventLogFileOptions(newOrgEnv(elf, elf.OrgList()[1], nil, slog.New(slog.DiscardHandler)), sh)
	if err != nil || len(o.OwnedCategories) != 1 || o.OwnedCategories[0] != "login" {
		t.Fatalf("owned categories %v (%v), want login from the full configuration", o.OwnedCategories, err)
	}
}
