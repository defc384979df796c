package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// The simulated org's integration user and connected app of the adversarial suite.
const (
	advUser   = "integration@adversarial.example.com"
	advClient = "3MVG9-sf2loki-adversarial"
	advELF    = "API" // the EventLogFile type the suite ships (LoginHistory covers logins)
)

var advKey struct {
	once sync.Once
	kp   *simsf.KeyPair
	err  error
}

// advKeyPair returns one RSA key pair for every scenario of the test binary.
func advKeyPair(t *testing.T) *simsf.KeyPair {
	t.Helper()
	advKey.once.Do(func() { advKey.kp, advKey.err = simsf.NewKeyPair(time.Now()) })
	if advKey.err != nil {
		t.Fatal(advKey.err)
	}
	return advKey.kp
}

// receiver is where the children push: the strict simulated Loki, or VictoriaLogs (e2e).
type receiver interface {
	pushURL() string
	// lines returns every line received, duplicates included.
	lines(t *testing.T) []string
}

type simReceiver struct{ r *simloki.Running }

func (s simReceiver) pushURL() string { return s.r.PushURL() }

func (s simReceiver) lines(*testing.T) []string {
	var out []string
	for _, e := range s.r.Entries() {
		out = append(out, e.Line)
	}
	for _, e := range s.r.Duplicates() {
		out = append(out, e.Line)
	}
	return out
}

type victoriaReceiver struct{ vl *testenv.VictoriaLogs }

func (v victoriaReceiver) pushURL() string { return v.vl.PushURL() }

func (v victoriaReceiver) lines(t *testing.T) []string {
	var out []string
	for _, row := range v.vl.Query(t, "*") {
		if m, ok := row["_msg"].(string); ok {
			out = append(out, m)
		}
	}
	return out
}

// login is one LoginHistory row the parent inserted.
type login struct {
	id string // 15 characters
	at time.Time
}

// logFile is one EventLogFile the parent added; its rows carry ROW_ID <tag>-<n>, n from 1.
type logFile struct {
	typ     string
	id      string
	created time.Time
	rows    int
	tag     string
}

// world is one scenario: a simulated org, a receiver, a directory for configurations and
// journals, and everything the parent inserted.
type world struct {
	t       *testing.T
	dir     string
	org     *simsf.Org
	sfURL   string
	keyPath string
	recv    receiver
	sim     *simloki.Running // nil with a real receiver

	mu       sync.Mutex
	nchild   int
	journals []string
	cuts     []time.Time // when the document was deleted: each starts a new history
	logins   []login
	files    []logFile
	running  []*child
}

// long skips a multi-process scenario that takes more than a few seconds under -short (make
// unit); make test and make soak run it.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process adversarial scenario; runs without -short (make test, make soak)")
	}
}

// newWorld starts an org and the strict simulated receiver.
func newWorld(t *testing.T) *world {
	t.Helper()
	r := simloki.Start(t, simloki.Options{})
	w := newWorldWith(t, simReceiver{r})
	w.sim = r
	return w
}

// newWorldWith starts an org for the given receiver.
func newWorldWith(t *testing.T, recv receiver) *world {
	t.Helper()
	kp := advKeyPair(t)
	org := simsf.New(simsf.Options{Seed: time.Now().UnixNano()})
	org.AddUser(advUser, simsf.AllPermissions())
	if err := org.AddJWTApp(advClient, kp.Certificate, advUser); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "sf.key")
	if err := os.WriteFile(keyPath, kp.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, dir: dir, org: org, sfURL: srv.URL, keyPath: keyPath, recv: recv}
	t.Cleanup(w.killAll)
	return w
}

