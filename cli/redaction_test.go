package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/demo"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// secretKey is a secret of the configuration as the JSON Schema marks it (writeOnly): its path
// ("[]" for a list entry) and whether it is a map whose values are secrets.
type secretKey struct {
	path  []string
	isMap bool
}

func (k secretKey) String() string { return strings.ReplaceAll(strings.Join(k.path, "."), ".[]", "[]") }

// secretKeys reads the secret keys from the configuration's JSON Schema, so a secret added to
// the configuration later is covered by the tests that use this list without touching them.
func secretKeys(t *testing.T) []secretKey {
	t.Helper()
	raw, err := config.JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	var out []secretKey
	var walk func(node map[string]any, path []string)
	walk = func(node map[string]any, path []string) {
		if items, ok := node["items"].(map[string]any); ok {
			walk(items, append(path[:len(path):len(path)], "[]"))
		}
		props, _ := node["properties"].(map[string]any)
		for name, p := range props {
			prop, ok := p.(map[string]any)
			if !ok {
				continue
			}
			here := append(path[:len(path):len(path)], name)
			if prop["writeOnly"] == true {
				out = append(out, secretKey{path: here, isMap: prop["type"] == "object"})
				continue
			}
			walk(prop, here)
		}
	}
	walk(root, nil)
	if len(out) < 9 {
		t.Fatalf("the schema marks %d secret keys (%v); want at least the 9 known ones", len(out), out)
	}
	return out
}

// setPath sets a value in a YAML document built of maps; "[]" makes a one-entry list (an org
// entry gets a name).
func setPath(doc map[string]any, path []string, v any) {
	for i, seg := range path {
		if i == len(path)-1 {
			doc[seg] = v
			return
		}
		if path[i+1] == "[]" {
			list, _ := doc[seg].([]any)
			if len(list) == 0 {
				list = []any{map[string]any{"name": "acme"}}
				doc[seg] = list
			}
			setPath(list[0].(map[string]any), path[i+2:], v)
			return
		}
		next, ok := doc[seg].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[seg] = next
		}
		doc = next
	}
}

func writeYAML(t *testing.T, dir, name string, doc map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, string(b))
}

// assertNoSecret fails when any output holds a secret.
func assertNoSecret(t *testing.T, what string, secrets []string, outputs ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, out := range outputs {
			if i := strings.Index(out, s); i >= 0 {
				t.Errorf("%s prints the secret %q: ...%s...", what, s, out[max(0, i-200):min(len(out), i+len(s)+50)])
			}
		}
	}
}

// Every secret key of the configuration, given inline or as <key>_file, is scrubbed from all
// that config check, run-once and doctor print, even where the same value turns up in another
// key's message (here lease.name, which a validation message quotes) and the configuration does
// not load.
func TestEverySecretKeyIsRedactedFromAllOutput(t *testing.T) {
	for i, key := range secretKeys(t) {
		for _, viaFile := range []bool{false, true} {
			if viaFile && key.isMap {
				continue // maps have no _file form
			}
			name := key.String()
			if viaFile {
				name += "_file"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				secret := fmt.Sprintf("Sekr3tValue%02dQw%v", i, viaFile)
				doc := map[string]any{"lease": map[string]any{"name": secret}}
				switch {
				case key.isMap:
					setPath(doc, key.path, map[string]any{"X-Auth": secret})
				case viaFile:
					file := writeFile(t, dir, "secret", secret+"\n")
					setPath(doc, append(key.path[:len(key.path)-1:len(key.path)-1], key.path[len(key.path)-1]+"_file"), file)
				default:
					setPath(doc, key.path, secret)
				}
				path := writeYAML(t, dir, "sf2loki.yaml", doc)
				for _, args := range [][]string{
					{"config", "check", "--config", path},
					{"run-once", "--config", path},
					{"doctor", "--timeout", "2s", "--config", path},
				} {
					code, stdout, stderr := run(t, args...)
					if code != ExitConfig || !strings.Contains(stdout+stderr, "lease.name") {
						t.Fatalf("%v: exit %d, want 2 naming lease.name (the echo this test relies on):\n%s", args, code, stderr)
					}
					assertNoSecret(t, strings.Join(args[:2], " "), []string{secret}, stdout, stderr)
				}
			})
		}
	}
}

// urlForms are the ways a credential rides in a URL, as a push URL would carry them.
func urlForms(base, secret string) map[string]string {
	u := strings.TrimPrefix(base, "http://")
	return map[string]string{
		"userinfo":      "http://sf2loki:" + secret + "@" + u,
		"token":         base + "?token=" + secret,
		"access_token":  base + "?tenant=a&access_token=" + secret,
		"api_key":       base + "?api_key=" + secret,
		"password":      base + "?password=" + secret,
		"refresh_token": base + "?refresh_token=" + secret,
		"client_secret": base + "?client_secret=" + secret,
	}
}

