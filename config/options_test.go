package config

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

func TestEventLogFileOptions(t *testing.T) {
	cfg := Defaults()
	cfg.Orgs = []Org{{Name: "eu"}, {Name: "us"}}
	us := &cfg.Orgs[1].Sources
	us.EventLogFile = cfg.Sources.EventLogFile // the defaults
	us.EventLogFile.Enabled = true
	us.EventLogFile.EventTypes = []string{"*"}
	us.EventLogFile.SettleWindow = 0
	us.EventLogFile.TypedValues = false
	cfg.Orgs[1].Salesforce.OrgID = "00D000000000001AAA"
	o := cfg.EventLogFileOptions(cfg.OrgList()[1])
	if o.Interval != eventlogfile.IntervalHourly || o.EventTypes[0] != "*" || o.Lookback != 24*time.Hour || o.PageSize != 1000 ||
		o.SettleWindow >= 0 || !o.StringValues || o.OrgID != "00D000000000001AAA" || o.MaxRowBytes != 8<<20 ||
		len(o.Labels) != 1 || o.Labels[0].Value != "us" || o.DownloadMaxAge != 24*time.Hour {
		t.Fatalf("options %+v", o)
	}
	if len(o.OwnedCategories) != 0 {
		t.Fatalf("owned categories %v with no other source", o.OwnedCategories)
	}
	// A soql source in another job group still owns its category.
	cfg.Orgs[1].Sources.SOQL = SOQLSource{Enabled: true, Objects: []SOQLObject{{Name: "LoginEvent"}}}
	cfg.Jobs = []Job{{Name: "elf", Sources: []string{"eventlogfile"}}, {Name: "events", Sources: []string{"soql"}}}
	elf, err := cfg.ForJob("elf")
	if err != nil || elf.OrgList()[1].Sources.SOQL.Enabled {
		t.Fatalf("the elf group: soql %v (%v)", elf.OrgList()[1].Sources.SOQL.Enabled, err)
	}
	o = elf.EventLogFileOptions(elf.OrgList()[1])
	if len(o.OwnedCategories) != 1 || o.OwnedCategories[0] != "login" {
		t.Fatalf("owned categories %v, want login from the full configuration", o.OwnedCategories)
	}
}

// TestPubSubDiscoverySkipsWhatOtherJobGroupsShip: Pub/Sub's discovery owns categories the way
// EventLogFile's does, across job groups (it used to see only its own group's sources).
func TestPubSubDiscoverySkipsWhatOtherJobGroupsShip(t *testing.T) {
	cfg := Defaults()
	cfg.Orgs = []Org{{Name: "us"}}
	s := &cfg.Orgs[0].Sources
	s.PubSub = cfg.Sources.PubSub
	s.PubSub.Enabled, s.PubSub.Topics = true, []string{"*"}
	s.SOQL = SOQLSource{Enabled: true, Objects: []SOQLObject{{Name: "LoginEvent"}}}
	cfg.Jobs = []Job{{Name: "stream", Sources: []string{"pubsub"}}, {Name: "poll", Sources: []string{"soql"}}}
	stream, err := cfg.ForJob("stream")
	if err != nil {
		t.Fatal(err)
	}
	_, o := stream.PubSubOptions(stream.OrgList()[0])
	if len(o.OwnedCategories) != 1 || o.OwnedCategories[0] != "login" {
		t.Fatalf("owned categories %v, want login (soql ships LoginEvent in the other group)", o.OwnedCategories)
	}
	if len(o.Labels) != 1 || o.Labels[0].Name != "org" {
		t.Fatalf("labels %v, want org", o.Labels)
	}
}
