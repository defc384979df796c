package config

import (
	"fmt"
	"testing"
	"time"
)

func TestSOQLConfigDefaultsAndMapping(t *testing.T) {
	cfg := mustLoad(t, sfCreds+`sources:
  soql:
    enabled: true
    objects:
      - name: LoginHistory
      - name: LoginEvent
        big_object: true
        overlap: 0s
        fields: [EventIdentifier, EventDate, Username, SourceIp]
`)
	objs := cfg.Sources.SOQL.Objects
	if len(objs) != 2 {
		t.Fatalf("objects = %+v", objs)
	}
	lh := objs[0].SourceObject()
	if lh.Lookback != time.Hour || lh.Overlap != 5*time.Minute || lh.MaxOverlapIDs != 500 || lh.PageSize != 200 ||
		lh.BufferRows != 2000 || lh.Settle != 0 || lh.BigObject {
		t.Errorf("LoginHistory defaults = %+v", lh)
	}
	le := objs[1].SourceObject()
	if !le.BigObject || le.Overlap >= 0 || len(le.Fields) != 4 {
		t.Errorf("LoginEvent = %+v (overlap 0s must map to a negative Overlap: off)", le)
	}
}

func TestSOQLConfigValidation(t *testing.T) {
	_, err := load(t, sfCreds+"sources:\n  soql:\n    enabled: true\n")
	wantErrors(t, err, "sources.soql.objects: is required")

	_, err = load(t, sfCreds+`sources:
  soql:
    enabled: true
    objects:
      - name: "Login History"
      - name: Audit__c
        timestamp_field: "CreatedDate'--"
        fields: [Id, "Owner.Name;"]
        where: "Status = 'open"
      - name: LoginEvent
        big_object: true
        timestamp_field: CreatedDate
        where: "Username = 'x'"
        page_size: 500
      - name: audit__c
      - name: LoginHistory
        lookback: 0s
`)
	wantErrors(t, err,
		"sources.soql.objects[0].name",
		"sources.soql.objects[1].timestamp_field",
		"sources.soql.objects[1].fields[1]",
		"sources.soql.objects[1].where: has an unterminated string literal",
		"sources.soql.objects[2].timestamp_field: a Big Object is read on its index field EventDate",
		"sources.soql.objects[2].where: Big Objects can only be filtered",
		"sources.soql.objects[2].page_size: 500 is above 200",
		`sources.soql.objects[3].name: "audit__c" is also objects[1]`,
		"sources.soql.objects[4].lookback: must be positive",
	)

	_, err = load(t, sfCreds+`sources:
  soql:
    enabled: true
    objects:
      - name: Audit__c
        where: "Status = 'x' ORDER BY Name"
`)
	wantErrors(t, err, "sources.soql.objects[0].where: may not contain ORDER")
}

// TestSOQLOverlapGuard: LoginEvent through soql and Login through eventlogfile feed one
// category; the configuration is refused, naming it, unless allow_overlap is set.
func TestSOQLOverlapGuard(t *testing.T) {
	body := `sources:
  %s
  eventlogfile:
    enabled: true
    event_types: [Login, API]
  soql:
    enabled: true
    objects:
      - name: LoginEvent
        big_object: true
`
	_, err := load(t, sfCreds+fmt.Sprintf(body, ""))
	wantErrors(t, err, `sources.soql.objects[0].name: event category "login"`, "sources.allow_overlap")
	mustLoad(t, sfCreds+fmt.Sprintf(body, "allow_overlap: true"))
}

func TestApexLogConfig(t *testing.T) {
	cfg := mustLoad(t, sfCreds+"sources:\n  apexlog:\n    enabled: true\n    users: [ann@example.com]\n")
	o := cfg.Sources.ApexLog.ApexLogOptions()
	if o.Lookback != time.Hour || o.MaxBodyBytes != 5<<20 || o.DownloadMaxAge != 2*time.Hour || o.PageSize != 200 ||
		len(o.Users) != 1 || o.Overlap != 5*time.Minute || o.MaxOverlapIDs != 500 || o.NoLateProbe {
		t.Errorf("apexlog options = %+v", o)
	}
	// overlap 0 turns the window off (the option's own zero would mean its default).
	o = mustLoad(t, sfCreds+"sources:\n  apexlog:\n    enabled: true\n    overlap: 0s\n    max_overlap_ids: 20\n    late_probe: false\n").Sources.ApexLog.ApexLogOptions()
	if o.Overlap >= 0 || o.MaxOverlapIDs != 20 || !o.NoLateProbe {
		t.Errorf("apexlog options with the window and probe off = %+v", o)
	}
	_, err := load(t, sfCreds+"sources:\n  apexlog:\n    enabled: true\n    users: [\"o'hara@example.com\"]\n    page_size: 5000\n    max_body_bytes: 0\n")
	wantErrors(t, err, "sources.apexlog.users[0]", "sources.apexlog.page_size", "sources.apexlog.max_body_bytes")
	_, err = load(t, sfCreds+"sources:\n  apexlog:\n    enabled: true\n    max_body_bytes: 3GiB\n")
	wantErrors(t, err, "sources.apexlog.max_body_bytes: 3GiB is too large; at most 1GiB")
}
