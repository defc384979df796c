package deploytest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// warnings collects the API server's warnings (PodSecurity admission reports through them).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// restrictedNamespace creates a namespace whose PodSecurity admission enforces, and warns
// about, the "restricted" profile.
func restrictedNamespace(t *testing.T, k *testenv.Kube) string {
	t.Helper()
	ns := k.NewNamespace(t)
	admin := k.AdminClient(t)
	n, err := admin.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for _, mode := range []string{"enforce", "warn", "audit"} {
		n.Labels["pod-security.kubernetes.io/"+mode] = "restricted"
		n.Labels["pod-security.kubernetes.io/"+mode+"-version"] = "latest"
	}
	if _, err := admin.CoreV1().Namespaces().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// externalSecretCRD installs a minimal ExternalSecret CustomResourceDefinition (the group,
// version and kind the chart renders, any spec) once per API server.
func externalSecretCRD(t *testing.T, k *testenv.Kube) {
	t.Helper()
	installCRD(t, k, "ExternalSecret", "externalsecrets", "externalsecret")
}

// monitoringCRDs installs minimal Prometheus Operator ServiceMonitor and PrometheusRule
// CustomResourceDefinitions once per API server.
func monitoringCRDs(t *testing.T, k *testenv.Kube) {
	t.Helper()
	installCRD(t, k, "ServiceMonitor", "servicemonitors", "servicemonitor")
	installCRD(t, k, "PrometheusRule", "prometheusrules", "prometheusrule")
}

// installCRD installs a CustomResourceDefinition for kind (group and version from gvr, any
// spec) unless it exists, and waits until it is served.
func installCRD(t *testing.T, k *testenv.Kube, kind, plural, singular string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(k.RESTConfig(k.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	res := gvr[kind]
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + res.Group},
		"spec": map[string]any{
			"group": res.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": singular, "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": res.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	_, err = dyn.Resource(crdGVR).Create(t.Context(), crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the %s CRD: %v", kind, err)
	}
	// The resource is served once the CRD is established; probe with a list.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dyn.Resource(res).Namespace("default").List(t.Context(), metav1.ListOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s CRD not served: %v", kind, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createAll creates every object in namespace ns, first as a server-side dry run and then for
// real, failing on any error or API warning.
func createAll(t *testing.T, k *testenv.Kube, ns string, m manifests) {
	t.Helper()
	w := &warnings{}
	cfg := k.RESTConfig(k.AdminToken)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, dryRun := range [][]string{{metav1.DryRunAll}, nil} {
		for _, o := range m {
			res, ok := gvr[o.GetKind()]
			if !ok {
				t.Fatalf("no resource known for kind %s", o.GetKind())
			}
			if o.GetNamespace() != ns {
				t.Fatalf("%s/%s renders into namespace %q, not the release namespace %q", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
			}
			_, err := dyn.Resource(res).Namespace(ns).Create(t.Context(), o.DeepCopy(), metav1.CreateOptions{DryRun: dryRun, FieldValidation: "Strict"})
			if err != nil {
				t.Fatalf("create %s/%s (dry run %v): %v", o.GetKind(), o.GetName(), dryRun != nil, err)
			}
			for _, msg := range w.take() {
				t.Errorf("create %s/%s (dry run %v): API warning: %s", o.GetKind(), o.GetName(), dryRun != nil, msg)
			}
		}
	}
}

// TestE2EChartObjectsAcceptedByAPIServer creates every rendered object of every tested
// combination on a real kube-apiserver: server-side dry run, then for real, with strict field
// validation, in a namespace enforcing the "restricted" Pod Security profile. The pod template
// of each workload is also created as a bare Pod, which that admission checks in full.
func TestE2EChartObjectsAcceptedByAPIServer(t *testing.T) {
	k := testenv.SharedKube(t)
	for _, c := range renderCases {
		t.Run(c.name, func(t *testing.T) {
			switch c.name {
			case "external-secrets":
				externalSecretCRD(t, k)
			case "monitoring":
				monitoringCRDs(t, k)
			}
			ns := restrictedNamespace(t, k)
			m := parseManifests(t, c.render(t, ns))
			createAll(t, k, ns, m)
			admin := k.AdminClient(t)
			for i, p := range m.podTemplates(t) {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("template-%d", i), Namespace: ns}, Spec: *p.spec.DeepCopy()}
				if pod.Spec.RestartPolicy == "" {
					pod.Spec.RestartPolicy = corev1.RestartPolicyNever
				}
				for _, dryRun := range [][]string{{metav1.DryRunAll}, nil} {
					if _, err := admin.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: dryRun}); err != nil {
						t.Fatalf("%s: the pod template is refused (dry run %v): %v", p.owner, dryRun != nil, err)
					}
				}
			}
		})
	}
}

// TestE2EHelmInstallPrintsHowToSeeTheReport installs the default chart with helm itself (a
// server dry run, then for real) and checks NOTES.txt tells how to read the last run's report.
func TestE2EHelmInstallPrintsHowToSeeTheReport(t *testing.T) {
	k := testenv.SharedKube(t)
	ns := restrictedNamespace(t, k)
	kubeconfig := writeKubeconfig(t, k, k.AdminToken)
	for _, dry := range []bool{true, false} {
		args := []string{"install", "sf2loki", chartDir(t), "--namespace", ns, "--kubeconfig", kubeconfig, "--wait=false"}
		if dry {
			args = append(args, "--dry-run=server")
		}
		out, err := helm(t, args...)
		if err != nil {
			t.Fatalf("helm install (dry run %v): %v", dry, err)
		}
		for _, want := range []string{"kubectl -n " + ns + " logs", `grep '"exit_code"' | tail -n 1`, "create job --from=cronjob/sf2loki", "sf2loki-state"} {
			if !strings.Contains(out, want) {
				t.Errorf("NOTES (dry run %v) do not say %q:\n%s", dry, want, out)
			}
		}
	}
	cj, err := k.AdminClient(t).BatchV1().CronJobs(ns).Get(t.Context(), "sf2loki", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if cj.Spec.JobTemplate.Spec.PodFailurePolicy == nil || cj.Spec.JobTemplate.Spec.PodReplacementPolicy == nil {
		t.Fatal("the API server dropped podFailurePolicy or podReplacementPolicy")
	}
	if _, err := helm(t, "uninstall", "sf2loki", "--namespace", ns, "--kubeconfig", kubeconfig); err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes a kubeconfig for the API server authenticating with token.
func writeKubeconfig(t *testing.T, k *testenv.Kube, token string) string {
	t.Helper()
	path := t.TempDir() + "/kubeconfig"
	if err := k.WriteKubeconfig(path, token); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceAccountConfig returns a client configuration that authenticates as the ServiceAccount
// itself, with a token from the TokenRequest API (what the kubelet mounts into the pod).
func serviceAccountConfig(t *testing.T, k *testenv.Kube, ns, name string) *rest.Config {
	t.Helper()
	exp := int64(600)
	tr, err := k.AdminClient(t).CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	cfg := k.RESTConfig(tr.Status.Token)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview as %s/%s: %v", ns, name, err)
	}
	if want := "system:serviceaccount:" + ns + ":" + name; review.Status.UserInfo.Username != want {
		t.Fatalf("authenticated as %q, want %q", review.Status.UserInfo.Username, want)
	}
	return cfg
}
