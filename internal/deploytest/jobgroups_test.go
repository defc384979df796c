package deploytest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
)

var sf2lokiBinary struct {
	once sync.Once
	path string
	err  error
}

// buildSF2Loki builds ./cmd/sf2loki, statically, once per test binary (skipped under -short).
func buildSF2Loki(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the sf2loki binary; runs without -short")
	}
	sf2lokiBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "sf2loki-deploytest-")
		if err != nil {
			sf2lokiBinary.err = err
			return
		}
		sf2lokiBinary.path = filepath.Join(dir, "sf2loki")
		cmd := exec.Command("go", "build", "-o", sf2lokiBinary.path, "./cmd/sf2loki")
		cmd.Dir = repoRoot(t)
		// Static, as the release image's binary: the node stand-in runs it in a chroot with no
		// C library (make test builds with CGO_ENABLED=0 anyway, so this reuses its packages).
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			sf2lokiBinary.err = fmt.Errorf("go build ./cmd/sf2loki: %w\n%s", err, out)
		}
	})
	if sf2lokiBinary.err != nil {
		t.Fatal(sf2lokiBinary.err)
	}
	return sf2lokiBinary.path
}

// runReport is the part of the run report the test reads.
type runReport struct {
	Outcome  string `json:"outcome"`
	ExitCode int    `json:"exit_code"`
	Epoch    uint64 `json:"epoch"`
	Records  int64  `json:"records"`
	Error    string `json:"error"`
	Sources  map[string]struct {
		Records int64 `json:"records"`
	} `json:"sources"`
}

// runResult is one finished process.
type runResult struct {
	group  string
	code   int
	report runReport
	stderr string
}

// twoGroupsConfig ships EventLogFile (group elf) and SetupAuditTrail plus ApexLog (group
// objects) of one simulated org into the simulated Loki, with file stores in dir.
const twoGroupsConfig = `salesforce:
  login_url: %[1]s
  client_id: 3MVG9-deploytest
  username: integration@example.com
  private_key_file: %[2]s
sources:
  eventlogfile:
    enabled: true
    interval: Hourly
    event_types: [API, URI]
    settle_window: 0s
    lookback: 48h
  soql:
    enabled: true
    objects:
      - name: SetupAuditTrail
        timestamp_field: CreatedDate
        lookback: 1h
        overlap: 0s
  apexlog:
    enabled: true
    lookback: 1h
jobs:
  - name: elf
    sources: [eventlogfile]
  - name: objects
    sources: [soql, apexlog]
sink:
  loki:
    url: %[3]s
state:
  store: file
  file:
    path: %[4]s
lease:
  type: store
log:
  format: json
  level: debug
`