// insertLogins adds n LoginHistory rows with increasing LoginTime (now) and ids.
func (w *world) insertLogins(n int) {
	w.t.Helper()
	if n <= 0 {
		return
	}
	recs := make([]simsf.Record, n)
	ats := make([]time.Time, n)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range recs {
		ats[i] = now
		recs[i] = simsf.Record{"LoginTime": now, "UserId": "005000000000001AAA", "LoginType": "Application",
			"Status": "Success", "SourceIp": fmt.Sprintf("198.51.100.%d", i%250+1)}
	}
	ids, err := w.org.Insert("LoginHistory", recs...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, id := range ids {
		w.logins = append(w.logins, login{id: id[:15], at: ats[i]})
	}
}

// insertOldLogin adds one LoginHistory row dated at (for rejections by age).
func (w *world) insertOldLogin(at time.Time) string {
	w.t.Helper()
	ids, err := w.org.Insert("LoginHistory", simsf.Record{"LoginTime": at, "UserId": "005000000000001AAA",
		"LoginType": "Application", "Status": "Success", "SourceIp": "192.0.2.1"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logins = append(w.logins, login{id: ids[0][:15], at: at.UTC().Truncate(time.Millisecond)})
	return ids[0][:15]
}

// addLogFile adds an hourly EventLogFile of the suite's type with rows rows created now.
func (w *world) addLogFile(rows int) {
	w.t.Helper()
	now := time.Now().UTC()
	w.addLogFileAt(advELF, now, now.Add(-time.Minute), rows)
}

// addLogFileAt adds an hourly EventLogFile of type typ created at created, whose rows happened
// at rowTime.
func (w *world) addLogFileAt(typ string, created, rowTime time.Time, rows int) {
	w.t.Helper()
	w.mu.Lock()
	tag := fmt.Sprintf("f%d", len(w.files)+1)
	w.mu.Unlock()
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,ROW_ID\n")
	ts := rowTime.UTC().Format("2006-01-02T15:04:05.000Z")
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "%s,%s,%s-%d\n", typ, ts, tag, i)
	}
	created = created.UTC().Truncate(time.Millisecond)
	id, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly,
		LogDate: rowTime.UTC().Truncate(time.Hour), CreatedDate: created, Body: []byte(b.String())})
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files = append(w.files, logFile{typ: typ, id: id, created: created, rows: rows, tag: tag})
}

// setup is the configuration of the children of one scenario.
type setup struct {
	store     string // file (default) or s3
	statePath string // file store: the document (default <dir>/state.json)
	s3        *testenv.S3
	bucket    string

	leaseType  string // store (default) or kubernetes
	leaseName  string // default sf2loki
	kubeconfig string
	namespace  string
	// L, R, K and the acquire wait.
	leaseDuration, renew, skew, acquireWait time.Duration

	maxRecords  int // batch.max_records (default 20)
	pushEntries int // sink.loki.batch_max_entries (default 5)
	maxDuration time.Duration
	pushTimeout time.Duration
	elf         bool
	elfTypes    []string // default [advELF]
	lookback    time.Duration
	onReject    string
	noRestamp   bool // sink.loki.restamp: false (entries too old are refused, not moved)
	deadLetter  string
	spec        string
	jitter      time.Duration
}

func (s setup) withDefaults(w *world) setup {
	if s.store == "" {
		s.store = "file"
	}
	if s.statePath == "" {
		s.statePath = filepath.Join(w.dir, "state.json")
	}
	if s.leaseType == "" {
		s.leaseType = "store"
	}
	if s.leaseName == "" {
		s.leaseName = "sf2loki"
	}
	if s.leaseDuration == 0 {
		s.leaseDuration = 2 * time.Second
	}
	if s.renew == 0 {
		s.renew = s.leaseDuration * 3 / 10
	}
	if s.skew == 0 {
		s.skew = 200 * time.Millisecond
	}
	if s.maxRecords == 0 {
		s.maxRecords = 20
	}
	if s.pushEntries == 0 {
		s.pushEntries = 5
	}
	if s.maxDuration == 0 {
		s.maxDuration = 30 * time.Second
	}
	if s.pushTimeout == 0 {
		s.pushTimeout = 5 * time.Second
	}
	if s.lookback == 0 {
		s.lookback = 2 * time.Hour
	}
	if s.onReject == "" {
		s.onReject = "drop"
	}
	if s.spec == "" {
		s.spec = "@every 1s"
	}
	if len(s.elfTypes) == 0 {
		s.elfTypes = []string{advELF}
	}
	return s
}

