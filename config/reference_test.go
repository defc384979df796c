package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// A ${scheme:ref} value goes to LoadOptions.Reference; ${NAME} still reads the environment.
func TestReferencesResolveThroughTheHook(t *testing.T) {
	var asked []string
	ref := func(r string) (string, error) {
		asked = append(asked, r)
		switch r {
		case "secretsmanager:arn:aws:secretsmanager:us-east-1:1:secret:loki-AbCdEf#password":
			return "hunter2", nil
		case "ssm:/sf2loki/url":
			return "https://loki.example.com", nil
		}
		return "", errors.New("no such reference")
	}
	yamlText := "sink:\n  loki:\n    url: ${ssm:/sf2loki/url}/loki/api/v1/push\n    username: ${USER_NAME}\n" +
		"    password: ${secretsmanager:arn:aws:secretsmanager:us-east-1:1:secret:loki-AbCdEf#password}\n"
	path := t.TempDir() + "/c.yaml"
	writeFile(t, path, yamlText)
	cfg, err := Load(LoadOptions{Path: path, Environ: []string{"USER_NAME=sf"}, Reference: ref})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sink.Loki.URL != "https://loki.example.com/loki/api/v1/push" || cfg.Sink.Loki.Password.Value() != "hunter2" || cfg.Sink.Loki.Username != "sf" {
		t.Fatalf("url %q password %q username %q", cfg.Sink.Loki.URL, cfg.Sink.Loki.Password.Value(), cfg.Sink.Loki.Username)
	}
	if len(asked) != 2 {
		t.Fatalf("references asked: %q", asked)
	}

	if _, err := Load(LoadOptions{Path: path, Environ: []string{"USER_NAME=sf"}}); err == nil || !strings.Contains(err.Error(), "secret reference") {
		t.Fatalf("without a resolver: %v, want an error naming the secret reference", err)
	}
	bad := t.TempDir() + "/bad.yaml"
	writeFile(t, bad, "sink:\n  loki:\n    password: ${ssm:/missing}\n")
	if _, err := Load(LoadOptions{Path: bad, Reference: ref}); err == nil || !strings.Contains(err.Error(), "sink.loki.password: no such reference") {
		t.Fatalf("a failing reference: %v, want the key and the resolver's error", err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
