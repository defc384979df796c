package deploytest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
)

// The controller scenarios run the chart's CronJobs for real: kube-controller-manager's CronJob
// and Job controllers against the shared kube-apiserver, and the node stand-in
// (testenv.Node) running each Pod as a process of the real sf2loki binary. The CronJob
// controller names a Job after the minute it was scheduled for, so a schedule cannot fire more
// than once a minute: every scenario uses "* * * * *" and a time budget that fits the minute,
// and the scenarios run in parallel so that their ticks share wall time.
const (
	tickPeriod   = time.Minute
	tickSchedule = "* * * * *"
)

// scenario is one release of the chart in a namespace of its own, with its own simulated org,
// strict receiver and node stand-in.
type scenario struct {
	t          *testing.T
	k          *testenv.Kube
	ns         string
	client     kubernetes.Interface
	node       *testenv.Node
	org        *simsf.Org
	orgURL     string
	lk         *simloki.Running
	key        []byte // the JWT app's private key, PEM
	kubeconfig string
}

// newScenario prepares a namespace enforcing the restricted Pod Security profile, a node
// stand-in for it (hold as in testenv.NodeOptions), a simulated org with a JWT app, and a strict
// receiver with Loki's default limits.
func newScenario(t *testing.T, hold func(*corev1.Pod) <-chan struct{}) *scenario {
	t.Helper()
	bin := buildSF2Loki(t)
	k := testenv.SharedKubeWithControllers(t)
	s := &scenario{t: t, k: k, client: k.AdminClient(t)}
	s.ns = restrictedNamespace(t, k)
	s.kubeconfig = writeKubeconfig(t, k, k.AdminToken)
	s.node = k.StartNode(t, testenv.NodeOptions{Namespace: s.ns, Binary: bin, Hold: hold})

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s.key = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	s.org = simsf.New(simsf.Options{Seed: 20, Logger: slog.New(slog.DiscardHandler)})
	s.org.AddUser("integration@example.com", simsf.AllPermissions())
	if err := s.org.AddJWTApp("3MVG9-deploytest", &key.PublicKey, "integration@example.com"); err != nil {
		t.Fatal(err)
	}
	srv, err := s.org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	s.orgURL = srv.URL
	s.lk = simloki.Start(t, simloki.Options{})
	return s
}

// values returns chart values for a release shipping the given sources (and job groups) on
// the one-minute schedule, with a time budget that fits it: activeDeadlineSeconds 5+20+2+2+10 =
// 39 < 60, lease 15s+2s+5s < 60.
func (s *scenario) values(sources map[string]any, jobs []map[string]any) map[string]any {
	cfg := map[string]any{
		"salesforce": map[string]any{
			"login_url": s.orgURL, "client_id": "3MVG9-deploytest", "username": "integration@example.com",
			"private_key_file": "/var/run/secrets/sf2loki/sf-jwt.key",
		},
		"sources": sources,
		"sink":    map[string]any{"loki": map[string]any{"url": s.lk.PushURL(), "timeout": "5s"}},
		"lease":   map[string]any{"type": "kubernetes", "duration": "15s", "renew_interval": "5s", "max_clock_skew": "2s"},
		"state":   map[string]any{"store": "configmap"},
		"run": map[string]any{"max_duration": "20s", "push_timeout": "5s", "commit_timeout": "5s",
			"release_timeout": "2s", "startup_reserve": "5s", "margin": "2s"},
		"log": map[string]any{"format": "json", "level": "debug"},
	}
	if jobs != nil {
		cfg["jobs"] = jobs
	}
	return map[string]any{
		"config": cfg,
		"cronjob": map[string]any{"schedule": tickSchedule, "backoffLimit": 1,
			"successfulJobsHistoryLimit": 10, "failedJobsHistoryLimit": 10},
		"budget":  map[string]any{"deadlineSlackSeconds": 10, "graceSlackSeconds": 2},
		"secrets": map[string]any{"source": "chart", "data": map[string]any{"sf-jwt.key": string(s.key)}},
	}
}

