package opstest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/doctor"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// doctorReport is the --json output.
type doctorReport struct {
	OK      bool            `json:"ok"`
	Summary map[string]int  `json:"summary"`
	Results []doctor.Result `json:"results"`
}

func (r doctorReport) byID() map[string]doctor.Result {
	m := map[string]doctor.Result{}
	for _, x := range r.Results {
		m[x.ID] = x
	}
	return m
}

// runDoctor runs `sf2loki doctor --json` and decodes the report.
func runDoctor(t *testing.T, cfgPath string, extra ...string) (result, doctorReport) {
	t.Helper()
	res := run(append([]string{"--config", cfgPath, "doctor", "--json", "--timeout", "20s"}, extra...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("doctor output is not JSON: %v\n%s", err, res)
	}
	return res, rep
}

// requireAll asserts that every check ended with one of the statuses, except those listed in
// except (ID -> status).
func requireStatuses(t *testing.T, rep doctorReport, want doctor.Status, except map[string]doctor.Status) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rep.Results {
		w := want
		if s, ok := except[r.ID]; ok {
			w = s
			seen[r.ID] = true
		}
		if r.Status != w {
			t.Errorf("%s: %s %q (fix %q), want %s; details %v", r.ID, r.Status, r.Message, r.Fix, w, r.Details)
		}
	}
	for id := range except {
		if !seen[id] {
			t.Errorf("check %s did not run", id)
		}
	}
}

// doctorEnv is a clean setup on the simulated org, the strict receiver and a file store.
type doctorEnv struct {
	org  *org
	loki *simloki.Running
	s    setup
	cfg  string
}

func newDoctorEnv(t *testing.T, perms simsf.Permissions) *doctorEnv {
	t.Helper()
	o := startOrg(t, perms)
	o.addFiles(t, []string{"Login", "API"}, time.Now().Add(-2*time.Hour), 2, 5)
	l := startLoki(t, simloki.Options{})
	e := &doctorEnv{org: o, loki: l, s: setup{org: o, loki: l.PushURL()}}
	e.cfg = e.s.write(t)
	return e
}

func TestDoctorCleanSetupFileStore(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	res, rep := runDoctor(t, e.cfg)
	if res.code != 0 || !rep.OK {
		t.Fatalf("before the first run: %s", res)
	}
	// Before the first run the document and the lease do not exist: facts, not problems.
	requireStatuses(t, rep, doctor.StatusPass, map[string]doctor.Status{"store.read": doctor.StatusInfo, "lease.read": doctor.StatusInfo})

	if r := run("--config", e.cfg, "run-once"); r.code != 0 {
		t.Fatalf("run-once: %s", r)
	}
	before, err := os.ReadFile(e.s.statePath)
	if err != nil {
		t.Fatal(err)
	}
	res, rep = runDoctor(t, e.cfg)
	if res.code != 0 {
		t.Fatalf("after a run: %s", res)
	}
	requireStatuses(t, rep, doctor.StatusPass, nil)
	after, err := os.ReadFile(e.s.statePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("doctor changed the real document")
	}
	for _, p := range []string{".sf2loki-doctor-probe", ".sf2loki-doctor-probe.lock"} {
		if _, err := os.Stat(e.s.statePath + p); !os.IsNotExist(err) {
			t.Fatalf("the probe's %s is left behind: %v", p, err)
		}
	}
	// The test write is labelled so that it is easy to ignore.
	var found bool
	for _, en := range e.loki.Entries() {
		if en.Label("source") == doctor.TestSource && en.MetadataValue("doctor_run") != "" {
			found = true
		}
	}
	if !found {
		t.Fatal("no doctor test entry with structured metadata reached the receiver")
	}
	table := run("--config", e.cfg, "doctor")
	if table.code != 0 || !strings.Contains(table.stdout, "PASS") || !strings.Contains(table.stdout, "0 FAIL") {
		t.Fatalf("table output: %s", table)
	}
}
