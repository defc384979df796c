package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/shape"
)

// sfCreds is a minimal valid salesforce section for configs that enable a source.
const sfCreds = "salesforce:\n  client_id: id\n  username: u\n  private_key: |\n    -----BEGIN PRIVATE KEY-----\n    MIIB\n    -----END PRIVATE KEY-----\n"

func wantErrors(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want errors mentioning %q, got none", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
}

func TestShapeConfigLoadsAndMaps(t *testing.T) {
	salt := filepath.Join(t.TempDir(), "salt")
	if err := os.WriteFile(salt, []byte("a-salt-of-enough-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, `shape:
  salt_file: `+salt+`
  transforms:
    - op: hash
      fields: [USER_ID]
    - op: regex_replace
      fields: [URI]
      pattern: '\?.*$'
    - op: drop_row
      name: limits
      match: {URI: "*/limits"}
  metadata: [REQUEST_ID]
  types:
    - type: Login
      labels: [LOGIN_STATUS]
      sample_rate: 0.25
`)
	o := cfg.Shape.ShapeOptions()
	if string(o.Salt) != "a-salt-of-enough-bytes" {
		t.Errorf("salt = %q, want the file content", o.Salt)
	}
	if len(o.Transforms) != 3 || o.Transforms[2].Match["URI"] != "*/limits" || o.Transforms[1].Pattern != `\?.*$` {
		t.Errorf("transforms = %+v", o.Transforms)
	}
	if len(o.Types) != 1 || o.Types[0].SampleRate != 0.25 || o.Types[0].Labels[0] != "LOGIN_STATUS" {
		t.Errorf("types = %+v", o.Types)
	}
	if _, err := shape.New(o); err != nil {
		t.Errorf("shape.New of a loaded config: %v", err)
	}
	for _, s := range cfg.Secrets() {
		if s == "a-salt-of-enough-bytes" {
			return
		}
	}
	t.Error("the salt is not among the secrets redacted from logs")
}

func TestShapeConfigErrorsNameKeys(t *testing.T) {
	_, err := load(t, `shape:
  transforms:
    - op: hash
      fields: [USER_ID]
    - op: regex_replace
      fields: [URI]
      pattern: '(unclosed'
    - op: drop_field
      fields: [login_status]
    - op: shred
      fields: [X]
  types:
    - type: Login
      labels: [LOGIN_STATUS, event_type]
      sample_rate: 1.5
`)
	wantErrors(t, err,
		"shape.salt_file: is required by the hash transform",
		"shape.transforms[1].pattern: is not a valid regular expression",
		`shape.transforms[2].fields: drops field "LOGIN_STATUS", which types[0] promotes`,
		"shape.transforms[3].op",
		"shape.types[0].labels[1]",
		"shape.types[0].sample_rate",
	)
}

func TestEventLogFileConfig(t *testing.T) {
	cfg := mustLoad(t, sfCreds+"sources:\n  eventlogfile:\n    enabled: true\n    event_types: ['*']\n    exclude: [ApexExecution]\n")
	e := cfg.Sources.EventLogFile
	if e.Interval != "Hourly" || e.Lookback.D().Hours() != 24 || e.SettleWindow.D().Minutes() != 5 || e.PageSize != 1000 ||
		e.TimestampColumn != "TIMESTAMP_DERIVED" || !e.TypedValues || e.DownloadMaxAge.D().Hours() != 24 {
		t.Errorf("defaults = %+v", e)
	}
	_, err := load(t, sfCreds+"sources:\n  eventlogfile:\n    enabled: true\n    interval: Weekly\n    page_size: 5000\n    max_row_bytes: 1KiB\n")
	wantErrors(t, err, "sources.eventlogfile.event_types: is required", "sources.eventlogfile.interval", "sources.eventlogfile.page_size", "sources.eventlogfile.max_row_bytes")
	_, err = load(t, sfCreds+"sources:\n  eventlogfile:\n    enabled: true\n    event_types: [API]\n    max_row_bytes: 2GiB\n")
	wantErrors(t, err, "sources.eventlogfile.max_row_bytes: 2GiB is too large; at most 1GiB")
	_, err = load(t, sfCreds+"sources:\n  eventlogfile:\n    enabled: true\n    event_types: [Login, \"Login'--\", login]\n")
	wantErrors(t, err, "sources.eventlogfile.event_types[1]", `sources.eventlogfile.event_types[2]: "login" is listed twice`)
}

func TestClaimsOfEventLogFile(t *testing.T) {
	s := Sources{EventLogFile: EventLogFileSource{Enabled: true, EventTypes: []string{"Login", "*"}}}
	got := s.Claims("orgs[1].sources")
	if len(got) != 2 || got[0] != (shape.Claim{Source: "eventlogfile", Name: "Login", Path: "orgs[1].sources.eventlogfile.event_types[0]"}) || got[1].Name != "*" {
		t.Fatalf("claims = %+v", got)
	}
	if c := (Sources{EventLogFile: EventLogFileSource{EventTypes: []string{"Login"}}}).Claims("sources"); len(c) != 0 {
		t.Fatalf("a disabled source claims %v", c)
	}
}

// TestOverlapGuardRefusesToStart is the acceptance test: LoginEvent through soql and Login
// through eventlogfile feed one category; config check refuses it, naming the category and both
// keys, unless allow_overlap is set.
func TestOverlapGuardRefusesToStart(t *testing.T) {
	base := sfCreds + `sources:
  soql:
    enabled: true
    objects:
      - name: LoginEvent
        big_object: true
  eventlogfile:
    enabled: true
    event_types: [API, Login]
`
	_, err := load(t, base)
	wantErrors(t, err, `sources.soql.objects[0].name: event category "login"`, "soql LoginEvent (sources.soql.objects[0].name)",
		"eventlogfile Login (sources.eventlogfile.event_types[1])", "sources.allow_overlap")
	if strings.Contains(err.Error(), `"api"`) {
		t.Errorf("API overlaps nothing: %v", err)
	}
	if _, err := load(t, base+"  allow_overlap: true\n"); err != nil {
		t.Fatalf("allow_overlap must bypass the guard: %v", err)
	}
	// An alias makes a custom object part of a category.
	_, err = load(t, sfCreds+`sources:
  soql:
    enabled: true
    objects:
      - name: Audit_Login__c
  eventlogfile:
    enabled: true
    event_types: [Login]
shape:
  category_aliases: {Audit_Login__c: login}
`)
	wantErrors(t, err, `event category "login"`, "Audit_Login__c")
	// Per org: two orgs may each ship the category once.
	org := func(name string) string {
		return "  - name: " + name + "\n    salesforce:\n      client_id: id\n      username: u\n      private_key: |\n        -----BEGIN PRIVATE KEY-----\n        MIIB\n        -----END PRIVATE KEY-----\n"
	}
	cfg := "orgs:\n" + org("eu") + "    sources:\n      eventlogfile:\n        enabled: true\n        event_types: [Login]\n" +
		org("us") + "    sources:\n      soql:\n        enabled: true\n        objects:\n          - name: LoginHistory\n"
	if _, err := load(t, cfg); err != nil {
		t.Fatalf("different orgs do not overlap: %v", err)
	}
}