// install runs helm install against the API server and uninstalls the release (stopping its
// CronJobs) when the test ends.
func (s *scenario) install(release string, values map[string]any) {
	s.t.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(s.t.TempDir(), "values.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		s.t.Fatal(err)
	}
	if _, err := helm(s.t, "install", release, chartDir(s.t), "--namespace", s.ns, "--kubeconfig", s.kubeconfig,
		"--values", path, "--wait=false"); err != nil {
		s.t.Fatalf("helm install: %v", err)
	}
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := helmCtx(ctx, s.t, "uninstall", release, "--namespace", s.ns, "--kubeconfig", s.kubeconfig, "--wait=false"); err != nil {
			s.t.Logf("helm uninstall: %v", err)
		}
	})
}

// waitFor polls cond every second until it holds, failing the test after timeout.
func (s *scenario) waitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			s.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not happen within %v; node runs:\n%s", what, timeout, s.describeRuns())
		}
		time.Sleep(time.Second)
	}
}

// jobsOf returns the Jobs the CronJob created, oldest first.
func (s *scenario) jobsOf(cronJob string) ([]batchv1.Job, error) {
	list, err := s.client.BatchV1().Jobs(s.ns).List(s.t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		for _, o := range j.OwnerReferences {
			if o.Kind == "CronJob" && o.Name == cronJob && o.Controller != nil && *o.Controller {
				out = append(out, j)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp) })
	return out, nil
}

// jobCondition returns the Job's true condition of the given type, or nil.
func jobCondition(j batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// completedJobs counts the CronJob's Jobs that completed.
func (s *scenario) completedJobs(cronJob string) (int, error) {
	jobs, err := s.jobsOf(cronJob)
	n := 0
	for _, j := range jobs {
		if jobCondition(j, batchv1.JobComplete) != nil {
			n++
		}
	}
	return n, err
}

// runsOf returns the node's runs of the Job's Pods.
func (s *scenario) runsOf(job string) []testenv.PodRun {
	var out []testenv.PodRun
	for _, r := range s.node.Runs() {
		if r.Job == job {
			out = append(out, r)
		}
	}
	return out
}

func (s *scenario) describeRuns() string {
	var b strings.Builder
	for _, r := range s.node.Runs() {
		fmt.Fprintf(&b, "  pod %s (job %s): started %s, exit %d (killed %v)\n    stdout: %.400s\n    stderr (tail): %s\n",
			r.Pod, r.Job, r.Started.Format(time.TimeOnly), r.ExitCode, r.Killed, strings.TrimSpace(r.Stdout), tail(r.Stderr, 1200))
	}
	return b.String()
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// report parses a run's report, the last stdout line.
func (s *scenario) report(r testenv.PodRun) runReport {
	s.t.Helper()
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	var rep runReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		s.t.Fatalf("pod %s: the last stdout line is not a run report: %v\nstdout:\n%s\nstderr:\n%s", r.Pod, err, r.Stdout, tail(r.Stderr, 2000))
	}
	return rep
}

// document reads a checkpoint document from its ConfigMap.
func (s *scenario) document(name string) *store.Document {
	s.t.Helper()
	cm, err := s.client.CoreV1().ConfigMaps(s.ns).Get(s.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("checkpoint document %s: %v", name, err)
	}
	doc, _, err := store.Decode("configmap "+name, []byte(cm.Data["state.json"]))
	if err != nil {
		s.t.Fatalf("checkpoint document %s: %v", name, err)
	}
	return doc
}

// leaseTransitions reads a Lease's leaseTransitions.
func (s *scenario) leaseTransitions(name string) int32 {
	s.t.Helper()
	l, err := s.client.CoordinationV1().Leases(s.ns).Get(s.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("lease %s: %v", name, err)
	}
	if l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}

// groupData adds one tick's worth of new records to the org: EventLogFiles of two types for
// group elf, SetupAuditTrail rows and an ApexLog for group objects. It returns the records
// added per source.
type groupData struct {
	mu      sync.Mutex
	lastRow time.Time
}

func (g *groupData) add(t *testing.T, org *simsf.Org, tick int) map[string]int {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	added := map[string]int{}
	now := time.Now().UTC()
	for _, typ := range []string{"API", "URI"} {
		rows := 30 + tick
		if _, err := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly,
			LogDate: now.Truncate(time.Hour).Add(-time.Duration(4-tick) * time.Hour), CreatedDate: now.Add(-time.Minute), Rows: rows}); err != nil {
			t.Fatal(err)
		}
		added["eventlogfile"] += rows
	}
	// Rows strictly after every earlier row and in the past, so a run finds exactly the new ones.
	rows := 5 + tick
	base := now.Add(-time.Second)
	if next := g.lastRow.Add(time.Millisecond); next.After(base) {
		base = next
	}
	if wait := time.Until(base.Add(time.Duration(rows) * time.Millisecond)); wait > 0 {
		time.Sleep(wait + 10*time.Millisecond)
	}
	for i := range rows {
		g.lastRow = base.Add(time.Duration(i) * time.Millisecond)
		if _, err := org.Insert("SetupAuditTrail", simsf.Record{"CreatedDate": g.lastRow,
			"Action": "PermSetAssign", "Section": "Manage Users", "Display": fmt.Sprintf("tick %d row %d", tick, i)}); err != nil {
			t.Fatal(err)
		}
		added["soql"]++
	}
	if _, err := org.AddApexLog(simsf.ApexLogSpec{LogUser: "integration@example.com", StartTime: now.Add(-30 * time.Second),
		Body: []byte(fmt.Sprintf("debug log %d", tick))}); err != nil {
		t.Fatal(err)
	}
	added["apexlog"]++
	return added
}

