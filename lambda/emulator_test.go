package lambda_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sf2loki/sf2loki/cli"
	"github.com/sf2loki/sf2loki/internal/sftest"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
)

// The acceptance tests of the Lambda mode run the sf2loki binary as the bootstrap of the real
// AWS Lambda Runtime Interface Emulator, with the checkpoint document in versitygw (a real S3
// API), the simulated org and the strict Loki receiver.

// bootstrapEnv makes this test binary the function's bootstrap: TestMain hands a process
// started with it to cli.Main, exactly as cmd/sf2loki does, so the emulator runs the real
// command line without a separate build of cmd/sf2loki.
const bootstrapEnv = "SF2LOKI_TEST_LAMBDA_BOOTSTRAP"

func TestMain(m *testing.M) {
	if os.Getenv(bootstrapEnv) == "1" {
		os.Exit(cli.Main(os.Args[:1], os.Stdout, os.Stderr))
	}
	testenv.Main(m)
}

// bootstrap returns the path of this test binary, to run as the function's bootstrap.
func bootstrap(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs sf2loki under the Lambda emulator; runs without -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// world is one deployment: an org, a receiver, an S3 document and the function's configuration.
type world struct {
	t      *testing.T
	org    *sftest.Org
	recv   *simloki.Running
	s3     *testenv.S3
	bucket string
	dir    string
	// what the salesforce and sink.loki sections say besides the URLs, and extra YAML appended.
	salesforce string
	lokiAuth   string
	extra      string
	mu         sync.Mutex
	inserted   int
}

const stateKey = "sf2loki/state.json"

func newWorld(t *testing.T, recv ...simloki.Options) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir()}
	w.s3 = testenv.StartVersitygw(t)
	w.bucket = w.s3.NewBucket(t)
	w.org = sftest.Start(t, simsf.Options{})
	w.recv = simloki.Start(t, append(recv, simloki.Options{})[0])
	key := filepath.Join(w.dir, "jwt.key")
	if err := os.WriteFile(key, sftest.Key().KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	w.salesforce = fmt.Sprintf("  client_id: %s\n  username: %s\n  private_key_file: %s\n", sftest.ClientID, sftest.User, key)
	return w
}

