package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = Main(append([]string{"sf2loki"}, args...), &out, &errw)
	return code, out.String(), errw.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigExampleChecksClean(t *testing.T) {
	dir := t.TempDir()
	code, example, stderr := run(t, "config", "example")
	if code != 0 {
		t.Fatalf("config example exited %d: %s", code, stderr)
	}
	path := writeFile(t, dir, "c.yaml", example)
	// The example enables no source (each is a choice) and names no credentials: as it is, it
	// would ship nothing, which check refuses. With a source and a key it checks clean.
	if code, _, stderr := run(t, "config", "check", "--config", path); code != ExitConfig || !strings.Contains(stderr, "no source is enabled") {
		t.Fatalf("config check of the bare example: exit %d, %s; want exit 2 naming the missing source", code, stderr)
	}
	t.Setenv("SF2LOKI_SOURCES__APEXLOG__ENABLED", "true")
	t.Setenv("SF2LOKI_SALESFORCE__CLIENT_ID", "3MVG9-example")
	t.Setenv("SF2LOKI_SALESFORCE__USERNAME", "integration@example.com")
	t.Setenv("SF2LOKI_SALESFORCE__PRIVATE_KEY_FILE", writeFile(t, dir, "key.pem", string(testKeyPEM(t))))
	code, out, stderr := run(t, "config", "check", "--config", path)
	if code != ExitOK {
		t.Fatalf("config check of the generated example with a source enabled exited %d:\n%s", code, stderr)
	}
	if !strings.Contains(out, "configuration OK") {
		t.Errorf("config check printed %q, want a confirmation", out)
	}
}