var twoGroupSources = map[string]any{
	"eventlogfile": map[string]any{"enabled": true, "interval": "Hourly", "event_types": []string{"API", "URI"},
		"settle_window": "0s", "lookback": "48h"},
	"soql": map[string]any{"enabled": true, "objects": []map[string]any{{"name": "SetupAuditTrail",
		"timestamp_field": "CreatedDate", "lookback": "1h", "overlap": "0s"}}},
	"apexlog": map[string]any{"enabled": true, "lookback": "1h"},
}

// TestE2ECronJobsShipTickByTick is the acceptance test of the chart on a cluster: helm installs
// a release with two job groups; within three schedule periods the CronJob controller has
// created a Job for each group on two ticks, each run by one Pod that shipped the records
// added before its tick from the simulated org into the strict receiver, every record exactly
// once. Each group's Lease counts one transition per tick (two CronJobs, two independent leases)
// and each group's ConfigMap document is fenced at that tick's epoch with its checkpoints moved
// on. `helm test` runs sf2loki doctor in the release's Pod and passes.
func TestE2ECronJobsShipTickByTick(t *testing.T) {
	t.Parallel()
	s := newScenario(t, nil)
	var data groupData
	want := data.add(t, s.org, 1)
	s.install("sf2loki", s.values(twoGroupSources, []map[string]any{
		{"name": "elf", "sources": []string{"eventlogfile"}},
		{"name": "objects", "sources": []string{"soql", "apexlog"}},
	}))
	installed := time.Now()

	if _, err := helm(t, "test", "sf2loki", "--namespace", s.ns, "--kubeconfig", s.kubeconfig, "--timeout", "3m"); err != nil {
		t.Errorf("helm test (sf2loki doctor in the release's pod): %v\nnode runs:\n%s", err, s.describeRuns())
	}

	groups := map[string]string{"elf": "sf2loki-elf", "objects": "sf2loki-objects"} // group -> CronJob (<fullname>-<group>)
	type tickState struct {
		transitions int32
		checkpoints map[string]string
	}
	seen := map[string][]tickState{}
	for tick := 1; tick <= 2; tick++ {
		s.waitFor(fmt.Sprintf("tick %d of both job groups", tick), 3*tickPeriod-time.Since(installed), func() (bool, error) {
			for _, cj := range groups {
				if n, err := s.completedJobs(cj); err != nil || n < tick {
					return false, err
				}
			}
			return true, nil
		})
		for group := range groups {
			lease := "sf2loki-" + group // the chart's names: <lease.name>-<group>, <configmap.name>-<group>
			d := s.document("sf2loki-state-" + group)
			st := tickState{transitions: s.leaseTransitions(lease), checkpoints: map[string]string{}}
			for k, c := range d.Checkpoints {
				st.checkpoints[k] = string(c.Value)
			}
			if d.Fence == nil || d.Fence.Lease.Name != lease || d.Fence.Epoch != uint64(tick) {
				t.Errorf("tick %d: group %s document fence %+v, want lease %s at epoch %d", tick, group, d.Fence, lease, tick)
			}
			if st.transitions != int32(tick) {
				t.Errorf("tick %d: lease %s has leaseTransitions %d, want %d (one per run)", tick, lease, st.transitions, tick)
			}
			if prev := seen[group]; len(prev) > 0 {
				moved := false
				for k, v := range st.checkpoints {
					if prev[len(prev)-1].checkpoints[k] != v {
						moved = true
					}
				}
				if !moved {
					t.Errorf("tick %d: group %s checkpoints did not move: %v", tick, group, st.checkpoints)
				}
			}
			seen[group] = append(seen[group], st)
		}
		if tick == 1 {
			for src, n := range data.add(t, s.org, 2) {
				want[src] += n
			}
		}
	}

	for group, cj := range groups {
		jobs, err := s.jobsOf(cj)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs[:2] {
			if jobCondition(j, batchv1.JobComplete) == nil {
				t.Errorf("group %s: Job %s did not complete: %+v", group, j.Name, j.Status.Conditions)
				continue
			}
			runs := s.runsOf(j.Name)
			if len(runs) != 1 {
				t.Errorf("group %s: Job %s ran %d pods, want 1", group, j.Name, len(runs))
				continue
			}
			rep := s.report(runs[0])
			if runs[0].ExitCode != 0 || rep.Outcome != "ok" {
				t.Errorf("group %s: Job %s: exit %d, outcome %q (%s)", group, j.Name, runs[0].ExitCode, rep.Outcome, rep.Error)
			}
			for name, src := range rep.Sources {
				if src.Records > 0 && !slices.Contains(map[string][]string{"elf": {"eventlogfile"}, "objects": {"soql", "apexlog"}}[group], sourceKind(name)) {
					t.Errorf("group %s shipped %s", group, name)
				}
			}
		}
	}
	got := map[string]int{}
	for _, e := range s.lk.Entries() {
		got[e.Label("source")]++
	}
	for src, n := range want {
		if got[src] != n {
			t.Errorf("the receiver holds %d %s entries, want %d (all: %v)", got[src], src, n, got)
		}
	}
	if d := s.lk.Duplicates(); len(d) != 0 {
		t.Errorf("%d duplicate entries in the receiver", len(d))
	}
}

