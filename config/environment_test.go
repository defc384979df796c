package config

import "testing"

func TestEnvironmentPicksTheLoginHost(t *testing.T) {
	cases := []struct {
		name, yaml, want, err string
	}{
		{"default", "", "https://login.salesforce.com", ""},
		{"sandbox", "  environment: sandbox\n", "https://test.salesforce.com", ""},
		{"production", "  environment: production\n", "https://login.salesforce.com", ""},
		{"my domain wins over the environment", "  environment: sandbox\n  login_url: https://acme--dev.sandbox.my.salesforce.com\n", "https://acme--dev.sandbox.my.salesforce.com", ""},
		{"a production my domain with production", "  environment: production\n  login_url: https://acme.my.salesforce.com\n", "https://acme.my.salesforce.com", ""},
		{"agreeing generic host", "  environment: sandbox\n  login_url: https://test.salesforce.com\n", "https://test.salesforce.com", ""},
		{"login_url alone keeps working", "  login_url: https://test.salesforce.com\n", "https://test.salesforce.com", ""},
		{"sandbox against the production host", "  environment: sandbox\n  login_url: https://login.salesforce.com\n", "", "salesforce.environment: is sandbox but login_url login.salesforce.com is a production login host"},
		{"production against a sandbox my domain", "  environment: production\n  login_url: https://acme--uat.sandbox.my.salesforce.com\n", "", "salesforce.environment: is production but login_url"},
		{"unknown", "  environment: sandbx\n", "", `salesforce.environment: "sandbx" is not one of production, sandbox; did you mean "sandbox"?`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, sfCreds+c.yaml)
			if c.err != "" {
				wantErrors(t, err, c.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Salesforce.EffectiveLoginURL(); got != c.want {
				t.Errorf("login URL = %s, want %s", got, c.want)
			}
		})
	}
	cfg := mustLoad(t, "orgs:\n  - name: uat\n    salesforce:\n      environment: sandbox\n      client_id: id\n      username: u\n      private_key: |\n        -----BEGIN PRIVATE KEY-----\n        MIIB\n        -----END PRIVATE KEY-----\n")
	if got := cfg.OrgList()[0].Salesforce.EffectiveLoginURL(); got != "https://test.salesforce.com" {
		t.Errorf("orgs[0] login URL = %s", got)
	}
}