func TestConfigCheckRejectsBadConfigs(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.secret", "\n")
	missing := filepath.Join(dir, "absent.secret")
	t.Setenv("SF2LOKI_TEST_PRESENT", "https://loki.example.com/loki/api/v1/push")

	cases := []struct {
		name string
		yaml string
		want []string // substrings of stderr, key path first
	}{
		{"unknown key with suggestion", "sink:\n  loki:\n    urll: http://localhost:3100\n", []string{"sink.loki.urll", `did you mean "url"`}},
		{"unknown section", "lease:\n  duraton: 30s\n", []string{"lease.duraton", `did you mean "duration"`}},
		{"wrong type int", "batch:\n  max_records: lots\n", []string{"batch.max_records", "not an integer"}},
		{"wrong type section", "sink: 5\n", []string{"sink", "expected a mapping"}},
		{"negative duration", "run:\n  max_duration: -1m\n", []string{"run.max_duration", "must not be negative"}},
		{"missing secret file", "sink:\n  loki:\n    username: u\n    password_file: " + missing + "\n", []string{"sink.loki.password_file", "cannot read secret file"}},
		{"empty secret file", "sink:\n  loki:\n    username: u\n    password_file: " + empty + "\n", []string{"sink.loki.password_file", "is empty"}},
		{"unset env interpolation", "sink:\n  loki:\n    url: ${SF2LOKI_TEST_UNSET_VAR}\n", []string{"sink.loki.url", "SF2LOKI_TEST_UNSET_VAR is not set"}},
		{"renew interval above a third", "lease:\n  duration: 30s\n  renew_interval: 11s\n", []string{"lease.renew_interval", "lease.duration/3"}},
		{"bad enum", "state:\n  store: filee\n", []string{"state.store", `did you mean "file"`}},
		{"deadline too short", "run:\n  max_duration: 3m\n  deadline: 2m\n", []string{"run.max_duration", "run.deadline"}},
		{"grace too short", "run:\n  termination_grace: 5s\n", []string{"run.termination_grace", "commit_timeout"}},
		{"lease longer than schedule", "run:\n  schedule_period: 40s\n", []string{"lease.duration", "run.schedule_period"}},
		{"label outside allowlist", "sink:\n  loki:\n    labels:\n      user: bob\n", []string{"sink.loki.labels.user", "allowlist"}},
		{"client credentials on generic host", "salesforce:\n  auth_mode: client_credentials\n  client_id: x\n  client_secret: s3cr3t-value\n", []string{"salesforce.login_url", "My Domain"}},
		{"not yaml", "sink: [\n", []string{"not valid YAML"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "c.yaml", tc.yaml)
			code, _, stderr := run(t, "config", "check", "--config", path)
			if code != ExitConfig {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitConfig, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestConfigCheckReportsEveryProblem(t *testing.T) {
	path := writeFile(t, t.TempDir(), "c.yaml", "batch:\n  max_records: x\nlease:\n  renew_interval: 20s\nlog:\n  lvel: debug\n")
	code, _, stderr := run(t, "config", "check", "--config", path)
	if code != ExitConfig {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, key := range []string{"batch.max_records", "lease.renew_interval", "log.lvel"} {
		if !strings.Contains(stderr, key) {
			t.Errorf("stderr does not name %s:\n%s", key, stderr)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	if code, _, _ := run(t, "config", "check", "--no-such-flag"); code != ExitConfig {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
}

func TestVersionPrintsGoVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.Contains(out, "go1.") || !strings.HasPrefix(out, "sf2loki ") {
		t.Errorf("version: exit %d, output %q", code, out)
	}
}

// One validation path: what run-once refuses at start, config check refuses, with the same
// message and exit code — and a configuration that would ship nothing is refused by both.
func TestConfigCheckRefusesWhatRunOnceRefuses(t *testing.T) {
	dir := t.TempDir()
	key := writeFile(t, dir, "key.pem", string(testKeyPEM(t)))
	base := "salesforce:\n  login_url: https://login.example.com\n  client_id: c\n  username: u@example.com\n  private_key_file: " + key + "\n" +
		"sink:\n  loki:\n    url: http://127.0.0.1:1/loki/api/v1/push\n" +
		"state:\n  store: file\n  file:\n    path: " + filepath.Join(dir, "state.json") + "\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no source enabled", base, "no source is enabled"},
		{"empty configuration", "{}\n", "no source is enabled"},
		{"an exclude pattern the source refuses", base + "sources:\n  eventlogfile:\n    enabled: true\n    event_types: ['*']\n    exclude: [Login_]\n", "exclude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := t.TempDir()
			t.Chdir(wd)
			path := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.yaml)
			code, _, checkErr := run(t, "config", "check", "--config", path)
			if code != ExitConfig || !strings.Contains(checkErr, tc.want) {
				t.Fatalf("config check: exit %d, stderr %q; want exit 2 naming %q", code, checkErr, tc.want)
			}
			code, out, runErr := run(t, "run-once", "--config", path)
			if code != ExitConfig || !strings.Contains(out+runErr, tc.want) {
				t.Fatalf("run-once: exit %d, stdout %q, stderr %q; want exit 2 naming %q", code, out, runErr, tc.want)
			}
			if entries, _ := os.ReadDir(wd); len(entries) != 0 {
				t.Fatalf("a refused configuration left %d files in the working directory", len(entries))
			}
		})
	}
}

// testKeyPEM returns a fresh RSA private key in PEM (PKCS#8).
func testKeyPEM(t *testing.T) []byte {
	t.Helper()
	kp, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return kp.KeyPEM
}

func TestVersionFlagPrintsTheVersionCommandsLine(t *testing.T) {
	_, want, _ := run(t, "version")
	for _, flag := range []string{"--version", "-v"} {
		code, out, stderr := run(t, flag)
		if code != ExitOK || out != want {
			t.Errorf("%s: exit %d, stdout %q (stderr %q); want exit 0 and %q", flag, code, out, stderr, want)
		}
	}
}

// An invalid duration flag names the format it expects; a valid one still arrives.
func TestDurationFlagErrorShowsTheFormat(t *testing.T) {
	for _, args := range [][]string{
		{"run-once", "--max-duration", "5"},
		{"run-once", "--wait=5 minutes"},
		{"schedule", "--max-duration", "ten"},
		{"doctor", "--timeout", "1"},
		{"state", "set", "k", "1", "--wait", "5"}, // a flag after the arguments (positional)
	} {
		code, _, stderr := run(t, args...)
		if code != ExitConfig || !strings.Contains(stderr, "use a Go duration such as 90s, 5m") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and the expected format", args, code, stderr)
		}
	}
	path := writeFile(t, t.TempDir(), "c.yaml", "{}\n")
	code, _, stderr := run(t, "run-once", "--config", path, "--max-duration", "1ms")
	if code != ExitConfig || !strings.Contains(stderr, "run.max_duration: 1ms leaves no time to pull") {
		t.Errorf("--max-duration 1ms: exit %d, stderr %q; want the value to reach the configuration", code, stderr)
	}
}