var elfSources = map[string]any{
	"eventlogfile": map[string]any{"enabled": true, "interval": "Hourly", "event_types": []string{"API"},
		"settle_window": "0s", "lookback": "48h"},
}

// TestE2EJobFailurePolicy runs releases whose runs fail, one tick each, and checks what the Job
// controller does with the exit code through the chart's podFailurePolicy and backoffLimit: a
// configuration error (exit 2: the Secret lacks the key file the configuration names) and an
// integrity failure (exit 7: a corrupt checkpoint document) fail the Job at once, with reason
// PodFailurePolicy, after exactly one Pod; an unavailable Salesforce (exit 3) is retried in a
// second Pod and the Job fails only when backoffLimit 1 is spent.
func TestE2EJobFailurePolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		exit     int
		pods     int
		reason   string
		setup    func(s *scenario, values map[string]any)
		prepared func(s *scenario) // after install, before the tick
	}{
		{name: "configuration error", exit: 2, pods: 1, reason: batchv1.JobReasonPodFailurePolicy,
			setup: func(s *scenario, v map[string]any) {
				v["secrets"] = map[string]any{"source": "chart", "data": map[string]any{"another.key": string(s.key)}}
			}},
		{name: "corrupt document", exit: 7, pods: 1, reason: batchv1.JobReasonPodFailurePolicy,
			prepared: func(s *scenario) {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sf2loki-state", Namespace: s.ns},
					Data: map[string]string{"state.json": `{"schema": 1, "checkpoints": {"eventlogfile:API"`}}
				if _, err := s.client.CoreV1().ConfigMaps(s.ns).Create(s.t.Context(), cm, metav1.CreateOptions{}); err != nil {
					s.t.Fatal(err)
				}
			}},
		{name: "Salesforce unavailable", exit: 3, pods: 2, reason: batchv1.JobReasonBackoffLimitExceeded,
			setup: func(s *scenario, v map[string]any) {
				sf := v["config"].(map[string]any)["salesforce"].(map[string]any)
				sf["login_url"] = "http://" + closedAddr(s.t)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t, nil)
			v := s.values(elfSources, nil)
			if c.setup != nil {
				c.setup(s, v)
			}
			if c.prepared != nil {
				c.prepared(s)
			}
			s.install("sf2loki", v)
			var job batchv1.Job
			s.waitFor("the first Job to fail", 3*tickPeriod, func() (bool, error) {
				jobs, err := s.jobsOf("sf2loki")
				if err != nil || len(jobs) == 0 {
					return false, err
				}
				job = jobs[0]
				return jobCondition(job, batchv1.JobFailed) != nil, nil
			})
			failed := jobCondition(job, batchv1.JobFailed)
			if failed.Reason != c.reason {
				t.Errorf("Job %s failed with reason %s (%s), want %s", job.Name, failed.Reason, failed.Message, c.reason)
			}
			if int(job.Status.Failed) != c.pods {
				t.Errorf("Job %s counts %d failed pods, want %d", job.Name, job.Status.Failed, c.pods)
			}
			runs := s.runsOf(job.Name)
			if len(runs) != c.pods {
				t.Fatalf("the node ran %d pods of Job %s, want %d:\n%s", len(runs), job.Name, c.pods, s.describeRuns())
			}
			for _, r := range runs {
				if r.ExitCode != c.exit {
					t.Errorf("pod %s exited %d, want %d\n%s", r.Pod, r.ExitCode, c.exit, s.describeRuns())
				}
				// A configuration the process cannot load ends before any run, without a report.
				if strings.TrimSpace(r.Stdout) == "" {
					if c.exit != 2 || !strings.Contains(r.Stderr, "configuration is invalid") {
						t.Errorf("pod %s printed no run report; stderr:\n%s", r.Pod, tail(r.Stderr, 2000))
					}
				} else if rep := s.report(r); rep.ExitCode != c.exit {
					t.Errorf("pod %s: report says exit %d, want %d", r.Pod, rep.ExitCode, c.exit)
				}
			}
		})
	}
}

