package opstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sf2loki/sf2loki/doctor"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
)

// s3State returns the state section of an S3 store on srv (endpoint overridable for a proxy).
func s3State(srv *testenv.S3, bucket, key, endpoint string) string {
	if endpoint == "" {
		endpoint = srv.Endpoint
	}
	return fmt.Sprintf("store: s3\n  s3:\n    bucket: %s\n    key: %s\n    endpoint: %s\n    region: %s\n    path_style: true\n    access_key_id: %s\n    secret_access_key: %s",
		bucket, key, endpoint, srv.Region, srv.AccessKey, srv.SecretKey)
}

// preconditionStripper is an S3 endpoint that ignores If-Match and If-None-Match: a proxy in
// front of versitygw that removes the conditional headers and signs the request again (they
// are covered by SigV4), the way a non-conforming S3-compatible store behaves.
type preconditionStripper struct {
	target *url.URL
	srv    *testenv.S3
	URL    string
}

func newPreconditionStripper(t *testing.T, srv *testenv.S3) *preconditionStripper {
	t.Helper()
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &preconditionStripper{target: u, srv: srv}
	hs := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(hs.Close)
	p.URL = hs.URL
	return p
}

func (p *preconditionStripper) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = p.target.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Del("If-Match")
	out.Header.Del("If-None-Match")
	out.Header.Del("Authorization")
	hash := out.Header.Get("X-Amz-Content-Sha256")
	creds := aws.Credentials{AccessKeyID: p.srv.AccessKey, SecretAccessKey: p.srv.SecretKey}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, out, hash, "s3", p.srv.Region, time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func TestE2EDoctorS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	bucket := srv.NewBucket(t)
	e := newDoctorEnv(t, simsf.AllPermissions())
	e.s.state = s3State(srv, bucket, "sf2loki/state.json", "")
	e.cfg = e.s.write(t)
	firstRun(t, e.cfg)
	res, rep := runDoctor(t, e.cfg)
	if res.code != 0 {
		t.Fatalf("clean S3 setup: %s", res)
	}
	requireStatuses(t, rep, "PASS", nil)

	t.Run("endpoint ignores preconditions", func(t *testing.T) {
		strip := newPreconditionStripper(t, srv)
		e.s.state = s3State(srv, bucket, "sf2loki/state.json", strip.URL)
		rep := checkFault(t, e.s.write(t), "store.probe", "If-Match", nil)
		if m := rep.byID()["store.probe"].Message; !strings.Contains(m, "ignores preconditions") {
			t.Errorf("store.probe message %q", m)
		}
	})
}

func TestE2EDoctorGCS(t *testing.T) {
	g := testenv.StartGCS(t)
	bucket := g.NewBucket(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(g.URL, "http://"))
	e := newDoctorEnv(t, simsf.AllPermissions())
	e.s.state = fmt.Sprintf("store: gcs\n  gcs:\n    bucket: %s\n    object: sf2loki/state.json\n    endpoint: %s", bucket, g.Endpoint)
	e.cfg = e.s.write(t)
	firstRun(t, e.cfg)
	res, rep := runDoctor(t, e.cfg)
	if res.code != 0 {
		t.Fatalf("clean GCS setup: %s", res)
	}
	requireStatuses(t, rep, "PASS", nil)
}

// kubeAccess is what a least-privilege service account of sf2loki may do: get and update its
// Lease and ConfigMap by name, create them unscoped (RBAC cannot name an object not yet
// created), nothing else.
type kubeAccess struct {
	leaseVerbs     []string // of get, update (scoped); create is added unless noLeaseCreate
	noLeaseCreate  bool
	configMapVerbs []string
}

// kubeSetup binds user to the access in ns and writes a kubeconfig for the user.
func kubeSetup(t *testing.T, k *testenv.Kube, ns, user string, a kubeAccess) string {
	t.Helper()
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"sf2loki"}, Verbs: a.leaseVerbs},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"sf2loki-state"}, Verbs: a.configMapVerbs},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
	}
	if !a.noLeaseCreate {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}})
	}
	k.Grant(t, ns, user, rules...)
	return writeKubeconfig(t, k, k.UserToken(user))
}

