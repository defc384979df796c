package opstest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/store"
)

// gate is a Loki endpoint in front of the strict receiver that holds every push until
// released: a run-once child is then provably mid-batch (lease held, document claimed, push in
// flight) for as long as the test needs.
type gate struct {
	URL     string
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
	opened  sync.Once
}

func newGate(t *testing.T, rcv *simloki.Running) *gate {
	t.Helper()
	g := &gate{arrived: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			g.once.Do(func() { close(g.arrived) })
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
		rcv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.open(); srv.Close() })
	g.URL = srv.URL + simloki.PushPath
	return g
}

func (g *gate) open() { g.opened.Do(func() { close(g.release) }) }

// waitArrived waits until a push is held at the gate.
func (g *gate) waitArrived(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the run never pushed; stderr:\n%s", stderr)
	}
}

func readDoc(t *testing.T, path string) (*store.Document, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := store.Decode(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return d, b
}

// raceEnv is a file-store deployment whose run-once children block in their first push.
type raceEnv struct {
	org  *org
	rcv  *simloki.Running
	gate *gate
	s    setup
	cfg  string
}

func newRaceEnv(t *testing.T) *raceEnv {
	t.Helper()
	o := startOrg(t, simsf.AllPermissions())
	o.addFiles(t, []string{"Login"}, time.Now().Add(-2*time.Hour), 2, 5)
	rcv := startLoki(t, simloki.Options{})
	g := newGate(t, rcv)
	e := &raceEnv{org: o, rcv: rcv, gate: g, s: setup{org: o, loki: g.URL, types: []string{"Login"},
		lease: "type: store\n  name: sf2loki\n  duration: 60s\n  renew_interval: 20s",
		extra: "run:\n  push_timeout: 50s\n"}}
	e.cfg = e.s.write(t)
	// sink.loki.timeout must cover the time the gate holds a push.
	b, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "    max_retries: 1\n    min_backoff", "    max_retries: 1\n    timeout: 45s\n    min_backoff", 1))
	if err := os.WriteFile(e.cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// startRun starts run-once as a child process; it blocks at the gate.
func (e *raceEnv) startRun(t *testing.T) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := child(context.Background(), t, &out, &errb, "--config", e.cfg, "run-once", "--strict-exit-codes")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e.gate.waitArrived(t, cmd, &errb)
	return cmd, &out, &errb
}

const operatorValue = `{"v":1,"created":"2020-01-01T00:00:00.000Z","file_id":"0AT000000000999AAA","row":0,"done":true}`

