package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// simWorld is a simulated org with a JWT app, a strict receiver and a directory for a
// configuration, shared by the tests of the issue-21 features (proxy, limits, start).
type simWorld struct {
	org      *simsf.Org
	sfURL    string
	receiver *simloki.Running
	dir      string
	keyPath  string
	logLevel string // of the configurations written; default warn
}

func newSimWorld(t *testing.T, seed int64) *simWorld {
	t.Helper()
	return startSimWorld(t, simsf.Options{Seed: seed})
}

// startSimWorld is a simWorld whose org is built with opts (its logger discards).
func startSimWorld(t *testing.T, opts simsf.Options) *simWorld {
	t.Helper()
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	org := simsf.New(opts)
	org.AddUser("feature@example.com", simsf.AllPermissions())
	if err := org.AddJWTApp("3MVG9-feature", keys.Certificate, "feature@example.com"); err != nil {
		t.Fatal(err)
	}
	sf, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sf.Close() })
	w := &simWorld{org: org, sfURL: sf.URL, receiver: simloki.Start(t, simloki.Options{}), dir: t.TempDir()}
	w.keyPath = filepath.Join(w.dir, "key.pem")
	if err := os.WriteFile(w.keyPath, keys.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// config writes a configuration: the org's salesforce section (plus salesforceExtra, indented
// under it), the given sources section body, the receiver as sink and a state file, then rest.
func (w *simWorld) config(t *testing.T, salesforceExtra, sources, rest string) string {
	t.Helper()
	level := w.logLevel
	if level == "" {
		level = "warn"
	}
	yaml := fmt.Sprintf(`salesforce:
  login_url: %s
  client_id: 3MVG9-feature
  username: feature@example.com
  private_key_file: %s
%ssources:
%ssink:
  loki:
    url: %s
state:
  file:
    path: %s
lease:
  name: feature-test
log:
  level: %s
%s`, w.sfURL, w.keyPath, salesforceExtra, sources, w.receiver.PushURL(), filepath.Join(w.dir, "state.json"), level, rest)
	path := filepath.Join(w.dir, "sf2loki.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOnce runs `sf2loki run-once` on cfgPath and returns its report and stderr.
func runOnce(t *testing.T, cfgPath string) (*job.Report, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"sf2loki", "run-once", "--config", cfgPath}, &stdout, &stderr)
	var rep job.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, no report: %v\nstdout: %s\nstderr: %s", code, err, stdout.String(), stderr.String())
	}
	return &rep, stderr.String()
}
