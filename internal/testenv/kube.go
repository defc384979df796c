package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeUsers are the pre-provisioned least-privilege users: authenticated (group
// system:authenticated only) but granted nothing until a test binds them with RBAC.
var KubeUsers = []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6", "user-7", "user-8"}

// Kube is a real kube-apiserver on its own etcd, with token authentication and RBAC
// authorization. There are no controllers: deleted namespaces stay Terminating, which no test
// needs to observe.
type Kube struct {
	// Host is the API server URL, e.g. "https://127.0.0.1:41234".
	Host string
	// CAData is the PEM bundle that verifies the server's self-signed certificate.
	CAData []byte
	// AdminToken authenticates as user "admin" in group system:masters.
	AdminToken string

	userTokens map[string]string
	procs      []*process // etcd first
}

// StartKube starts etcd and kube-apiserver for this test on random loopback ports and stops
// them when the test ends. Prefer SharedKube unless the test needs a server of its own.
func StartKube(t testing.TB) *Kube {
	t.Helper()
	etcdBin := needTool(t, "Kubernetes API server (etcd)", ToolEtcd)
	apiBin := needTool(t, "Kubernetes API server", ToolKubeAPIServer)
	k, err := startKube(t.Context(), etcdBin, apiBin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, k.procs...)
	return k
}

var sharedKube struct {
	sync.Mutex
	started bool
	kube    *Kube
	toolErr error // the binaries cannot be obtained: skip or fail per policy
	err     error // they were obtained but did not start: fail
}

// SharedKube returns the test binary's one kube-apiserver, starting it on first use; Main
// stops it. Tests sharing it should work in their own namespace (NewNamespace).
func SharedKube(t testing.TB) *Kube {
	t.Helper()
	skipShort(t, "Kubernetes API server")
	if !mainRunning() {
		t.Fatal("testenv.SharedKube needs TestMain to call testenv.Main(m)")
	}
	sharedKube.Lock()
	defer sharedKube.Unlock()
	if !sharedKube.started {
		sharedKube.started = true
		sharedKube.kube, sharedKube.toolErr, sharedKube.err = startSharedKube()
	}
	if sharedKube.toolErr != nil {
		unavailable(t, "Kubernetes API server", sharedKube.toolErr)
	}
	if sharedKube.err != nil {
		t.Fatal(sharedKube.err)
	}
	return sharedKube.kube
}

func startSharedKube() (k *Kube, toolErr, err error) {
	ctx := context.Background()
	etcdBin, err := EnsureTool(ctx, ToolEtcd)
	if err != nil {
		return nil, err, nil
	}
	apiBin, err := EnsureTool(ctx, ToolKubeAPIServer)
	if err != nil {
		return nil, err, nil
	}
	dir, err := os.MkdirTemp("", "sf2loki-kube-")
	if err != nil {
		return nil, nil, err
	}
	k, err = startKube(ctx, etcdBin, apiBin, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	registerShared("kube-apiserver", func() {
		k.stop()
		_ = os.RemoveAll(dir)
	}, func() string {
		var b strings.Builder
		for _, p := range k.procs {
			b.WriteString(p.tail() + "\n")
		}
		return b.String()
	})
	return k, nil, nil
}

func (k *Kube) stop() {
	for i := len(k.procs) - 1; i >= 0; i-- {
		k.procs[i].stop()
	}
}

func startKube(ctx context.Context, etcdBin, apiBin, dir string) (*Kube, error) {
	etcd, err := retryOnPortConflict(func() (*etcdServer, error) {
		return startEtcd(ctx, etcdBin, dir)
	})
	if err != nil {
		return nil, err
	}
	k, err := retryOnPortConflict(func() (*Kube, error) {
		return startAPIServer(ctx, apiBin, dir, etcd.url)
	})
	if err != nil {
		etcd.proc.stop()
		return nil, err
	}
	k.procs = append([]*process{etcd.proc}, k.procs...)
	return k, nil
}

type etcdServer struct {
	proc *process
	url  string // client URL
}

// startEtcd runs a single-member etcd with client and peer on fresh loopback ports.
func startEtcd(ctx context.Context, bin, dir string) (*etcdServer, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	data := filepath.Join(dir, "etcd-data")
	_ = os.RemoveAll(data) // a failed earlier attempt must not leave a member with other URLs
	args := []string{
		"--name=sf2loki-test",
		"--data-dir=" + data,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=sf2loki-test=" + peerURL,
		"--logger=zap",
		"--log-level=warn",
	}
	p, err := startProcess("etcd", filepath.Join(dir, "etcd.log"), bin, args, nil)
	if err != nil {
		return nil, err
	}
	err = p.waitReady(ctx, func(ctx context.Context) error {
		body, err := httpGet(ctx, http.DefaultClient, clientURL+"/health", "")
		if err == nil && !strings.Contains(body, `"health":"true"`) {
			err = fmt.Errorf("etcd /health: %s", body)
		}
		return err
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return &etcdServer{proc: p, url: clientURL}, nil
}

// startAPIServer runs kube-apiserver against etcdURL with token authentication and RBAC.
func startAPIServer(ctx context.Context, bin, dir, etcdURL string) (*Kube, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "certs")
	_ = os.RemoveAll(certDir) // the generated certificate names the port of an earlier attempt
	k := &Kube{
		Host:       "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		AdminToken: randomHex(16),
		userTokens: map[string]string{},
	}
	tokens := fmt.Sprintf("%s,admin,uid-admin,\"system:masters\"\n", k.AdminToken)
	for _, u := range KubeUsers {
		k.userTokens[u] = randomHex(16)
		tokens += fmt.Sprintf("%s,%s,uid-%s\n", k.userTokens[u], u, u)
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	saKey, saPub, err := writeServiceAccountKeys(dir)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
	}
	p, err := startProcess("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), bin, args, nil)
	if err != nil {
		return nil, err
	}
	k.procs = []*process{p}
	// The server writes its self-signed certificate (with the CA that signed it) on startup; it
	// is the trust root for every client.
	if k.CAData, err = p.waitServing(ctx, filepath.Join(certDir, "apiserver.crt"), k.Host+"/readyz", k.AdminToken); err != nil {
		return nil, err
	}
	return k, nil
}

// writeServiceAccountKeys writes the RSA key pair kube-apiserver signs service-account tokens with.
func writeServiceAccountKeys(dir string) (keyPath, pubPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// httpGet returns the body of a 200 answer, with a bearer token when token is set.
func httpGet(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// RESTConfig returns a client configuration that authenticates with token (AdminToken or a
// UserToken). Client-side rate limiting is off so tests are never throttled by client-go.
func (k *Kube) RESTConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            k.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.CAData},
		QPS:             -1,
	}
}

// AdminClient returns a clientset acting as the cluster admin (system:masters).
func (k *Kube) AdminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(k.RESTConfig(k.AdminToken))
	if err != nil {
		t.Fatalf("admin clientset: %v", err)
	}
	return c
}

// UserToken returns the bearer token of a pre-provisioned user ("user-1".."user-8"), which is
// authenticated but has no permissions until bound with RBAC. It panics on another name.
func (k *Kube) UserToken(name string) string {
	tok, ok := k.userTokens[name]
	if !ok {
		panic(fmt.Sprintf("testenv: no kube user %q (have %s)", name, strings.Join(KubeUsers, ", ")))
	}
	return tok
}

// Grant creates in ns a Role named "sf2loki-<user>" holding rules and binds user to it (a
// pre-provisioned user such as "user-1"). The RBAC authorizer sees new bindings through an
// informer, so Grant returns only once it allows the first verb of the first rule; it fails the
// test on error or if that takes more than 30 seconds.
func (k *Kube) Grant(t testing.TB, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	admin := k.AdminClient(t)
	name := "sf2loki-" + user
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role %s/%s: %v", ns, name, err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind role %s/%s to %s: %v", ns, name, user, err)
	}
	if len(rules) == 0 || len(rules[0].Verbs) == 0 {
		return
	}
	r := rules[0]
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return s[0]
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: first(r.APIGroups),
			Resource: first(r.Resources), Name: first(r.ResourceNames)}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("review the grant to %s in %s: %v", user, ns, err)
		}
		if got.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("RBAC does not allow %s to %s %s in %s 30s after the binding", user, r.Verbs[0], first(r.Resources), ns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NewNamespace creates a namespace with a fresh name and deletes it when the test ends.
func (k *Kube) NewNamespace(t testing.TB) string {
	t.Helper()
	c := k.AdminClient(t)
	name := "sf2loki-test-" + randomHex(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	return name
}