// config writes the function's configuration and returns its path.
func (w *world) config(name string) string {
	w.t.Helper()
	yamlText := fmt.Sprintf(`salesforce:
  login_url: %s
%s
sources:
  eventlogfile:
    enabled: false
  apexlog:
    enabled: false
  soql:
    enabled: true
    objects:
      - name: LoginHistory
        lookback: 1h
sink:
  loki:
    url: %s
    timeout: 2s
%sstate:
  store: s3
  s3:
    bucket: %s
    key: %s
    endpoint: %s
    region: %s
    path_style: true
    access_key_id: %s
    secret_access_key: %s
lease:
  type: store
  duration: 2s
  renew_interval: 500ms
  max_clock_skew: 100ms
run:
  max_duration: 20s
  push_timeout: 3s
  commit_timeout: 3s
  release_timeout: 1s
  margin: 1s
log:
  level: debug
%s`, w.org.URL, w.salesforce, w.recv.PushURL(), w.lokiAuth, w.bucket, stateKey, w.s3.Endpoint, w.s3.Region, w.s3.AccessKey, w.s3.SecretKey, w.extra)
	path := filepath.Join(w.dir, name)
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// insertLogins adds n LoginHistory rows a minute in the past.
func (w *world) insertLogins(n int) {
	w.t.Helper()
	now := time.Now().UTC()
	w.mu.Lock()
	defer w.mu.Unlock()
	recs := make([]simsf.Record, 0, n)
	for k := range n {
		w.inserted++
		recs = append(recs, simsf.Record{"LoginTime": now.Add(-time.Minute + time.Duration(k)*time.Millisecond), "UserId": "005000000000001AAA",
			"LoginType": "Application", "Status": "Success", "SourceIp": fmt.Sprintf("198.51.100.%d", w.inserted%250+1)})
	}
	if _, err := w.org.Insert("LoginHistory", recs...); err != nil {
		w.t.Fatal(err)
	}
}

// document returns the checkpoint document's bytes and ETag ("" and "" when absent).
func (w *world) document() (string, string) {
	w.t.Helper()
	out, err := w.s3.Client().GetObject(w.t.Context(), &s3.GetObjectInput{Bucket: aws.String(w.bucket), Key: aws.String(stateKey)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchKey") {
			return "", ""
		}
		w.t.Fatal(err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(out.Body)
	return b.String(), aws.ToString(out.ETag)
}

// function starts an emulator running sf2loki with the configuration at path.
func (w *world) function(path string, timeout time.Duration, env ...string) *testenv.LambdaRIE {
	w.t.Helper()
	return testenv.StartLambdaRIE(w.t, bootstrap(w.t), timeout, append([]string{bootstrapEnv + "=1", "SF2LOKI_CONFIG=" + path}, env...))
}

// invoke runs one invocation and decodes the report of a successful one.
func invoke(t *testing.T, f *testenv.LambdaRIE) (*job.Report, testenv.Invocation) {
	t.Helper()
	inv, err := f.Invoke(t.Context(), `{"source":"aws.scheduler"}`)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(f))
	}
	if inv.ErrorType != "" {
		return nil, inv
	}
	var rep job.Report
	if err := json.Unmarshal(inv.Body, &rep); err != nil {
		t.Fatalf("the response is not a run report: %v: %s", err, inv.Body)
	}
	return &rep, inv
}

func tail(f *testenv.LambdaRIE) string {
	out := f.Output()
	if len(out) > 6000 {
		out = out[len(out)-6000:]
	}
	return string(out)
}

// 20 scheduled invocations in a row through the emulator: every one is ok, the epochs increase,
// one warm process serves them all, and every row reaches the receiver exactly once.
func TestScheduledInvocationsShipEverythingFromOneWarmProcess(t *testing.T) {
	w := newWorld(t)
	f := w.function(w.config("sf2loki.yaml"), 60*time.Second)
	var epochs []uint64
	pid := 0
	for i := range 20 {
		w.insertLogins(7 + i)
		rep, inv := invoke(t, f)
		if rep == nil || rep.Outcome != job.OutcomeOK {
			t.Fatalf("invocation %d: %s %s\n%s", i+1, inv.ErrorType, inv.Body, tail(f))
		}
		epochs = append(epochs, rep.Epoch)
		p, err := f.BootstrapPID()
		if err != nil {
			t.Fatal(err)
		}
		if pid != 0 && p != pid {
			t.Fatalf("invocation %d ran in process %d, the earlier ones in %d: the environment was not reused", i+1, p, pid)
		}
		pid = p
	}
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Fatalf("epochs %v do not increase", epochs)
		}
	}
	if got := w.recv.Count(); got != w.inserted {
		t.Fatalf("the receiver holds %d entries, %d rows were inserted", got, w.inserted)
	}
	if n := bytes.Count(f.Output(), []byte(`"msg":"configuration loaded"`)); n != 1 {
		t.Fatalf("the configuration was loaded %d times in a warm environment, want once", n)
	}
	doc, _ := w.document()
	if !strings.Contains(doc, fmt.Sprintf(`"epoch":%d`, epochs[len(epochs)-1])) && !strings.Contains(doc, fmt.Sprintf(`"fence_epoch":%d`, epochs[len(epochs)-1])) {
		t.Logf("document: %s", doc)
	}
}