// TestStateSetWhileRunOnceMidBatch is the acceptance of `state set` racing a real run-once
// process: without --force it refuses after --wait and the document stays byte-identical;
// with --force the job ends fenced and the operator's value survives its attempted commit.
func TestStateSetWhileRunOnceMidBatch(t *testing.T) {
	e := newRaceEnv(t)
	cmd, out, errb := e.startRun(t)
	_, before := readDoc(t, e.s.statePath)

	// state show during the run: read-only, never blocks.
	if r := run("--config", e.cfg, "state", "show"); r.code != 0 || !strings.Contains(r.stdout, "fence:") {
		t.Fatalf("state show during a run: %s", r)
	}

	refused := run("--config", e.cfg, "state", "set", "eventlogfile:Login", operatorValue, "--wait", "300ms")
	if refused.code != 5 || !strings.Contains(refused.stderr, "refused") || !strings.Contains(refused.stderr, "held by") {
		t.Fatalf("state set without --force while the job runs: %s", refused)
	}
	_, after := readDoc(t, e.s.statePath)
	if !bytes.Equal(before, after) {
		t.Fatalf("a refused state set changed the document:\nbefore %s\nafter  %s", before, after)
	}

	forced := run("--config", e.cfg, "state", "set", "eventlogfile:Login", operatorValue, "--wait", "2s", "--force")
	if forced.code != 0 || !strings.Contains(forced.stderr, "took the lease over") {
		t.Fatalf("state set --force: %s", forced)
	}
	doc, _ := readDoc(t, e.s.statePath)
	opEpoch := doc.FenceEpoch()

	e.gate.open() // the job's push completes; its commit must be fenced
	err := cmd.Wait()
	var rep job.Report
	if jerr := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rep); jerr != nil {
		t.Fatalf("run report: %v (wait %v)\nstdout %s\nstderr %s", jerr, err, out, errb)
	}
	if rep.Outcome != job.OutcomeFenced || cmd.ProcessState.ExitCode() != 6 {
		t.Fatalf("the job ended %s (exit %d), want fenced (6)\nstderr %s", rep.Outcome, cmd.ProcessState.ExitCode(), errb)
	}
	if rep.Epoch >= opEpoch {
		t.Fatalf("job epoch %d, operator epoch %d", rep.Epoch, opEpoch)
	}
	doc, _ = readDoc(t, e.s.statePath)
	if got := compact(t, doc.Checkpoints["eventlogfile:Login"].Value); got != operatorValue {
		t.Fatalf("the operator's value did not survive the job's commit: %s", got)
	}
	if doc.FenceEpoch() != opEpoch || doc.Writer.Epoch != opEpoch {
		t.Fatalf("someone wrote after the operator: fence %d writer %+v (operator epoch %d)", doc.FenceEpoch(), doc.Writer, opEpoch)
	}
	if e.rcv.Count() == 0 {
		t.Fatal("the job's push never reached the receiver")
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStateCommands walks show, set, delete, export, import and fence raise-floor on a file
// store after a real run.
func TestStateCommands(t *testing.T) {
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	doc, _ := readDoc(t, e.s.statePath)
	epoch0 := doc.FenceEpoch()

	show := run("--config", e.cfg, "state", "show", "--key", "eventlogfile:*")
	if show.code != 0 || !strings.Contains(show.stdout, "eventlogfile:Login") || !strings.Contains(show.stdout, "eventlogfile:API") {
		t.Fatalf("state show: %s", show)
	}
	js := run("--config", e.cfg, "state", "show", "--json", "--key", "*Login")
	var view struct {
		Checkpoints map[string]store.Checkpoint `json:"checkpoints"`
		Fence       *store.Fence                `json:"fence"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &view); err != nil || len(view.Checkpoints) != 1 || view.Fence.Epoch != epoch0 {
		t.Fatalf("state show --json: %v %s", err, js)
	}

	if r := run("--config", e.cfg, "state", "set", "eventlogfile:Login", operatorValue, "--wait", "1s"); r.code != 0 {
		t.Fatalf("state set: %s", r)
	}
	doc, _ = readDoc(t, e.s.statePath)
	if got := compact(t, doc.Checkpoints["eventlogfile:Login"].Value); got != operatorValue || doc.FenceEpoch() != epoch0+1 {
		t.Fatalf("after set: value %s, fence %d (want %d)", got, doc.FenceEpoch(), epoch0+1)
	}
	if r := run("--config", e.cfg, "state", "set", "eventlogfile:Login", "{broken", "--wait", "1s"); r.code != 2 {
		t.Fatalf("broken JSON must be refused: %s", r)
	}
	// A key no configured source reads (a typo), or a value its source cannot use (it would
	// restart the key from its lookback), is refused before anything is written.
	for _, bad := range []struct{ key, value, want string }{
		{"eventlogfile:Loign", operatorValue, "no configured source reads the key eventlogfile:Loign"},
		{"custom:key", "legacy-string", "no configured source reads the key custom:key"},
		{"eventlogfile:Login", `{"v":1,"created":"yesterday","file_id":"0AT000000000999AAA","row":0}`, "cannot use this value"},
	} {
		if r := run("--config", e.cfg, "state", "set", bad.key, bad.value, "--wait", "1s"); r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Fatalf("state set %s %s: %s; want exit 2 saying %q", bad.key, bad.value, r, bad.want)
		}
	}
	if doc2, _ := readDoc(t, e.s.statePath); doc2.FenceEpoch() != epoch0+1 {
		t.Fatal("a refused set bumped the epoch")
	}
	if r := run("--config", e.cfg, "state", "set", "__fence_epoch__", "9"); r.code != 2 {
		t.Fatalf("the legacy fence key must be refused: %s", r)
	}
	// An unknown key is a usage error (exit 2, never retried), not an internal error.
	if r := run("--config", e.cfg, "state", "delete", "no:such:key"); r.code != 2 || !strings.Contains(r.stderr, "no checkpoint no:such:key") {
		t.Fatalf("deleting an unknown key: %s", r)
	}
	doc, _ = readDoc(t, e.s.statePath)
	if doc.FenceEpoch() != epoch0+1 {
		t.Fatal("a refused delete bumped the epoch")
	}
	if r := run("--config", e.cfg, "state", "delete", "eventlogfile:Login"); r.code != 0 {
		t.Fatalf("state delete: %s", r)
	}
	doc, _ = readDoc(t, e.s.statePath)
	if _, ok := doc.Checkpoints["eventlogfile:Login"]; ok || doc.FenceEpoch() != epoch0+2 {
		t.Fatalf("after delete: %+v", doc)
	}

	if r := run("--config", e.cfg, "state", "fence", "raise-floor", "40"); r.code != 0 {
		t.Fatalf("raise-floor: %s", r)
	}
	doc, _ = readDoc(t, e.s.statePath)
	if doc.FenceEpoch() != 40 {
		t.Fatalf("fence %d after raise-floor 40", doc.FenceEpoch())
	}
	if r := run("--config", e.cfg, "state", "fence", "raise-floor", "12"); r.code != 0 || !strings.Contains(r.stdout, "nothing to do") {
		t.Fatalf("raise-floor below the fence: %s", r)
	}
	// The next run continues above the raised floor.
	firstRun(t, e.cfg)
	doc, _ = readDoc(t, e.s.statePath)
	if doc.FenceEpoch() != 41 {
		t.Fatalf("the run after raise-floor 40 claimed epoch %d", doc.FenceEpoch())
	}

	exp := run("--config", e.cfg, "state", "export")
	if exp.code != 0 || strings.Contains(exp.stdout, `"fence"`) || strings.Contains(exp.stdout, `"writer"`) || !strings.Contains(exp.stdout, "eventlogfile:Login") {
		t.Fatalf("state export must carry the checkpoints and no fence: %s", exp)
	}
	// Import refuses a document that already holds checkpoints.
	dump := t.TempDir() + "/export.json"
	if err := os.WriteFile(dump, []byte(exp.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run("--config", e.cfg, "state", "import", dump); r.code != 2 || !strings.Contains(r.stderr, "empty") {
		t.Fatalf("import into a non-empty document: %s", r)
	}
}

// TestLeaseShowAndReleaseStoreLease: a run killed mid-batch leaves the store lease held; lease
// release refuses a live holder unless it is named (or --force), and the next run then
// starts at once.
func TestLeaseShowAndReleaseStoreLease(t *testing.T) {
	e := newRaceEnv(t)
	cmd, _, _ := e.startRun(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	doc, _ := readDoc(t, e.s.statePath)
	holder, epoch := doc.Fence.Holder, doc.FenceEpoch()

	show := run("--config", e.cfg, "lease", "show", "--json")
	var v struct {
		Holder string `json:"holder"`
		State  string `json:"state"`
		Epoch  uint64 `json:"epoch"`
	}
	if err := json.Unmarshal([]byte(show.stdout), &v); err != nil || v.Holder != holder || v.State != "held" || v.Epoch != epoch {
		t.Fatalf("lease show: %v %s", err, show)
	}
	if r := run("--config", e.cfg, "lease", "release"); r.code != 5 || !strings.Contains(r.stderr, holder) {
		t.Fatalf("releasing a live holder without --holder or --force: %s", r)
	}
	if r := run("--config", e.cfg, "lease", "release", "--holder", "someone-else/x"); r.code != 5 {
		t.Fatalf("releasing with the wrong --holder: %s", r)
	}
	if _, after := readDoc(t, e.s.statePath); !bytes.Contains(after, []byte(holder)) {
		t.Fatal("a refused release changed the fence")
	}
	if r := run("--config", e.cfg, "lease", "release", "--holder", holder); r.code != 0 {
		t.Fatalf("lease release --holder: %s", r)
	}
	doc, _ = readDoc(t, e.s.statePath)
	if !doc.Fence.Released || doc.FenceEpoch() != epoch+1 {
		t.Fatalf("after release: %+v", doc.Fence)
	}
	if r := run("--config", e.cfg, "lease", "release"); r.code != 0 || !strings.Contains(r.stdout, "already free") {
		t.Fatalf("releasing a free lease: %s", r)
	}
	// A released lease does not expire: show says it is free and names no expiry.
	if r := run("--config", e.cfg, "lease", "show"); r.code != 0 || !strings.Contains(r.stdout, "free (released") || strings.Contains(r.stdout, "expires") {
		t.Fatalf("lease show of a released lease: %s", r)
	}
	e.gate.open()
	r := run("--config", e.cfg, "run-once", "--strict-exit-codes")
	if r.code != 0 || !strings.Contains(r.stdout, `"outcome":"ok"`) {
		t.Fatalf("the run after the release: %s", r)
	}
}

// TestE2EStateExportImportFileToS3 moves a document from the file store to S3 with `state export
// | state import` (two real processes and a pipe): the checkpoints are identical, the fence is
// not carried, and a run on S3 continues from them.
func TestE2EStateExportImportFileToS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	bucket := srv.NewBucket(t)
	e := newDoctorEnv(t, simsf.AllPermissions())
	firstRun(t, e.cfg)
	if r := run("--config", e.cfg, "state", "fence", "raise-floor", "30"); r.code != 0 {
		t.Fatal(r)
	}
	src, _ := readDoc(t, e.s.statePath)

	to := e.s
	to.state = s3State(srv, bucket, "sf2loki/state.json", "")
	s3cfg := to.write(t)

	exp := exec.Command(os.Args[0], "--config", e.cfg, "state", "export")
	imp := exec.Command(os.Args[0], "--config", s3cfg, "state", "import", "-")
	for _, c := range []*exec.Cmd{exp, imp} {
		c.Env = append(os.Environ(), childEnv+"=1")
	}
	pipe, err := exp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var impOut, impErr, expErr bytes.Buffer
	imp.Stdout, imp.Stderr, exp.Stderr = &impOut, &impErr, &expErr
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	if err := exp.Run(); err != nil {
		t.Fatalf("export: %v\n%s", err, expErr.String())
	}
	if err := imp.Wait(); err != nil {
		t.Fatalf("import: %v\n%s%s", err, impOut.String(), impErr.String())
	}

	show := run("--config", s3cfg, "state", "show", "--json")
	var dst struct {
		Object      string                      `json:"object"`
		Checkpoints map[string]store.Checkpoint `json:"checkpoints"`
		Fence       *store.Fence                `json:"fence"`
	}
	if err := json.Unmarshal([]byte(show.stdout), &dst); err != nil {
		t.Fatalf("%v: %s", err, show)
	}
	if !strings.HasPrefix(dst.Object, "s3://") || len(dst.Checkpoints) != len(src.Checkpoints) || len(src.Checkpoints) == 0 {
		t.Fatalf("imported %d checkpoints into %s, the file has %d", len(dst.Checkpoints), dst.Object, len(src.Checkpoints))
	}
	for k, cp := range src.Checkpoints {
		if got := compact(t, dst.Checkpoints[k].Value); got != compact(t, cp.Value) {
			t.Errorf("%s: %s on S3, %s in the file", k, got, compact(t, cp.Value))
		}
	}
	if dst.Fence == nil || dst.Fence.Epoch >= 30 {
		t.Fatalf("the fence traveled with the export: %+v", dst.Fence)
	}
	before := e.loki.Count()
	r := run("--config", s3cfg, "run-once", "--strict-exit-codes")
	if r.code != 0 || !strings.Contains(r.stdout, `"outcome":"ok"`) || e.loki.Count() != before {
		t.Fatalf("a run on S3 after the import must continue from the imported cursors (nothing to ship): %s", r)
	}
	// Importing again refuses: the target is no longer empty.
	if r := run("--config", s3cfg, "state", "import", writeTemp(t, run("--config", e.cfg, "state", "export").stdout)); r.code != 2 {
		t.Fatalf("a second import: %s", r)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := t.TempDir() + "/data"
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