// A credential in the Loki URL, in any URL form, never reaches the run report, the final error
// line, the logs of run-once and schedule, doctor's output or the demo banner.
func TestURLCredentialsAreRedactedFromAllOutput(t *testing.T) {
	org := simsf.New(simsf.Options{Seed: 9, Logger: slog.New(slog.DiscardHandler)})
	org.AddUser(demo.User, simsf.AllPermissions())
	const clientSecret = "Cl1entSecretValueZ9"
	if err := org.AddClientCredentialsApp(demo.Client, clientSecret, demo.User); err != nil {
		t.Fatal(err)
	}
	if err := org.Populate(simsf.DataSet{Window: time.Hour, EventTypes: []string{"Login"}, HourlyFiles: -1, DailyFiles: -1,
		LoginHistory: 20, SetupAuditTrail: -1, AuditEvents: -1, LoginEvents: -1, ApiEvents: -1, ApiAnomalyEventStore: -1,
		ApexLogs: -1, LateRows: -1}); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	closed := closedPort(t)
	secrets := []string{clientSecret}

	configFor := func(t *testing.T, lokiURL string, extra map[string]any) string {
		dir := t.TempDir()
		doc := map[string]any{
			"salesforce": map[string]any{"login_url": srv.URL, "auth_mode": "client_credentials", "client_id": demo.Client,
				"client_secret": clientSecret, "max_retries": 0},
			"sources": map[string]any{"soql": map[string]any{"enabled": true, "objects": []any{map[string]any{"name": "LoginHistory", "lookback": "2h"}}}},
			"sink":    map[string]any{"loki": map[string]any{"url": lokiURL, "max_retries": 0, "timeout": "2s"}},
			"state":   map[string]any{"file": map[string]any{"path": filepath.Join(dir, "state.json")}},
			"log":     map[string]any{"level": "debug"},
		}
		for k, v := range extra {
			doc[k] = v
		}
		return writeYAML(t, dir, "sf2loki.yaml", doc)
	}

	for form, lokiURL := range urlForms("http://"+closed+"/loki/api/v1/push", "UrlSecretValueK7") {
		t.Run(form, func(t *testing.T) {
			secrets := append(secrets, "UrlSecretValueK7")
			path := configFor(t, lokiURL, nil)
			code, stdout, stderr := run(t, "run-once", "--config", path)
			if code != ExitUnavailable || !strings.Contains(stdout, `"outcome":"unavailable"`) {
				t.Fatalf("run-once against a closed Loki port: exit %d, want 3 and a report:\n%s\n%s", code, stdout, stderr)
			}
			assertNoSecret(t, "run-once", secrets, stdout, stderr)

			code, stdout, stderr = run(t, "doctor", "--timeout", "5s", "--config", path)
			if code == ExitConfig {
				t.Fatalf("doctor refused the configuration:\n%s", stderr)
			}
			assertNoSecret(t, "doctor", secrets, stdout, stderr)

			bad := configFor(t, strings.Replace(lokiURL, "http://", "ftp://", 1), nil) // quoted by the validation message
			code, stdout, stderr = run(t, "config", "check", "--config", bad)
			if code != ExitConfig || !strings.Contains(stderr, "sink.loki.url") {
				t.Fatalf("config check of an ftp:// URL: exit %d:\n%s", code, stderr)
			}
			assertNoSecret(t, "config check", secrets, stdout, stderr)
		})
	}

	t.Run("schedule", func(t *testing.T) {
		secrets := append(secrets, "UrlSecretValueK7")
		path := configFor(t, urlForms("http://"+closed+"/loki/api/v1/push", "UrlSecretValueK7")["token"],
			map[string]any{"schedule": map[string]any{"spec": "@every 1s", "jitter": "0s", "listen": ""}})
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr testenv.LockedBuffer
		done := make(chan error, 1)
		go func() {
			done <- NewApp(&stdout, &stderr).RunContext(ctx, []string{"sf2loki", "schedule", "--config", path})
		}()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(stderr.String(), "run finished") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("schedule: %v", err)
		}
		if !strings.Contains(stderr.String(), "run finished") {
			t.Fatalf("no run finished within a minute:\n%s", stderr.String())
		}
		assertNoSecret(t, "schedule", secrets, stdout.String(), stderr.String())
	})

	t.Run("demo banner", func(t *testing.T) {
		recv := simloki.Start(t, simloki.Options{})
		u := strings.Replace(recv.PushURL(), "http://", "http://sf2loki:DemoSecretValueP3@", 1) + "?token=DemoSecretValueP4"
		code, stdout, stderr := run(t, "demo", "--runs", "1", "--loki-url", u)
		if code != ExitOK || !strings.Contains(stdout, "Loki receiver") {
			t.Fatalf("demo: exit %d:\n%s\n%s", code, stdout, stderr)
		}
		assertNoSecret(t, "demo", []string{"DemoSecretValueP3", "DemoSecretValueP4"}, stdout, stderr)
	})
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