// A configuration error is a function error of type sf2loki.config_error; so is a deadline
// shorter than the reserves, which refuses before claiming: the document is untouched.
func TestConfigurationErrorsAndShortDeadlinesAreFunctionErrors(t *testing.T) {
	w := newWorld(t)
	good := w.config("sf2loki.yaml")
	w.extra = "batch:\n  max_records: 0\n"
	bad := w.config("bad.yaml")

	f := w.function(bad, 30*time.Second)
	if rep, inv := invoke(t, f); rep != nil || inv.ErrorType != "sf2loki.config_error" || !bytes.Contains(inv.Body, []byte("batch.max_records")) {
		t.Fatalf("invalid configuration: %+v %s %s", rep, inv.ErrorType, inv.Body)
	}

	// A first run writes the document; then a function whose timeout cannot hold the reserves
	// (3s + 3s + 1s plus the 1s margin) refuses, leaving the document byte for byte.
	w.insertLogins(5)
	if rep, inv := invoke(t, w.function(good, 30*time.Second)); rep == nil || rep.Outcome != job.OutcomeOK {
		t.Fatalf("first run: %s %s", inv.ErrorType, inv.Body)
	}
	before, etag := w.document()
	w.insertLogins(5)
	short := w.function(good, 7*time.Second)
	rep, inv := invoke(t, short)
	if rep != nil || inv.ErrorType != "sf2loki.config_error" || !bytes.Contains(inv.Body, []byte("deadline is shorter than the reserves")) {
		t.Fatalf("short deadline: %+v %s %s", rep, inv.ErrorType, inv.Body)
	}
	after, etag2 := w.document()
	if after != before || etag2 != etag {
		t.Fatalf("the refused invocation changed the document:\nbefore %s\nafter  %s", before, after)
	}
	if w.recv.Count() != 5 {
		t.Fatalf("the receiver holds %d entries, want the first run's 5", w.recv.Count())
	}
}

// Two environments invoked at once on one document: one ships, the other is busy.
func TestTwoEnvironmentsAtOnceOneShipsOneIsBusy(t *testing.T) {
	w := newWorld(t)
	path := w.config("sf2loki.yaml")
	a, b := w.function(path, 60*time.Second), w.function(path, 60*time.Second)
	w.insertLogins(40)
	w.org.SetLatency(300 * time.Millisecond) // the holder's run outlasts the other's acquire
	var wg sync.WaitGroup
	reps := make([]*job.Report, 2)
	for i, f := range []*testenv.LambdaRIE{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv, err := f.Invoke(t.Context(), "{}")
			if err != nil || inv.ErrorType != "" {
				t.Errorf("environment %d: %v %s", i, err, inv.Body)
				return
			}
			var rep job.Report
			if err := json.Unmarshal(inv.Body, &rep); err != nil {
				t.Errorf("environment %d: %v", i, err)
				return
			}
			reps[i] = &rep
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := []string{string(reps[0].Outcome), string(reps[1].Outcome)}
	slices.Sort(got)
	if got[0] != string(job.OutcomeBusy) || got[1] != string(job.OutcomeOK) {
		t.Fatalf("outcomes %v, want one busy and one ok", got)
	}
	if w.recv.Count() != 40 {
		t.Fatalf("the receiver holds %d entries, want 40", w.recv.Count())
	}
}

// An environment frozen (SIGSTOP) right after its push, past its lease, and thawed after
// another environment claimed and committed, ends fenced and leaves the document as the other
// one wrote it.
func TestThawAfterALongFreezeEndsFencedWithoutCommitting(t *testing.T) {
	w := newWorld(t)
	pushed := make(chan struct{})
	resume := make(chan struct{})
	var first sync.Once
	gate := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		held := false
		first.Do(func() { held = true })
		if held {
			close(pushed)
			<-resume // the test freezes the pusher before it can read the answer
		}
		w.recv.ServeHTTP(rw, r)
	})
	gated := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	ln, err := newLoopbackListener()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gated.Serve(ln) }()
	t.Cleanup(func() { _ = gated.Close() })
	w.recv.URL = "http://" + ln.Addr().String()

	path := w.config("sf2loki.yaml")
	// A push timeout longer than the freeze, so the thawed push reads its answer instead of
	// timing out (a timed-out push ships nothing and is not this test's case).
	long := []string{"SF2LOKI_SINK__LOKI__TIMEOUT=25s", "SF2LOKI_RUN__PUSH_TIMEOUT=30s", "SF2LOKI_RUN__MAX_DURATION=60s"}
	a, b := w.function(path, 90*time.Second, long...), w.function(path, 90*time.Second, long...)
	w.insertLogins(30)
	type result struct {
		inv testenv.Invocation
		err error
	}
	aDone := make(chan result, 1)
	go func() {
		inv, err := a.Invoke(t.Context(), "{}")
		aDone <- result{inv, err}
	}()
	select {
	case <-pushed:
	case r := <-aDone:
		t.Fatalf("A ended before pushing: %v %s\n%s", r.err, r.inv.Body, tail(a))
	case <-time.After(45 * time.Second):
		t.Fatalf("A never pushed\n%s", tail(a))
	}
	pid, err := a.BootstrapPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	// kill returns before every thread has stopped: answering now let A read the answer and
	// commit before it froze, now and then (seen on a loaded machine).
	waitFrozen(t, pid)
	close(resume)                       // the receiver stores A's entries and answers; A is frozen
	time.Sleep(2500 * time.Millisecond) // A's lease (2s + 100ms skew) runs out while it is frozen

	repB, inv := invoke(t, b)
	if repB == nil || repB.Outcome != job.OutcomeOK {
		t.Fatalf("B: %s %s\n%s", inv.ErrorType, inv.Body, tail(b))
	}
	docB, etagB := w.document()

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := <-aDone
	if r.err != nil {
		t.Fatal(r.err)
	}
	// A thawed run ends fenced, or partial (its lease was lost after it pushed) without
	// committing; either way its report is the last one in its output.
	repA := lastReport(t, a)
	if repA.Outcome != job.OutcomeFenced && repA.Outcome != job.OutcomePartial {
		t.Fatalf("A after the thaw: %s (%s), want fenced or partial\n%s", repA.Outcome, r.inv.Body, tail(a))
	}
	if (repA.Outcome == job.OutcomeFenced) != (r.inv.ErrorType == "") {
		t.Fatalf("A's outcome %s answered errorType %q", repA.Outcome, r.inv.ErrorType)
	}
	t.Logf("A after the thaw: %s, epoch %d (B's %d)", repA.Outcome, repA.Epoch, repB.Epoch)
	if repA.Epoch >= repB.Epoch {
		t.Fatalf("A's epoch %d is not below B's %d", repA.Epoch, repB.Epoch)
	}
	if docA, etagA := w.document(); docA != docB || etagA != etagB {
		t.Fatalf("the thawed invocation changed the document:\nafter B %s\nafter A %s", docB, docA)
	}
	if repA.Commits != 0 {
		t.Fatalf("A committed %d times after the thaw", repA.Commits)
	}
}