// TestTwoJobGroupsConcurrently is the acceptance test of job groups: two `sf2loki run-once
// --job` processes, one per group, start together against the same file store directory, the
// same simulated org and the same strict simulated Loki, several times with new data in between.
// Every run ends ok (neither is ever busy or fenced by the other), each group's report and
// document hold only its own sources, each document is fenced by its own lease name, and every
// record reaches Loki exactly once.
func TestTwoJobGroupsConcurrently(t *testing.T) {
	bin := buildSF2Loki(t)
	dir := t.TempDir()

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "sf-jwt.key")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	org := simsf.New(simsf.Options{Seed: 11, Logger: slog.New(slog.DiscardHandler)})
	org.AddUser("integration@example.com", simsf.AllPermissions())
	if err := org.AddJWTApp("3MVG9-deploytest", &key.PublicKey, "integration@example.com"); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	lk := simloki.Start(t, simloki.Options{})

	statePath := filepath.Join(dir, "state", "sf2loki.json")
	if err := os.MkdirAll(filepath.Dir(statePath), 0o700); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, twoGroupsConfig, srv.URL, keyPath, lk.PushURL(), statePath), 0o600); err != nil {
		t.Fatal(err)
	}

	want := map[string]int{} // records expected per source label
	var lastRow time.Time    // the newest SetupAuditTrail row inserted
	iterations := testenv.Iterations(3)
	for it := 0; it < iterations; it++ {
		now := time.Now().UTC()
		for _, typ := range []string{"API", "URI"} {
			if _, err := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly,
				LogDate: now.Truncate(time.Hour).Add(-time.Duration(iterations+1-it) * time.Hour), CreatedDate: now.Add(-time.Minute), Rows: 40 + it}); err != nil {
				t.Fatal(err)
			}
			want["eventlogfile"] += 40 + it
		}
		// Rows strictly after every row of earlier iterations and in the past, so each run finds
		// exactly the new ones after its cursor.
		rows := 5 + it
		base := now.Add(-time.Second)
		if next := lastRow.Add(time.Millisecond); next.After(base) {
			base = next
		}
		if wait := time.Until(base.Add(time.Duration(rows) * time.Millisecond)); wait > 0 {
			time.Sleep(wait + 10*time.Millisecond)
		}
		for i := 0; i < rows; i++ {
			lastRow = base.Add(time.Duration(i) * time.Millisecond)
			if _, err := org.Insert("SetupAuditTrail", simsf.Record{"CreatedDate": lastRow,
				"Action": "PermSetAssign", "Section": "Manage Users", "Display": fmt.Sprintf("run %d row %d", it, i)}); err != nil {
				t.Fatal(err)
			}
			want["soql"]++
		}
		if _, err := org.AddApexLog(simsf.ApexLogSpec{LogUser: "integration@example.com", StartTime: now.Add(-30 * time.Second), Body: []byte(fmt.Sprintf("debug log %d", it))}); err != nil {
			t.Fatal(err)
		}
		want["apexlog"]++

		results := runConcurrently(t, bin, cfgPath, "elf", "objects")
		for _, r := range results {
			if r.code != 0 || r.report.Outcome != "ok" {
				t.Fatalf("iteration %d, group %s: exit %d, outcome %q (%s); stderr:\n%s", it, r.group, r.code, r.report.Outcome, r.report.Error, r.stderr)
			}
			var sources []string
			for name, s := range r.report.Sources {
				if s.Records > 0 {
					sources = append(sources, sourceKind(name))
				}
			}
			allowed := map[string][]string{"elf": {"eventlogfile"}, "objects": {"soql", "apexlog"}}[r.group]
			for _, s := range sources {
				if !slices.Contains(allowed, s) {
					t.Errorf("iteration %d: group %s shipped %s (report sources %v)", it, r.group, s, sources)
				}
			}
			if r.report.Epoch != uint64(it+1) {
				t.Errorf("iteration %d: group %s ran at epoch %d, want %d (one claim per run of its own lease)", it, r.group, r.report.Epoch, it+1)
			}
		}
	}

	// Every record exactly once, labeled with its source.
	got := map[string]int{}
	for _, e := range lk.Entries() {
		got[e.Label("source")]++
	}
	for src, n := range want {
		if got[src] != n {
			t.Errorf("Loki holds %d %s entries, want %d (all: %v)", got[src], src, n, got)
		}
	}
	if d := lk.Duplicates(); len(d) != 0 {
		t.Errorf("%d duplicate entries in Loki", len(d))
	}

	// Each group's own document: its own lease in the fence, only its own keys.
	for group, prefixes := range map[string][]string{"elf": {"eventlogfile:"}, "objects": {"soql:", "apexlog"}} {
		path := filepath.Join(dir, "state", "sf2loki-"+group+".json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("group %s document: %v", group, err)
		}
		doc, _, err := store.Decode(path, raw)
		if err != nil {
			t.Fatal(err)
		}
		if doc.Fence == nil || doc.Fence.Lease.Name != "sf2loki-"+group || doc.Fence.Epoch != uint64(iterations) {
			t.Errorf("group %s document fence %+v, want lease sf2loki-%s at epoch %d", group, doc.Fence, group, iterations)
		}
		var keys []string
		for k := range doc.Checkpoints {
			keys = append(keys, k)
			if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
				t.Errorf("group %s document holds the key %s of another group", group, k)
			}
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			t.Errorf("group %s document has no checkpoints", group)
		}
	}
	if _, err := os.Stat(statePath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ungrouped document %s was written (err %v)", statePath, err)
	}
}

// sourceKind maps a report's source name ("eventlogfile", "soql:SetupAuditTrail", ...) to the
// source it belongs to.
func sourceKind(name string) string {
	for _, s := range []string{"eventlogfile", "soql", "apexlog", "pubsub"} {
		if strings.HasPrefix(name, s) {
			return s
		}
	}
	return name
}

// runConcurrently starts one run-once process per group at the same moment and waits for all.
func runConcurrently(t *testing.T, bin, cfgPath string, groups ...string) []runResult {
	t.Helper()
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	procs := make([]*proc, len(groups))
	for i, g := range groups {
		p := &proc{cmd: exec.CommandContext(t.Context(), bin, "run-once", "--config", cfgPath, "--job", g)}
		p.cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		procs[i] = p
	}
	for _, p := range procs {
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]runResult, len(groups))
	for i, p := range procs {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			out[i].code = ee.ExitCode()
		default:
			t.Fatalf("group %s: %v", groups[i], err)
		}
		out[i].group, out[i].stderr = groups[i], p.stderr.String()
		lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out[i].report); err != nil {
			t.Fatalf("group %s: the last stdout line is not a run report: %v\nstdout:\n%s\nstderr:\n%s", groups[i], err, p.stdout.String(), p.stderr.String())
		}
	}
	return out
}