// writeConfig writes the configuration file of s and returns its path.
func (w *world) writeConfig(name string, s setup) string {
	w.t.Helper()
	s = s.withDefaults(w)
	var b strings.Builder
	fmt.Fprintf(&b, "salesforce:\n  login_url: %s\n  client_id: %s\n  username: %s\n  private_key_file: %s\n  timeout: 10s\n  max_retries: 1\n",
		w.sfURL, advClient, advUser, w.keyPath)
	fmt.Fprintf(&b, "sources:\n  soql:\n    enabled: true\n    objects:\n      - name: LoginHistory\n        lookback: %s\n", s.lookback)
	if s.elf {
		fmt.Fprintf(&b, "  eventlogfile:\n    enabled: true\n    interval: Hourly\n    event_types: [%s]\n    lookback: %s\n    settle_window: 0s\n", strings.Join(s.elfTypes, ", "), s.lookback)
	}
	fmt.Fprintf(&b, "sink:\n  loki:\n    url: %q\n    timeout: %s\n    max_retries: 1\n    min_backoff: 50ms\n    max_backoff: 200ms\n    batch_max_entries: %d\n    on_permanent_reject: %s\n",
		w.recv.pushURL(), s.pushTimeout, s.pushEntries, s.onReject)
	if s.deadLetter != "" {
		fmt.Fprintf(&b, "    dead_letter_path: %s\n", s.deadLetter)
	}
	if s.noRestamp {
		b.WriteString("    restamp: false\n")
	}
	switch s.store {
	case "file":
		fmt.Fprintf(&b, "state:\n  store: file\n  file:\n    path: %s\n", s.statePath)
	case "s3":
		fmt.Fprintf(&b, "state:\n  store: s3\n  s3:\n    bucket: %s\n    key: sf2loki/state.json\n    endpoint: %s\n    region: %s\n    path_style: true\n    access_key_id: %s\n    secret_access_key: %s\n",
			s.bucket, s.s3.Endpoint, s.s3.Region, s.s3.AccessKey, s.s3.SecretKey)
	default:
		w.t.Fatalf("unknown store %q", s.store)
	}
	fmt.Fprintf(&b, "lease:\n  type: %s\n  name: %s\n  duration: %s\n  renew_interval: %s\n  max_clock_skew: %s\n  acquire_wait: %s\n",
		s.leaseType, s.leaseName, s.leaseDuration, s.renew, s.skew, s.acquireWait)
	if s.leaseType == "kubernetes" {
		fmt.Fprintf(&b, "  namespace: %s\n  kubeconfig: %s\n", s.namespace, s.kubeconfig)
	}
	fmt.Fprintf(&b, "run:\n  max_duration: %s\n  push_timeout: %s\n  commit_timeout: 3s\n  release_timeout: 1s\n  startup_reserve: 1s\n  margin: 1s\n  termination_grace: 10s\n",
		s.maxDuration, s.pushTimeout)
	fmt.Fprintf(&b, "batch:\n  max_records: %d\n", s.maxRecords)
	fmt.Fprintf(&b, "schedule:\n  spec: %q\n  jitter: %s\n  listen: \"\"\n", s.spec, s.jitter)
	b.WriteString("log:\n  level: info\n  format: json\n")
	path := filepath.Join(w.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// childSpec is one child process to start.
type childSpec struct {
	name   string
	config string
	// args follow the command; the command is run-once unless args starts with another.
	args []string
	env  map[string]string
}

// child is a running child process.
type child struct {
	name       string
	cmd        *exec.Cmd
	stdout     bytes.Buffer
	stderrPath string
	journal    string
	started    time.Time
	cancel     context.CancelFunc
	done       chan struct{}
	res        result
}

// result is how a child ended.
type result struct {
	name   string
	code   int            // exit code; -1 when a signal ended it
	signal syscall.Signal // the signal that ended it
	report *job.Report    // the last stdout line, parsed; nil if none
	stderr string
	took   time.Duration
}

func (r result) String() string {
	s := fmt.Sprintf("%s: exit %d", r.name, r.code)
	if r.signal != 0 {
		s = fmt.Sprintf("%s: killed by %v", r.name, r.signal)
	}
	if r.report != nil {
		s += fmt.Sprintf(" outcome %s epoch %d records %d commits %d", r.report.Outcome, r.report.Epoch, r.report.Records, r.report.Commits)
		if r.report.Error != "" {
			s += " error: " + r.report.Error
		}
	}
	return s
}

// outcome returns the report's outcome, or "" without a report.
func (r result) outcome() job.Outcome {
	if r.report == nil {
		return ""
	}
	return r.report.Outcome
}

// start launches a child; it is killed at the end of the test if still running.
func (w *world) start(spec childSpec) *child {
	w.t.Helper()
	w.mu.Lock()
	w.nchild++
	n := w.nchild
	journal := filepath.Join(w.dir, fmt.Sprintf("journal-%03d-%s.jsonl", n, spec.name))
	w.journals = append(w.journals, journal)
	w.mu.Unlock()
	args := spec.args
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		args = append([]string{"run-once"}, args...)
	}
	args = append(args, "--config", spec.config)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = childEnviron(journal, spec.env)
	c := &child{name: fmt.Sprintf("%s#%d", spec.name, n), cmd: cmd, journal: journal, cancel: cancel, done: make(chan struct{})}
	c.stderrPath = filepath.Join(w.dir, fmt.Sprintf("stderr-%03d-%s.log", n, spec.name))
	errf, err := os.Create(c.stderrPath)
	if err != nil {
		w.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = &c.stdout, errf
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.running = append(w.running, c)
	w.mu.Unlock()
	go func() {
		defer close(c.done)
		defer cancel()
		err := cmd.Wait()
		_ = errf.Close()
		c.res = c.collect(err)
	}()
	return c
}

// childEnviron is the parent's environment without configuration overrides, plus the
// child's switches.
func childEnviron(journal string, extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SF2LOKI_") && (strings.Contains(k, "__") || strings.HasPrefix(k, "SF2LOKI_TEST_") && k != testenv.EnvIterations) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, envChild+"=1", envJournal+"="+journal)
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func (c *child) collect(err error) result {
	r := result{name: c.name, took: time.Since(c.started)}
	if st := c.cmd.ProcessState; st != nil {
		r.code = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signal = ws.Signal()
		}
	} else if err != nil {
		r.code = -2
	}
	if b, err := os.ReadFile(c.stderrPath); err == nil {
		r.stderr = string(b)
	}
	lines := strings.Split(strings.TrimSpace(c.stdout.String()), "\n")
	if last := lines[len(lines)-1]; strings.HasPrefix(last, "{") {
		var rep job.Report
		if json.Unmarshal([]byte(last), &rep) == nil {
			r.report = &rep
		}
		var summary struct { // backfill prints its summary with the run report inside
			Report *job.Report `json:"report"`
		}
		if json.Unmarshal([]byte(last), &summary) == nil && summary.Report != nil {
			r.report = summary.Report
		}
	}
	return r
}

// wait returns the child's result once it has exited.
func (c *child) wait() result {
	<-c.done
	return c.res
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the child.
func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", c.name, sig, err)
	}
}

// waitStopped waits until the child is in the stopped state (it stopped itself).
func (c *child) waitStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if c.exited() {
			t.Fatalf("%s exited instead of stopping: %v\n%s", c.name, c.res, tail(c.res.stderr))
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
		if err == nil {
			// pid (comm) state ...: the state follows the last ')'.
			if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never stopped", c.name)
}

// stopBetweenWrites sends SIGSTOP right after the child's next document write (a renewal)
// is journaled, so that it is not paused inside a write: a process paused there holds the
// file store's lock, and every other writer waits for it (see docs/testing.md).
func (c *child) stopBetweenWrites(t *testing.T) {
	t.Helper()
	before := len(writesOf(t, []string{c.journal}))
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if len(writesOf(t, []string{c.journal})) > before {
			c.signal(t, syscall.SIGSTOP)
			return
		}
		if c.exited() {
			t.Fatalf("%s exited before it could be stopped: %v\n%s", c.name, c.res, tail(c.res.stderr))
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s wrote nothing more", c.name)
}

// waitStep waits until the child's journal shows step reached (n-th time).
func (c *child) waitStep(t *testing.T, step string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, e := range readJournal(t, c.journal) {
			if e.Op == "step" && e.Step == step && e.N == n {
				return
			}
		}
		if c.exited() {
			t.Fatalf("%s exited before reaching %s: %v\n%s", c.name, step, c.res, tail(c.res.stderr))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never reached %s", c.name, step)
}

// killAll ends every child still running (stopped ones included).
func (w *world) killAll() {
	w.mu.Lock()
	cs := slices.Clone(w.running)
	w.mu.Unlock()
	for _, c := range cs {
		if !c.exited() {
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			_ = c.cmd.Process.Signal(syscall.SIGCONT)
			<-c.done
		}
	}
}

// run starts a child and waits for it.
func (w *world) run(spec childSpec) result {
	w.t.Helper()
	return w.start(spec).wait()
}

// runAll starts every spec at once and waits for all of them.
func (w *world) runAll(specs ...childSpec) []result {
	w.t.Helper()
	cs := make([]*child, len(specs))
	for i, s := range specs {
		cs[i] = w.start(s)
	}
	out := make([]result, len(cs))
	for i, c := range cs {
		out[i] = c.wait()
	}
	return out
}

// newGeneration starts a new document history (the document was just deleted): writes
// journaled from now on are verified apart from the earlier ones.
func (w *world) newGeneration() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cuts = append(w.cuts, time.Now())
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

// expect fails the test unless the child ended with one of the outcomes and the exit code
// the one table gives them (strict exit codes when strict).
func expect(t *testing.T, r result, strict bool, outcomes ...job.Outcome) {
	t.Helper()
	if r.report == nil {
		t.Fatalf("%v: %v\n%s", r, errNoReport, tail(r.stderr))
	}
	if !slices.Contains(outcomes, r.report.Outcome) {
		t.Fatalf("%v: want outcome %v\n%s", r, outcomes, tail(r.stderr))
	}
	if want := outcomeExit(r.report.Outcome, strict); r.code != want || r.report.ExitCode != want {
		t.Fatalf("%v: exit code %d (report %d), want %d for %s", r, r.code, r.report.ExitCode, want, r.report.Outcome)
	}
}

// expectKilled fails the test unless the child died of SIGKILL (its crash point was reached).
func expectKilled(t *testing.T, r result) {
	t.Helper()
	if r.signal != syscall.SIGKILL {
		t.Fatalf("%v: want killed by SIGKILL at its crash point\n%s", r, tail(r.stderr))
	}
}

// readJournal parses one journal file (a missing file is empty).
func readJournal(t *testing.T, path string) []journalEntry {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []journalEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e journalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// writes returns the successful writes of the journals.
func writesOf(t *testing.T, journals []string) []journalEntry {
	var out []journalEntry
	for _, j := range journals {
		for _, e := range readJournal(t, j) {
			if e.Op == "write" {
				out = append(out, e)
			}
		}
	}
	return out
}

// chainOrder returns the writes in document-history order (from the creating write).
func chainOrder(ws []journalEntry) []journalEntry {
	next := map[store.Version]journalEntry{}
	for _, w := range ws {
		next[w.Expect] = w
	}
	var out []journalEntry
	for w, ok := next[""]; ok && len(out) <= len(ws); w, ok = next[w.Version] {
		out = append(out, w)
	}
	return out
}

// soqlCursor is the part of a soql cursor the invariants compare.
type soqlCursor struct {
	TS     string `json:"ts"`
	LastID string `json:"last_id"`
}

// elfCursor is an eventlogfile cursor.
type elfCursor struct {
	Created string `json:"created"`
	FileID  string `json:"file_id"`
	Row     int64  `json:"row"`
	Done    bool   `json:"done"`
}

// position is a comparable cursor position: soql (ts, id); eventlogfile (created, file, row,
// done).
type position struct {
	ts   time.Time
	id   string
	row  int64
	done bool
}

func (p position) cmp(o position) int {
	if c := p.ts.Compare(o.ts); c != 0 {
		return c
	}
	if c := strings.Compare(p.id, o.id); c != 0 {
		return c
	}
	if p.row != o.row {
		if p.row < o.row {
			return -1
		}
		return 1
	}
	switch {
	case p.done == o.done:
		return 0
	case o.done:
		return -1
	}
	return 1
}

func parsePosition(key string, v json.RawMessage) (position, error) {
	switch {
	case strings.HasPrefix(key, "soql:"):
		var c soqlCursor
		if err := json.Unmarshal(v, &c); err != nil {
			return position{}, err
		}
		ts, err := time.Parse(time.RFC3339Nano, c.TS)
		if err != nil {
			return position{}, err
		}
		return position{ts: ts, id: c.LastID[:min(15, len(c.LastID))]}, nil
	case strings.Contains(key, "eventlogfile:"): // live keys, and backfill:<window>:eventlogfile:<type>
		var c elfCursor
		if err := json.Unmarshal(v, &c); err != nil {
			return position{}, err
		}
		ts, err := time.Parse(time.RFC3339Nano, c.Created)
		if err != nil {
			return position{}, err
		}
		return position{ts: ts, id: c.FileID[:min(15, len(c.FileID))], row: c.Row, done: c.Done}, nil
	}
	return position{}, fmt.Errorf("unexpected checkpoint key %q", key)
}

// deliveries counts, per record (LoginHistory Id, EventLogFile ROW_ID), how often the
// receiver got it.
func (w *world) deliveries(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range w.recv.lines(t) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("unexpected line at the receiver: %q", line)
		}
		switch {
		case m["ROW_ID"] != nil:
			out[fmt.Sprint(m["ROW_ID"])]++
		case m["Id"] != nil:
			id := fmt.Sprint(m["Id"])
			out[id[:min(15, len(id))]]++
		default:
			t.Fatalf("unexpected line at the receiver: %q", line)
		}
	}
	return out
}

// verifyOpts bound a scenario's duplicates.
type verifyOpts struct {
	// faulted counts the processes whose batch may be shipped again: killed after pushing,
	// fenced, or taken over.
	faulted    int
	maxRecords int
	// dupsAllowed skips the duplicate bound (the document was deleted: a restart from the
	// lookback ships everything again, by design).
	dupsAllowed bool
}

// verify checks the invariants over everything the children did: the store's chain
// invariants (single chain, I4, I5, I7), no cursor ever moving backwards (I1), no committed
// position beyond what reached the receiver (I2), every inserted record at the receiver at
// least once, and duplicates within one batch per faulted process (I3).
func (w *world) verify(t *testing.T, o verifyOpts) {
	t.Helper()
	w.mu.Lock()
	journals, cuts := slices.Clone(w.journals), slices.Clone(w.cuts)
	logins := slices.Clone(w.logins)
	files := slices.Clone(w.files)
	w.mu.Unlock()
	got := w.deliveries(t)
	versions := 0
	// The writes of each document of each generation (a generation ends when the document is
	// deleted).
	byDoc := map[string][]journalEntry{}
	for _, e := range writesOf(t, journals) {
		gen := 0
		for _, c := range cuts {
			if e.At.After(c) {
				gen++
			}
		}
		k := fmt.Sprintf("%03d %s", gen, e.Object)
		byDoc[k] = append(byDoc[k], e)
	}
	var docs [][]journalEntry
	for _, k := range slices.Sorted(maps.Keys(byDoc)) {
		docs = append(docs, byDoc[k])
	}
	for gi, ws := range docs {
		sw := make([]storetest.Write, len(ws))
		for i, e := range ws {
			sw[i] = storetest.Write{Expect: e.Expect, Version: e.Version, Data: e.Data}
		}
		if err := storetest.VerifyWrites(sw); err != nil {
			t.Fatalf("document %d (%s): store chain invariants: %v", gi, ws[0].Object, err)
		}
		chain := chainOrder(ws)
		versions += len(chain)
		last := map[string]position{}
		for i, e := range chain {
			doc, _, err := store.Decode("journal", e.Data)
			if err != nil {
				t.Fatalf("generation %d version %d does not parse (I7): %v", gi, i, err)
			}
			for k, cp := range doc.Checkpoints {
				p, err := parsePosition(k, cp.Value)
				if err != nil {
					t.Fatalf("generation %d version %d: key %s: %v", gi, i, k, err)
				}
				if prev, ok := last[k]; ok && p.cmp(prev) < 0 {
					t.Fatalf("I1 violated: %s moved back from %+v to %+v in generation %d version %d (writer %+v)", k, prev, p, gi, i, doc.Writer)
				}
				last[k] = p
			}
		}
		for k, p := range last {
			checkCommittedDelivered(t, k, p, logins, files, got)
		}
	}
	missing := 0
	for _, l := range logins {
		if got[l.id] == 0 {
			missing++
			if missing < 5 {
				t.Errorf("LoginHistory %s (%s) never reached the receiver", l.id, l.at.Format(time.RFC3339Nano))
			}
		}
	}
	for _, f := range files {
		for n := 1; n <= f.rows; n++ {
			if id := fmt.Sprintf("%s-%d", f.tag, n); got[id] == 0 {
				missing++
				if missing < 5 {
					t.Errorf("EventLogFile row %s never reached the receiver", id)
				}
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d records lost", missing)
	}
	known := map[string]bool{}
	for _, l := range logins {
		known[l.id] = true
	}
	for _, f := range files {
		for n := 1; n <= f.rows; n++ {
			known[fmt.Sprintf("%s-%d", f.tag, n)] = true
		}
	}
	dups := 0
	for id, n := range got {
		if !known[id] {
			t.Fatalf("the receiver holds %s, which was never inserted", id)
		}
		dups += n - 1
	}
	t.Logf("%d records, %d document versions, %d duplicates at the receiver, %d faulted processes", len(known), versions, dups, o.faulted)
	if !o.dupsAllowed && dups > o.faulted*o.maxRecords {
		t.Fatalf("I3 violated: %d duplicates after %d faulted processes (at most %d each)", dups, o.faulted, o.maxRecords)
	}
}

// checkCommittedDelivered checks I2 for a key's last committed position: every record at or
// before it reached the receiver.
func checkCommittedDelivered(t *testing.T, key string, p position, logins []login, files []logFile, got map[string]int) {
	t.Helper()
	switch {
	case strings.HasPrefix(key, "soql:"):
		for _, l := range logins {
			if (position{ts: l.at, id: l.id}).cmp(p) <= 0 && got[l.id] == 0 {
				t.Fatalf("I2 violated: %s is committed up to %+v but %s never reached the receiver", key, p, l.id)
			}
		}
	case strings.Contains(key, "eventlogfile:"):
		for _, f := range files {
			if !strings.HasSuffix(key, "eventlogfile:"+f.typ) {
				continue
			}
			rows := 0
			switch c := (position{ts: f.created, id: f.id[:15]}).cmp(position{ts: p.ts, id: p.id}); {
			case c < 0:
				rows = f.rows
			case c == 0:
				rows = int(p.row)
			}
			for n := 1; n <= rows; n++ {
				if id := fmt.Sprintf("%s-%d", f.tag, n); got[id] == 0 {
					t.Fatalf("I2 violated: %s is committed up to %+v but %s never reached the receiver", key, p, id)
				}
			}
		}
	}
}

// catchUp runs (waiting for an abandoned lease to expire) until one run is ok and caught up.
func (w *world) catchUp(t *testing.T, cfg string) result {
	t.Helper()
	var r result
	for i := range 6 {
		r = w.run(childSpec{name: fmt.Sprintf("catchup%d", i), config: cfg, args: []string{"--drain", "--wait", "6s"}})
		if r.report != nil && r.report.Outcome == job.OutcomeOK && r.report.CaughtUp {
			return r
		}
		t.Logf("catch-up run: %v", r)
	}
	t.Fatalf("never caught up: %v\n%s", r, tail(r.stderr))
	return r
}

// epochsIncrease fails the test unless the runs that claimed did so with increasing epochs.
func epochsIncrease(t *testing.T, rs []result) {
	t.Helper()
	var last uint64
	for _, r := range rs {
		if r.report == nil || r.report.Epoch == 0 {
			continue
		}
		if r.report.Epoch <= last {
			t.Fatalf("%v: epoch %d after %d", r, r.report.Epoch, last)
		}
		last = r.report.Epoch
	}
}
