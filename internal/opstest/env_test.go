package opstest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/cli"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// childEnv makes the test binary behave as the sf2loki binary (real child processes for the
// race and crash tests).
const childEnv = "SF2LOKI_OPSTEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr))
	}
	testenv.Main(m)
}

const (
	testUser     = "integration@example.com"
	testClientID = "3MVG9-opstest"
)

var testKey = sync.OnceValue(func() *simsf.KeyPair {
	kp, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		panic(err)
	}
	return kp
})

// org is a running simulated org with a JWT app for testUser.
type org struct {
	*simsf.Org
	URL     string
	KeyFile string
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startOrg starts a simulated org on the real clock; the integration user has perms.
func startOrg(t testing.TB, perms simsf.Permissions) *org {
	t.Helper()
	o := simsf.New(simsf.Options{Seed: 11, Logger: quiet()})
	o.AddUser(testUser, perms)
	if err := o.AddJWTApp(testClientID, testKey().Certificate, testUser); err != nil {
		t.Fatal(err)
	}
	srv, err := o.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	keyFile := filepath.Join(t.TempDir(), "sf.key")
	if err := os.WriteFile(keyFile, testKey().KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return &org{Org: o, URL: srv.URL, KeyFile: keyFile}
}

// addFiles adds one Hourly file per type per hour for the hours ending at end, rows each.
func (o *org) addFiles(t testing.TB, types []string, end time.Time, hours, rows int) {
	t.Helper()
	end = end.UTC().Truncate(time.Hour)
	for _, typ := range types {
		for h := hours; h >= 1; h-- {
			logDate := end.Add(-time.Duration(h) * time.Hour)
			if _, err := o.AddEventLogFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly,
				LogDate: logDate, CreatedDate: logDate.Add(70 * time.Minute), Sequence: 1, Rows: rows}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// startLoki starts a strict receiver on the real clock.
func startLoki(t testing.TB, opts simloki.Options) *simloki.Running {
	t.Helper()
	return simloki.Start(t, opts)
}

// setup is what a test configuration is made of.
type setup struct {
	org        *org
	loki       string   // push URL
	types      []string // EventLogFile types (default Login, API)
	state      string   // YAML of the state section body (default a file store in a temp dir)
	lease      string   // YAML of the lease section body (default the store lease)
	extra      string   // more top-level YAML
	statePath  string   // the file store's path when state is empty
	keyFileFor string   // overrides the private key file
}

// write writes the configuration file and returns its path.
func (s *setup) write(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	types := s.types
	if len(types) == 0 {
		types = []string{"Login", "API"}
	}
	if s.state == "" {
		if s.statePath == "" {
			s.statePath = filepath.Join(dir, "state.json")
		}
		s.state = "store: file\n  file:\n    path: " + s.statePath
	}
	if s.lease == "" {
		s.lease = "type: store\n  name: sf2loki"
	}
	key := s.org.KeyFile
	if s.keyFileFor != "" {
		key = s.keyFileFor
	}
	y := fmt.Sprintf(`salesforce:
  login_url: %s
  client_id: %s
  username: %s
  private_key_file: %s
  max_retries: 1
sources:
  eventlogfile:
    enabled: true
    interval: Hourly
    event_types: [%s]
    settle_window: 0s
    lookback: 72h
sink:
  loki:
    url: %s
    max_retries: 1
    min_backoff: 10ms
    max_backoff: 50ms
state:
  %s
lease:
  %s
log:
  level: warn
  format: text
%s`, s.org.URL, testClientID, testUser, key, strings.Join(types, ", "), s.loki, s.state, s.lease, s.extra)
	path := filepath.Join(dir, "sf2loki.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is the outcome of one command line.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs sf2loki in process.
func run(args ...string) result {
	var o, e bytes.Buffer
	code := cli.Main(append([]string{"sf2loki"}, args...), &o, &e)
	return result{code: code, stdout: o.String(), stderr: e.String()}
}

// child starts sf2loki as a child process (the test binary in child mode).
func child(ctx context.Context, t testing.TB, stdout, stderr *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// runChild runs sf2loki as a child process to the end.
func runChild(t testing.TB, args ...string) result {
	t.Helper()
	var o, e bytes.Buffer
	cmd := child(t.Context(), t, &o, &e, args...)
	err := cmd.Wait()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: o.String(), stderr: e.String()}
}
