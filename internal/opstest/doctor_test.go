package opstest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/doctor"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
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
	// The test write is labeled so that it is easy to ignore.
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

// checkFault runs doctor on a setup with one injected fault and asserts: exit 1, the named
// check FAILs with a fix mentioning fixHint, the checks that need it are skipped, and every
// other check passes.
func checkFault(t *testing.T, cfg, failID, fixHint string, skipped []string) doctorReport {
	t.Helper()
	res, rep := runDoctor(t, cfg)
	if res.code != 1 || rep.OK {
		t.Fatalf("want exit 1: %s", res)
	}
	except := map[string]doctor.Status{failID: doctor.StatusFail}
	for _, id := range skipped {
		except[id] = doctor.StatusSkip
	}
	requireStatuses(t, rep, doctor.StatusPass, except)
	if r := rep.byID()[failID]; !strings.Contains(r.Fix, fixHint) {
		t.Errorf("%s fix %q does not mention %q (message %q)", failID, r.Fix, fixHint, r.Message)
	}
	return rep
}

// firstRun ships once so that the document and the lease exist (a clean setup is then all
// PASS).
func firstRun(t *testing.T, cfg string) {
	t.Helper()
	if r := run("--config", cfg, "run-once"); r.code != 0 {
		t.Fatalf("run-once: %s", r)
	}
}

func TestDoctorBadJWTKey(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	other, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.s.keyFileFor = filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(e.s.keyFileFor, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := checkFault(t, e.s.write(t), "salesforce.auth", "private_key", []string{
		"salesforce.limits", "salesforce.permissions", "salesforce.eventlogfile.types", "salesforce.eventlogfile.download"})
	if m := rep.byID()["salesforce.auth"].Message; !strings.Contains(m, "invalid assertion") {
		t.Errorf("auth message %q does not say why", m)
	}
}

func TestDoctorMissingEventLogFilePermission(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	if err := e.org.SetPermissions(testUser, simsf.Permissions{APIEnabled: true, ViewSetup: true}); err != nil {
		t.Fatal(err)
	}
	checkFault(t, e.cfg, "salesforce.permissions", "View Event Log Files", []string{
		"salesforce.eventlogfile.types", "salesforce.eventlogfile.download"})
}

// TestDoctorLogFileDownloadForbidden: listing works but downloading a LogFile answers 403
// INSUFFICIENT_ACCESS (an org where the two are granted apart), through a proxy in front of
// the simulated org.
func TestDoctorLogFileDownloadForbidden(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	target, err := url.Parse(e.org.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/LogFile") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `[{"message":"insufficient access rights on object id","errorCode":"INSUFFICIENT_ACCESS"}]`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	e.s.extra = "" // instance_url is a salesforce key: rewrite the file with it
	cfg := e.s.write(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "  max_retries: 1\n", "  max_retries: 1\n  instance_url: "+proxy.URL+"\n", 1))
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := checkFault(t, cfg, "salesforce.eventlogfile.download", "View Event Log Files", nil)
	if m := rep.byID()["salesforce.eventlogfile.download"].Message; !strings.Contains(m, "INSUFFICIENT_ACCESS") {
		t.Errorf("download message %q", m)
	}
}

func TestDoctorLokiRejectsStructuredMetadata(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	e.loki.SetAllowStructuredMetadata(false)
	checkFault(t, e.cfg, "loki.write", "allow_structured_metadata", []string{"loki.ordering"})
}

// TestDoctorLeaseNameDiffersFromFence: the document was fenced under lease sf2loki; a
// deployment configured with another lease name would stop with a configuration error.
func TestDoctorLeaseNameDiffersFromFence(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	e.s.lease = "type: store\n  name: other-deployment"
	rep := checkFault(t, e.s.write(t), "lease.fence", "lease", nil)
	if m := rep.byID()["lease.fence"].Message; !strings.Contains(m, "store/sf2loki") || !strings.Contains(m, "store/other-deployment") {
		t.Errorf("lease.fence message %q does not name both leases", m)
	}
}

// TestDoctorPubSubTopicAccess: GetTopic against the simulated Pub/Sub API; a topic the
// integration user may not subscribe to is a FAIL naming the permission.
func TestDoctorPubSubTopicAccess(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	// Sessions of the org, with the user's topic permissions as they are now.
	auth := func(_ context.Context, c simpubsub.Credentials) (simpubsub.Principal, bool) {
		si, ok := e.org.Session(c.AccessToken)
		if !ok || c.TenantID != si.OrgID {
			return simpubsub.Principal{}, false
		}
		return simpubsub.Principal{OrgID: si.OrgID, Topics: append([]string{}, si.Permissions.Topics...)}, true
	}
	ps := simpubsub.New(simpubsub.Options{Authenticate: auth, Logger: quiet()})
	if _, err := ps.AddTopic("/event/LoginEventStream", simpubsub.LoginEventStreamSchema); err != nil {
		t.Fatal(err)
	}
	l, err := ps.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	e.s.types = []string{"API"} // LoginEventStream ships the login category
	cfg := e.s.write(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "sources:\n", "sources:\n  pubsub:\n    enabled: true\n    topics: [/event/LoginEventStream]\n    endpoint: "+l.Addr+"\n    plaintext: true\n    idle: 200ms\n", 1))
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	firstRun(t, cfg)
	res, rep := runDoctor(t, cfg)
	if res.code != 0 {
		t.Fatalf("clean setup with Pub/Sub: %s", res)
	}
	requireStatuses(t, rep, doctor.StatusPass, nil)
	if _, ok := rep.byID()["salesforce.pubsub.topics"]; !ok {
		t.Fatal("no Pub/Sub check")
	}
	perms := simsf.AllPermissions()
	perms.Topics = nil
	if err := e.org.SetPermissions(testUser, perms); err != nil {
		t.Fatal(err)
	}
	checkFault(t, cfg, "salesforce.pubsub.topics", "Real-Time Event Monitoring", nil)
}

func TestDoctorConfigErrorExits2(t *testing.T) {
	cfg := writeTemp(t, "sink:\n  loki:\n    url: not-a-url\nlease:\n  renew_interval: 1m\n")
	res, rep := runDoctor(t, cfg)
	if res.code != 2 || len(rep.Results) != 1 || rep.Results[0].ID != "config" || rep.Results[0].Status != doctor.StatusFail {
		t.Fatalf("%s", res)
	}
	if d := strings.Join(rep.Results[0].Details, "\n"); !strings.Contains(d, "sink.loki.url") || !strings.Contains(d, "renew_interval") {
		t.Fatalf("the config FAIL does not name the keys: %q", d)
	}
}

// TestDoctorJobGroups: each job group's store and lease are checked under its own prefix.
func TestDoctorJobGroups(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	e.s.extra = "jobs:\n  - name: elf\n    sources: [eventlogfile]\n"
	cfg := e.s.write(t)
	if r := run("--config", cfg, "run-once", "--job", "elf"); r.code != 0 {
		t.Fatal(r)
	}
	res, rep := runDoctor(t, cfg)
	if res.code != 0 {
		t.Fatalf("%s", res)
	}
	requireStatuses(t, rep, doctor.StatusPass, nil)
	r, ok := rep.byID()["job[elf].store.read"]
	if !ok || !strings.Contains(r.Message, "state-elf.json") {
		t.Fatalf("job[elf].store.read: %+v", r)
	}
	if l := rep.byID()["job[elf].lease.fence"]; !strings.Contains(l.Message, "store/sf2loki-elf") {
		t.Fatalf("job[elf].lease.fence: %+v", l)
	}
}
