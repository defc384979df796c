package config_test

import (
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/config"
)

// The values of credential headers are secrets; other header values are not, so they are not
// scrubbed from every line that happens to contain them.
func TestSecretsIncludeCredentialHeaders(t *testing.T) {
	path := writeTemp(t, "sink:\n  loki:\n    headers:\n      Authorization: Basic c2YybG9raTpzZWNyZXQ=\n      X-Scope-OrgID: prod\n"+
		"metrics:\n  otlp:\n    headers:\n      X-API-Key: otlp-key-value\n")
	var announced []string
	cfg, err := config.Load(config.LoadOptions{Path: path, Environ: []string{}, OnSecret: func(s string) { announced = append(announced, s) }})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Secrets()
	for _, want := range []string{"Basic c2YybG9raTpzZWNyZXQ=", "otlp-key-value"} {
		if !slices.Contains(got, want) || !slices.Contains(announced, want) {
			t.Errorf("%q is not a secret: Secrets() = %q, announced %q", want, got, announced)
		}
	}
	if slices.Contains(got, "prod") {
		t.Errorf("X-Scope-OrgID's value is taken for a secret: %q", got)
	}
}