// waitFrozen waits until every thread of the process pid is stopped.
func waitFrozen(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("reading the threads of %d: %v", pid, err)
		}
		running := 0
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				continue // a thread that exited
			}
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d threads of %d still run 10s after SIGSTOP", running, len(tasks), pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func newLoopbackListener() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// lastReport returns the last run report the function printed.
func lastReport(t *testing.T, f *testenv.LambdaRIE) job.Report {
	t.Helper()
	lines := bytes.Split(f.Output(), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if !bytes.HasPrefix(lines[i], []byte(`{"outcome":`)) {
			continue
		}
		var rep job.Report
		if err := json.Unmarshal(lines[i], &rep); err != nil {
			t.Fatalf("a report line is not a report: %v: %s", err, lines[i])
		}
		return rep
	}
	t.Fatalf("the function printed no run report\n%s", tail(f))
	return job.Report{}
}

// The configuration read from an S3 object, and entries the receiver refuses for good written as
// dead-letter objects to S3 before their cursor moves on.
func TestConfigurationFromS3AndDeadLettersToS3(t *testing.T) {
	w := newWorld(t, simloki.Options{RejectOldSamplesMaxAge: 30 * time.Minute})
	// restamp off: entries refused for their age are dropped instead of shipped re-stamped.
	w.lokiAuth = fmt.Sprintf("    dead_letter_path: s3://%s/dead-letters/\n    restamp: false\n", w.bucket)
	local := w.config("sf2loki.yaml")
	body, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.s3.Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(w.bucket), Key: aws.String("config/sf2loki.yaml"),
		Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	f := testenv.StartLambdaRIE(t, bootstrap(t), 60*time.Second, []string{bootstrapEnv + "=1",
		"SF2LOKI_CONFIG=s3://" + w.bucket + "/config/sf2loki.yaml", "AWS_ENDPOINT_URL_S3=" + w.s3.Endpoint,
		"AWS_ACCESS_KEY_ID=" + w.s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + w.s3.SecretKey, "AWS_REGION=" + w.s3.Region})

	// Ten rows 50 minutes old (beyond the receiver's 30 minutes) and five fresh ones.
	now := time.Now().UTC()
	var old []simsf.Record
	for k := range 10 {
		old = append(old, simsf.Record{"LoginTime": now.Add(-50*time.Minute + time.Duration(k)*time.Second), "UserId": "005000000000001AAA",
			"LoginType": "Application", "Status": "Success", "SourceIp": "192.0.2.1"})
	}
	if _, err := w.org.Insert("LoginHistory", old...); err != nil {
		t.Fatal(err)
	}
	w.insertLogins(5)
	rep, inv := invoke(t, f)
	if rep == nil || rep.Outcome != job.OutcomeOK {
		t.Fatalf("%s %s\n%s", inv.ErrorType, inv.Body, tail(f))
	}
	var dropped int64
	for _, n := range rep.Dropped {
		dropped += n
	}
	list, err := w.s3.Client().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(w.bucket), Prefix: aws.String("dead-letters/")})
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 10 || len(list.Contents) != 10 || w.recv.Count() != 5 {
		t.Fatalf("dropped %d, %d dead-letter objects, %d entries at the receiver; want 10, 10 and 5", dropped, len(list.Contents), w.recv.Count())
	}
	out, err := w.s3.Client().GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(w.bucket), Key: list.Contents[0].Key})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	var dl struct {
		Key, Reason, Line string
	}
	if err := json.NewDecoder(out.Body).Decode(&dl); err != nil || dl.Key != "soql:LoginHistory" || !strings.Contains(dl.Line, "192.0.2.1") {
		t.Fatalf("dead letter %+v, %v", dl, err)
	}
}

