package deploytest

import (
	"bufio"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
)

// unitFile is a parsed systemd unit: section -> key -> values (a key may repeat).
type unitFile map[string]map[string][]string

func parseUnit(t testing.TB, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: cannot parse %q", path, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// last returns the effective (last) value of a key.
func (u unitFile) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// systemdTool returns the path of systemd-analyze, skipping the test where it is missing.
func systemdTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed here")
	}
	return p
}

// unitCopies copies the units to a temporary directory with ExecStart pointing at an existing
// executable (verify checks that the command exists), and returns the directory.
func unitCopies(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"sf2loki.service", "sf2loki.timer"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), "/usr/local/bin/sf2loki", exe)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSystemdUnitsVerify runs systemd-analyze verify on the service and the timer (no output
// allowed), and systemd-analyze security on the service, which must score 2.0 or better.
func TestSystemdUnitsVerify(t *testing.T) {
	bin := systemdTool(t)
	dir := unitCopies(t)
	out, err := exec.CommandContext(t.Context(), bin, "verify", "--man=no",
		filepath.Join(dir, "sf2loki.service"), filepath.Join(dir, "sf2loki.timer")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(t.Context(), bin, "security", "--offline=yes", "--threshold=20", "--no-pager",
		filepath.Join(dir, "sf2loki.service")).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (or the check failed): %v\n%s", err, out)
	}
	if m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out); m != nil {
		t.Logf("exposure level %s", m[1])
	}
}

// TestSystemdUnitsShape checks what the units promise: a oneshot run-once with a transient
// user, its state under its StateDirectory, a read-only system, no new privileges, busy and
// fenced counted as success but nothing else, and a timer with a random delay.
func TestSystemdUnitsShape(t *testing.T) {
	root := filepath.Join(repoRoot(t), "deploy", "systemd")
	svc := parseUnit(t, filepath.Join(root, "sf2loki.service"))
	tmr := parseUnit(t, filepath.Join(root, "sf2loki.timer"))
	want := map[string]string{
		"Type": "oneshot", "DynamicUser": "yes", "StateDirectory": "sf2loki", "ProtectSystem": "strict",
		"NoNewPrivileges": "yes", "PrivateTmp": "yes", "ProtectHome": "yes", "CapabilityBoundingSet": "",
		"RestrictSUIDSGID": "yes", "MemoryDenyWriteExecute": "yes",
	}
	for k, v := range want {
		if _, ok := svc["Service"][k]; !ok || svc.last("Service", k) != v {
			t.Errorf("sf2loki.service %s=%q, want %q", k, svc.last("Service", k), v)
		}
	}
	if exec := svc.last("Service", "ExecStart"); !strings.Contains(exec, " run-once ") || !strings.Contains(exec, "--config /etc/sf2loki/config.yaml") {
		t.Errorf("ExecStart %q", exec)
	}
	ok := strings.Fields(svc.last("Service", "SuccessExitStatus"))
	slices.Sort(ok)
	if !slices.Equal(ok, []string{"5", "6"}) {
		t.Errorf("SuccessExitStatus %v, want exactly 5 6 (busy, fenced): 1, 2, 3, 4 and 7 are failures", ok)
	}
	if tmr.last("Timer", "RandomizedDelaySec") == "" || tmr.last("Timer", "Unit") != "sf2loki.service" || tmr.last("Install", "WantedBy") != "timers.target" {
		t.Errorf("timer %+v", tmr)
	}
}

// TestSystemdTimeBudget reads the timer's calendar (expanded by systemd-analyze calendar), the
// service's TimeoutStartSec (A) and TimeoutStopSec (G) and its environment, and checks them with
// the example config: the environment matches the units, config.Load accepts it (with the key
// as a credential), the document lies under the StateDirectory, and every invariant holds.
func TestSystemdTimeBudget(t *testing.T) {
	bin := systemdTool(t)
	root := filepath.Join(repoRoot(t), "deploy", "systemd")
	svc := parseUnit(t, filepath.Join(root, "sf2loki.service"))
	tmr := parseUnit(t, filepath.Join(root, "sf2loki.timer"))

	out, err := exec.CommandContext(t.Context(), bin, "calendar", "--iterations=30", tmr.last("Timer", "OnCalendar")).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze calendar: %v\n%s", err, out)
	}
	var elapses []time.Time
	for _, m := range regexp.MustCompile(`(?m)(?:Next elapse|Iter\. #\d+): \w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)`).FindAllSubmatch(out, -1) {
		at, err := time.Parse(time.DateTime, string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		elapses = append(elapses, at)
	}
	if len(elapses) < 10 {
		t.Fatalf("could not read the calendar's elapses:\n%s", out)
	}
	period := time.Duration(1<<63 - 1)
	for i := 1; i < len(elapses); i++ {
		period = min(period, elapses[i].Sub(elapses[i-1]))
	}
	if tmr.last("Timer", "FixedRandomDelay") != "yes" {
		// A fresh random delay per tick can bring two runs closer than the calendar's period.
		d, err := time.ParseDuration(tmr.last("Timer", "RandomizedDelaySec"))
		if err != nil {
			t.Fatal(err)
		}
		period -= d
	}
	A, err := time.ParseDuration(svc.last("Service", "TimeoutStartSec"))
	if err != nil {
		t.Fatal(err)
	}
	G, err := time.ParseDuration(svc.last("Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range svc["Service"]["Environment"] {
		for _, kv := range strings.Fields(e) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	for k, want := range map[string]time.Duration{"SF2LOKI_RUN__SCHEDULE_PERIOD": period, "SF2LOKI_RUN__DEADLINE": A, "SF2LOKI_RUN__TERMINATION_GRACE": G} {
		if got, err := time.ParseDuration(env[k]); err != nil || got != want {
			t.Errorf("Environment %s=%q, the units say %s", k, env[k], want)
		}
	}

	creds := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cred, _, _ := strings.Cut(svc.last("Service", "LoadCredential"), ":")
	if err := os.WriteFile(filepath.Join(creds, cred), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := []string{"CREDENTIALS_DIRECTORY=" + creds}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.LoadOptions{Path: filepath.Join(root, "config.yaml"), Environ: environ})
	if err != nil {
		t.Fatalf("config.Load of deploy/systemd/config.yaml with the unit's environment: %v", err)
	}
	stateDir := "/var/lib/" + svc.last("Service", "StateDirectory") + "/"
	if cfg.State.Store != "file" || !strings.HasPrefix(cfg.State.File.Path, stateDir) {
		t.Errorf("state %s %s is not a file under %s", cfg.State.Store, cfg.State.File.Path, stateDir)
	}
	if cfg.Lease.Type != "store" {
		t.Errorf("lease.type %s: a timer has no Kubernetes API; the lease belongs in the document", cfg.Lease.Type)
	}
	b := cfg.Budget()
	checks := []struct {
		ok   bool
		what string
	}{
		{b.Startup+b.AcquireWait+b.MaxDuration+b.Release+b.Margin <= A, "T0+W+D+Rel+margin <= TimeoutStartSec"},
		{b.IntakeWindow() > 0, "an intake window"},
		{G >= b.Commit+b.Release+b.Margin, "TimeoutStopSec >= C+Rel+margin"},
		{b.RenewInterval <= b.LeaseDuration/3, "R <= L/3"},
		{b.LeaseDuration+b.ClockSkew+b.Startup < period, "L+K+T0 < period"},
		{A < period, "TimeoutStartSec < period (a timer does not start a unit that is still running)"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("time budget: %s does not hold (A %s, G %s, S %s, budget %+v)", c.what, A, G, period, b)
		}
	}
}