func writeKubeconfig(t *testing.T, k *testenv.Kube, token string) string {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, k.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: test
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
`, k.Host, ca, token)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeSections returns the state and lease sections of a ConfigMap store and a Kubernetes
// lease in ns.
func kubeSections(ns, kubeconfig string) (state, lease string) {
	state = fmt.Sprintf("store: configmap\n  configmap:\n    namespace: %s\n    name: sf2loki-state\n    kubeconfig: %s", ns, kubeconfig)
	lease = fmt.Sprintf("type: kubernetes\n  namespace: %s\n  name: sf2loki\n  kubeconfig: %s", ns, kubeconfig)
	return state, lease
}

func TestE2EDoctorKubernetes(t *testing.T) {
	k := testenv.SharedKube(t)
	ns := k.NewNamespace(t)
	full := kubeAccess{leaseVerbs: []string{"get", "update"}, configMapVerbs: []string{"get", "update"}}
	kc := kubeSetup(t, k, ns, "user-1", full)
	e := newDoctorEnv(t, simsf.AllPermissions())
	e.s.state, e.s.lease = kubeSections(ns, kc)
	e.cfg = e.s.write(t)
	firstRun(t, e.cfg)
	admin := k.AdminClient(t)
	leaseBefore, err := admin.CoordinationV1().Leases(ns).Get(t.Context(), "sf2loki", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, rep := runDoctor(t, e.cfg)
	if res.code != 0 {
		t.Fatalf("clean Kubernetes setup: %s", res)
	}
	requireStatuses(t, rep, "PASS", nil)
	leaseAfter, err := admin.CoordinationV1().Leases(ns).Get(t.Context(), "sf2loki", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if leaseAfter.ResourceVersion != leaseBefore.ResourceVersion {
		t.Fatal("doctor wrote the real Lease (its dry runs must persist nothing)")
	}

	t.Run("RBAC missing update on leases", func(t *testing.T) {
		kc := kubeSetup(t, k, ns, "user-2", kubeAccess{leaseVerbs: []string{"get"}, configMapVerbs: []string{"get", "update"}})
		e.s.state, e.s.lease = kubeSections(ns, kc)
		rep := checkFault(t, e.s.write(t), "lease.rbac", "update", nil)
		if m := rep.byID()["lease.rbac"].Message; !strings.Contains(m, "lacks update") {
			t.Errorf("lease.rbac message %q", m)
		}
	})
	t.Run("RBAC missing create on an existing lease warns", func(t *testing.T) {
		kc := kubeSetup(t, k, ns, "user-3", kubeAccess{leaseVerbs: []string{"get", "update"}, noLeaseCreate: true, configMapVerbs: []string{"get", "update"}})
		e.s.state, e.s.lease = kubeSections(ns, kc)
		_, rep := runDoctor(t, e.s.write(t))
		requireStatuses(t, rep, "PASS", map[string]doctor.Status{"lease.rbac": doctor.StatusWarn})
	})
}

// TestE2EStateAndLeaseKubernetes: state set through a Kubernetes Lease and a ConfigMap
// document (acquire, claim, commit, release under least-privilege RBAC); lease release of an
// expired holder keeps the epoch; a live holder needs --force.
func TestE2EStateAndLeaseKubernetes(t *testing.T) {
	k := testenv.SharedKube(t)
	ns := k.NewNamespace(t)
	kc := kubeSetup(t, k, ns, "user-4", kubeAccess{leaseVerbs: []string{"get", "update"}, configMapVerbs: []string{"get", "update"}})
	e := newDoctorEnv(t, simsf.AllPermissions())
	e.s.state, e.s.lease = kubeSections(ns, kc)
	e.cfg = e.s.write(t)
	firstRun(t, e.cfg)
	admin := k.AdminClient(t)
	ctx := t.Context()

	if r := run("--config", e.cfg, "state", "set", "eventlogfile:Login", operatorValue, "--wait", "2s"); r.code != 0 {
		t.Fatalf("state set: %s", r)
	}
	le, err := admin.CoordinationV1().Leases(ns).Get(ctx, "sf2loki", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	show := run("--config", e.cfg, "state", "show", "--json")
	var doc struct {
		Fence       *store.Fence                `json:"fence"`
		Checkpoints map[string]store.Checkpoint `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(show.stdout), &doc); err != nil {
		t.Fatal(err, show)
	}
	if doc.Fence.Epoch != uint64(*le.Spec.LeaseTransitions) || doc.Fence.Lease.Kind != "Lease" || !strings.Contains(string(doc.Checkpoints["eventlogfile:Login"].Value), "0AT000000000999AAA") {
		t.Fatalf("after state set: fence %+v, lease transitions %d, checkpoints %v", doc.Fence, *le.Spec.LeaseTransitions, doc.Checkpoints)
	}
	if le.Spec.HolderIdentity != nil && *le.Spec.HolderIdentity != "" {
		t.Fatalf("the maintenance holder did not release the Lease: %q", *le.Spec.HolderIdentity)
	}

	// A holder that stopped renewing ten minutes ago.
	setHolder := func(holder string, renewed time.Time) int32 {
		le, err := admin.CoordinationV1().Leases(ns).Get(ctx, "sf2loki", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rt := metav1.NewMicroTime(renewed)
		le.Spec.HolderIdentity, le.Spec.RenewTime = &holder, &rt
		if _, err := admin.CoordinationV1().Leases(ns).Update(ctx, le, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return *le.Spec.LeaseTransitions
	}
	transitions := setHolder("crashed-pod/abc", time.Now().Add(-10*time.Minute))
	if r := run("--config", e.cfg, "lease", "show"); r.code != 0 || !strings.Contains(r.stdout, "not renewed for") {
		t.Fatalf("lease show of an expired holder: %s", r)
	}
	if r := run("--config", e.cfg, "lease", "release"); r.code != 0 || !strings.Contains(r.stdout, "expired") {
		t.Fatalf("lease release of an expired holder: %s", r)
	}
	le, err = admin.CoordinationV1().Leases(ns).Get(ctx, "sf2loki", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if le.Spec.HolderIdentity != nil || *le.Spec.LeaseTransitions != transitions {
		t.Fatalf("after release: holder %v, transitions %d (want nil, %d)", le.Spec.HolderIdentity, *le.Spec.LeaseTransitions, transitions)
	}

	// A live holder: refused without --force; --force takes it over and the claim fences it.
	setHolder("live-pod/def", time.Now())
	if r := run("--config", e.cfg, "state", "set", "eventlogfile:Login", operatorValue, "--wait", "300ms"); r.code != 5 {
		t.Fatalf("state set with a live Kubernetes holder: %s", r)
	}
	if r := run("--config", e.cfg, "lease", "release"); r.code != 5 {
		t.Fatalf("lease release of a live holder: %s", r)
	}
	r := run("--config", e.cfg, "state", "set", "eventlogfile:Login", operatorValue, "--wait", "2s", "--force")
	if r.code != 0 || !strings.Contains(r.stderr, "live-pod/def") {
		t.Fatalf("state set --force: %s", r)
	}
}
