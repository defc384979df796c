package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// groupsConfig writes a configuration with two job groups (elf: eventlogfile, apex: apexlog),
// each with its own document, and an unreachable org (the state commands are offline).
func groupsConfig(t *testing.T) (cfg, dir string) {
	t.Helper()
	dir = t.TempDir()
	key := writeFile(t, dir, "key.pem", string(testKeyPEM(t)))
	cfg = writeFile(t, dir, "sf2loki.yaml", `salesforce:
  login_url: http://127.0.0.1:1
  client_id: c
  username: u@example.com
  private_key_file: `+key+`
sources:
  eventlogfile:
    enabled: true
    event_types: [Login, API]
  apexlog:
    enabled: true
sink:
  loki:
    url: http://127.0.0.1:1/loki/api/v1/push
state:
  file:
    path: `+filepath.Join(dir, "state.json")+`
lease:
  name: groups
log:
  level: error
jobs:
  - name: elf
    sources: [eventlogfile]
  - name: apex
    sources: [apexlog]
`)
	return cfg, dir
}

// TestStateImportRefusesKeysNoSourceReads: importing job group elf's export into job group
// apex's document (a wrong --job) would leave keys no source of apex reads while apex starts
// from its lookback. state import applies state set's rule to every key: the whole import is
// refused, nothing is written, and the error names the keys and the likely slip.
func TestStateImportRefusesKeysNoSourceReads(t *testing.T) {
	cfg, dir := groupsConfig(t)
	const value = `{"v":1,"created":"2020-01-01T00:00:00.000Z","file_id":"0AT000000000999AAA","row":0,"done":true}`
	for _, key := range []string{"eventlogfile:Login", "eventlogfile:API"} {
		if code, out, errs := run(t, "--config", cfg, "state", "set", "--job", "elf", "--wait", "1s", key, value); code != 0 {
			t.Fatalf("state set --job elf %s: exit %d\n%s%s", key, code, out, errs)
		}
	}
	code, exp, errs := run(t, "--config", cfg, "state", "export", "--job", "elf")
	if code != 0 {
		t.Fatalf("state export --job elf: exit %d\n%s", code, errs)
	}
	dump := writeFile(t, dir, "elf-export.json", exp)

	code, out, errs := run(t, "--config", cfg, "state", "import", "--job", "apex", "--wait", "1s", dump)
	if code != ExitConfig {
		t.Fatalf("state import of job group elf's export into job group apex: exit %d (%s), want 2", code, strings.TrimSpace(out))
	}
	for _, want := range []string{"no configured source reads the 2 keys eventlogfile:API, eventlogfile:Login", "--job", "org=", "Nothing was changed"} {
		if !strings.Contains(errs, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state-apex.json")); !os.IsNotExist(err) {
		t.Errorf("a refused import wrote the document of job group apex (stat: %v)", err)
	}
}