// The environment may be frozen right after the response: every invocation pushes its metrics
// (OTLP/HTTP) before it answers, though the periodic push is an hour away.
func TestMetricsArePushedBeforeTheResponse(t *testing.T) {
	w := newWorld(t)
	var mu sync.Mutex
	pushes := 0
	otlp := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/metrics" && r.Method == http.MethodPost {
			mu.Lock()
			pushes++
			mu.Unlock()
		}
		rw.WriteHeader(http.StatusOK)
	})}
	ln, err := newLoopbackListener()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = otlp.Serve(ln) }()
	t.Cleanup(func() { _ = otlp.Close() })
	w.extra = fmt.Sprintf("metrics:\n  otlp:\n    endpoint: http://%s/v1/metrics\n    interval: 1h\n", ln.Addr())
	f := w.function(w.config("sf2loki.yaml"), 60*time.Second)
	for i := 1; i <= 3; i++ {
		w.insertLogins(3)
		if rep, inv := invoke(t, f); rep == nil || rep.Outcome != job.OutcomeOK {
			t.Fatalf("invocation %d: %s %s", i, inv.ErrorType, inv.Body)
		}
		mu.Lock()
		n := pushes
		mu.Unlock()
		if n < i {
			t.Fatalf("after %d invocations the OTLP receiver had %d pushes: a response came before its metrics", i, n)
		}
	}
}

// The function's result leaves the process as the printed report does, so it is scrubbed the
// same way: a push error that quotes a Loki URL with a token names the URL with the token
// masked, in the function error and in everything the process printed.
func TestFunctionResultCarriesNoURLCredential(t *testing.T) {
	w := newWorld(t)
	w.lokiAuth = "    max_retries: 0\n"
	path := w.config("sf2loki.yaml")
	const token = "LambdaUrlToken8Qz"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://127.0.0.1:1/loki/api/v1/push?token=" + token // nothing listens on port 1
	if err := os.WriteFile(path, bytes.Replace(data, []byte(w.recv.PushURL()), []byte(closed), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	w.insertLogins(3)
	f := w.function(path, 30*time.Second)
	rep, inv := invoke(t, f)
	if rep != nil || !strings.HasPrefix(inv.ErrorType, "sf2loki.") {
		t.Fatalf("a push to a closed port: %+v %s %s", rep, inv.ErrorType, inv.Body)
	}
	if !bytes.Contains(inv.Body, []byte("push?token=xxxxx")) {
		t.Fatalf("the function error does not name the push URL with its token masked: %s", inv.Body)
	}
	if bytes.Contains(inv.Body, []byte(token)) {
		t.Fatalf("the function error carries the URL token: %s", inv.Body)
	}
	if bytes.Contains(f.Output(), []byte(token)) {
		t.Fatalf("the function printed the URL token:\n%s", tail(f))
	}
}
