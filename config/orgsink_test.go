package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const orgSinkBase = `
sink:
  loki:
    url: http://loki.example.com/loki/api/v1/push
    tenant_id: shared
    username: global-user
    password: global-pw
    headers: {X-Team: sec}
    labels: {environment: prod}
orgs:
  - name: acme
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [Login]}
    sink:
      loki:
        tenant_id: acme
        labels: {environment: acme-prod}
  - name: globex
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [Login]}
    sink:
      loki:
        url: https://logs.globex.example/insert/loki/api/v1/push
        headers: {AccountID: "12", ProjectID: "3"}
        bearer_token_file: %TOKEN%
  - name: initech
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [Login]}
`

func loadOrgSinks(t *testing.T) *Config {
	t.Helper()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("globex-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return mustLoad(t, strings.ReplaceAll(orgSinkBase, "%TOKEN%", token))
}

// An org's sink takes sink.loki with its own keys over it; another receiver gets none of
// sink.loki's credentials or headers; an org without a sink is sink.loki's.
func TestOrgSinkMerging(t *testing.T) {
	cfg := loadOrgSinks(t)
	orgs := cfg.OrgList()
	acme, globex, initech := orgs[0], orgs[1], orgs[2]

	if !acme.OwnSink || acme.Sink.URL != cfg.Sink.Loki.URL || acme.Sink.TenantID != "acme" ||
		acme.Sink.Username != "global-user" || acme.Sink.Password.Value() != "global-pw" || acme.Sink.Headers["X-Team"] != "sec" {
		t.Errorf("acme (same receiver, own tenant) must keep sink.loki's credentials and headers: %+v", acme.Sink)
	}
	if acme.Sink.Labels["environment"] != "acme-prod" || cfg.Sink.Loki.Labels["environment"] != "prod" {
		t.Errorf("acme's label must override sink.loki's without changing it: %v / %v", acme.Sink.Labels, cfg.Sink.Loki.Labels)
	}
	if !globex.OwnSink || globex.Sink.Username != "" || globex.Sink.Password != "" || globex.Sink.Headers["X-Team"] != "" ||
		globex.Sink.TenantID != "shared" || globex.Sink.BearerToken.Value() != "globex-token" || globex.Sink.Headers["AccountID"] != "12" {
		t.Errorf("globex (another receiver) must get its own token and headers and none of sink.loki's credentials: %+v", globex.Sink)
	}
	if initech.OwnSink || !SameReceiver(initech.Sink, cfg.Sink.Loki) {
		t.Errorf("initech sets no sink: %+v", initech.Sink)
	}
	if !slices.Contains(cfg.Secrets(), "globex-token") {
		t.Error("an org sink's bearer token is not among the secrets the logs redact")
	}

	if got := cfg.DestinationName(acme.Sink); got != "acme" {
		t.Errorf("acme's destination %q, want its tenant", got)
	}
	if got := cfg.DestinationName(globex.Sink); got != "shared@logs.globex.example" {
		t.Errorf("globex's destination %q, want tenant@host", got)
	}
	var names []string
	for _, r := range cfg.Receivers() {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"shared", "acme", "shared@logs.globex.example"}) {
		t.Errorf("receivers %v", names)
	}
	if rs := cfg.Receivers(); rs[1].FirstAtURL || !rs[2].FirstAtURL {
		t.Errorf("acme shares sink.loki's URL, globex does not: %+v", rs)
	}
}

func TestOrgSinkValidation(t *testing.T) {
	_, err := load(t, oneOrgLoki(`        url: ftp://x
        tenant_id: "a|b"
        password: p
        labels: {team: x, org: y, environment: ""}
`))
	wantErrors(t, err, "orgs[0].sink.loki.url", "orgs[0].sink.loki.tenant_id", "orgs[0].sink.loki.username: is required",
		"orgs[0].sink.loki.labels.team: not in the label allowlist", "orgs[0].sink.loki.labels.org: is set per entry",
		"orgs[0].sink.loki.labels.environment: value is empty")
	_, err = load(t, oneOrgLoki("        username: u\n        password: p\n        bearer_token: t\n"))
	wantErrors(t, err, "orgs[0].sink.loki.bearer_token: set either basic auth")

	cfg := mustLoad(t, oneOrgLoki("        url: https://other.example/push\n        tls: {insecure_skip_verify: true}\n")+
		"sink:\n  loki:\n    username: u\n    password: p\n")
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "orgs[0].sink.loki.tls.insecure_skip_verify") || !strings.Contains(w, "sink.loki's credentials are not sent there") {
		t.Errorf("warnings:\n%s", w)
	}
}