// closedAddr returns a loopback address nothing listens on (it was free a moment ago).
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestE2EForbidNeverOverlapsARun shows concurrencyPolicy Forbid on a run longer than the
// period. The chart keeps activeDeadlineSeconds below the period, so a run cannot outlast it
// by itself: the node stand-in holds the first Pod as a node that stopped reporting does (its
// process has exited, the Pod stays Running, its deletion is not confirmed). The Job
// controller fails the Job at activeDeadlineSeconds and deletes the Pod, but the Job stays
// active until the Pod is gone, so on the next tick the CronJob controller starts nothing and
// says so (event JobAlreadyActive). The node reports again only once that tick is past
// startingDeadlineSeconds, so the tick is skipped, not merely delayed; the first Job then ends
// (DeadlineExceeded) and the tick after starts the next Job: no two runs ever overlapped.
func TestE2EForbidNeverOverlapsARun(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		heldPod string
	)
	hold := func(pod *corev1.Pod) <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if heldPod == "" || heldPod == pod.Name {
			heldPod = pod.Name
			return release
		}
		return nil
	}
	s := newScenario(t, hold)
	s.install("sf2loki", s.values(elfSources, nil))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	scheduled := func(j batchv1.Job) time.Time {
		ts, err := time.Parse(time.RFC3339, j.Annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"])
		if err != nil {
			t.Fatalf("Job %s: scheduled timestamp: %v", j.Name, err)
		}
		return ts
	}

	s.waitFor("the CronJob controller to refuse a tick for the running Job", 3*tickPeriod, func() (bool, error) {
		ev, err := s.client.CoreV1().Events(s.ns).List(s.t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=CronJob,involvedObject.name=sf2loki,reason=JobAlreadyActive"})
		return err == nil && len(ev.Items) > 0, err
	})
	jobs, err := s.jobsOf("sf2loki")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs exist while the first one is active, want 1", len(jobs))
	}
	first := jobs[0]
	if c := jobCondition(first, batchv1.JobFailureTarget); c == nil || c.Reason != batchv1.JobReasonDeadlineExceeded {
		t.Errorf("the held Job %s has conditions %+v, want FailureTarget DeadlineExceeded (activeDeadlineSeconds %d)",
			first.Name, first.Status.Conditions, *first.Spec.ActiveDeadlineSeconds)
	}
	mu.Lock()
	held := heldPod
	mu.Unlock()
	pod, err := s.client.CoreV1().Pods(s.ns).Get(t.Context(), held, metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp == nil {
		t.Errorf("the held pod %s was not deleted by the Job controller (err %v)", held, err)
	}
	// Past the refused tick's starting window the controller no longer starts it late.
	cj, err := s.client.BatchV1().CronJobs(s.ns).Get(t.Context(), "sf2loki", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := scheduled(first).Add(tickPeriod)
	window := time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second
	time.Sleep(time.Until(refused.Add(window + time.Second)))
	jobs, err = s.jobsOf("sf2loki")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%d Jobs (err %v) while the first one is held, want 1", len(jobs), err)
	}
	released := time.Now()
	close(release)

	var second batchv1.Job
	s.waitFor("the next Job to complete", 3*tickPeriod, func() (bool, error) {
		jobs, err := s.jobsOf("sf2loki")
		if err != nil || len(jobs) < 2 {
			return false, err
		}
		first, second = jobs[0], jobs[1]
		return jobCondition(second, batchv1.JobComplete) != nil, nil
	})
	failed := jobCondition(first, batchv1.JobFailed)
	if failed == nil || failed.Reason != batchv1.JobReasonDeadlineExceeded {
		t.Errorf("the first Job ended with %+v, want Failed DeadlineExceeded", first.Status.Conditions)
	} else if second.CreationTimestamp.Time.Before(failed.LastTransitionTime.Time) {
		t.Errorf("Job %s was created at %s, before Job %s ended at %s", second.Name, second.CreationTimestamp, first.Name, failed.LastTransitionTime)
	}
	if got := scheduled(second); got.Before(refused.Add(tickPeriod)) {
		t.Errorf("Job %s was scheduled for %s, the refused tick was %s: it was started late instead of skipped",
			second.Name, got.Format(time.TimeOnly), refused.Format(time.TimeOnly))
	}
	runs := s.node.Runs()
	for i, r := range runs {
		if i > 0 && r.Started.Before(released) {
			t.Errorf("pod %s started at %s while the held pod %s was still running", r.Pod, r.Started.Format(time.TimeOnly), held)
		}
	}
	if got := s.runsOf(second.Name); len(got) != 1 || got[0].ExitCode != 0 {
		t.Errorf("Job %s: node runs %+v, want one that exited 0", second.Name, got)
	}
	if _, err := s.client.CoreV1().Pods(s.ns).Get(t.Context(), held, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the held pod %s is still there once the node reported it (err %v)", held, err)
	}
}
