package deploytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// kubeVersion is the Kubernetes version renders are made for (the version the harness's
// kube-apiserver runs).
const kubeVersion = "1.34.2"

// envUpdateGolden regenerates the golden renders instead of comparing with them.
const envUpdateGolden = "SF2LOKI_UPDATE_GOLDEN"

// repoRoot returns the repository root (where go.mod is).
func repoRoot(t testing.TB) string {
	t.Helper()
	// The working directory, not runtime.Caller: make test builds with -trimpath, which turns
	// source paths into module paths. go test runs a package's tests in its directory.
	start, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := start
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above " + start)
		}
		dir = parent
	}
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "sf2loki") }

// helmBin returns the helm binary from the tool cache: skipped under -short; when it cannot be
// built, a failure with SF2LOKI_REQUIRE_REAL_SERVERS=1 and a skip otherwise.
func helmBin(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs helm (built once into the tool cache); runs without -short")
	}
	p, err := testenv.EnsureTool(t.Context(), testenv.ToolHelm)
	if err != nil {
		if os.Getenv(testenv.EnvRequireRealServers) == "1" {
			t.Fatalf("helm cannot be obtained here: %v", err)
		}
		t.Skipf("helm cannot be obtained here (set %s=1 to fail instead): %v", testenv.EnvRequireRealServers, err)
	}
	return p
}

// helm runs the helm binary with private cache, config and data directories and returns its
// stdout; an error carries stderr.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return helmCtx(t.Context(), t, args...)
}

// helmCtx is helm with its own context, e.g. for a cleanup (t.Context is canceled by then).
func helmCtx(ctx context.Context, t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin := helmBin(t)
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// renderCase is one combination of values rendered by the tests (and kept as a golden file).
type renderCase struct {
	name   string   // golden file name
	values []string // files under testdata/values
	set    []string // --set arguments
}

// renderCases are the main value combinations.
var renderCases = []renderCase{
	{name: "default"},
	{name: "jobgroups", values: []string{"jobgroups.yaml"}},
	{name: "schedule-mode", values: []string{"schedule-mode.yaml"}},
	{name: "file-store", values: []string{"file-store.yaml"}},
	{name: "store-lease-s3", values: []string{"store-lease-s3.yaml"}},
	{name: "chart-secret", values: []string{"chart-secret.yaml"}},
	{name: "external-secrets", values: []string{"external-secrets.yaml"}},
	{name: "existing-serviceaccount", values: []string{"existing-serviceaccount.yaml"}},
	{name: "strict-allow", values: []string{"strict-allow.yaml"}},
	{name: "openshift", values: []string{"openshift.yaml"}},
	{name: "config-configmap", values: []string{"config-configmap.yaml"}},
	{name: "monitoring", values: []string{"monitoring.yaml"}},
	{name: "conventions", values: []string{"conventions.yaml"}},
}

func (c renderCase) args(t testing.TB, release, namespace string) []string {
	args := []string{"template", release, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
	for _, v := range c.values {
		args = append(args, "--values", filepath.Join(repoRoot(t), "internal", "deploytest", "testdata", "values", v))
	}
	for _, s := range c.set {
		args = append(args, "--set", s)
	}
	return args
}

// render renders the chart for c as release "sf2loki" in namespace.
func (c renderCase) render(t testing.TB, namespace string) string {
	t.Helper()
	out, err := helm(t, c.args(t, "sf2loki", namespace)...)
	if err != nil {
		t.Fatalf("render %s: %v", c.name, err)
	}
	return out
}

// manifests is a render split into objects.
type manifests []*unstructured.Unstructured

// parseManifests decodes a multi-document YAML stream, skipping empty documents.
func parseManifests(t testing.TB, stream string) manifests {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var out manifests
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// ofKind returns the objects of one kind, sorted by namespace and name.
func (m manifests) ofKind(kind string) manifests {
	var out manifests
	for _, o := range m {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out
}

// kinds lists "Kind/name" of every object, for messages.
func (m manifests) kinds() []string {
	var out []string
	for _, o := range m {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func convert[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s/%s is not a valid %T: %v", o.GetKind(), o.GetName(), v, err)
	}
	return &v
}

func (m manifests) cronJobs(t testing.TB) []*batchv1.CronJob {
	var out []*batchv1.CronJob
	for _, o := range m.ofKind("CronJob") {
		out = append(out, convert[batchv1.CronJob](t, o))
	}
	return out
}

func (m manifests) deployments(t testing.TB) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, o := range m.ofKind("Deployment") {
		out = append(out, convert[appsv1.Deployment](t, o))
	}
	return out
}

func (m manifests) roles(t testing.TB) []*rbacv1.Role {
	var out []*rbacv1.Role
	for _, o := range m.ofKind("Role") {
		out = append(out, convert[rbacv1.Role](t, o))
	}
	return out
}

func (m manifests) roleBindings(t testing.TB) []*rbacv1.RoleBinding {
	var out []*rbacv1.RoleBinding
	for _, o := range m.ofKind("RoleBinding") {
		out = append(out, convert[rbacv1.RoleBinding](t, o))
	}
	return out
}

// configYAML returns the sf2loki configuration the chart rendered into its Secret (or, with
// configStorage.type ConfigMap, its ConfigMap).
func (m manifests) configYAML(t testing.TB) string {
	t.Helper()
	for _, o := range m.ofKind("Secret") {
		s := convert[corev1.Secret](t, o)
		if c, ok := s.StringData["config.yaml"]; ok {
			return c
		}
		if c, ok := s.Data["config.yaml"]; ok {
			return string(c)
		}
	}
	for _, o := range m.ofKind("ConfigMap") {
		cm := convert[corev1.ConfigMap](t, o)
		if c, ok := cm.Data["config.yaml"]; ok {
			return c
		}
	}
	t.Fatalf("no Secret or ConfigMap with config.yaml among %v", m.kinds())
	return ""
}

// podTemplate is one rendered pod template with the workload it belongs to.
type podTemplate struct {
	owner string // "CronJob/name" or "Deployment/name"
	spec  corev1.PodSpec
}

func (m manifests) podTemplates(t testing.TB) []podTemplate {
	var out []podTemplate
	for _, cj := range m.cronJobs(t) {
		out = append(out, podTemplate{"CronJob/" + cj.Name, cj.Spec.JobTemplate.Spec.Template.Spec})
	}
	for _, d := range m.deployments(t) {
		out = append(out, podTemplate{"Deployment/" + d.Name, d.Spec.Template.Spec})
	}
	for _, o := range m.ofKind("Pod") {
		p := convert[corev1.Pod](t, o)
		out = append(out, podTemplate{"Pod/" + p.Name, p.Spec})
	}
	return out
}

// envOf returns a container's plain env values by name.
func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

// gvr maps the kinds the chart renders onto their resources (for the dynamic client).
var gvr = map[string]schema.GroupVersionResource{
	"ServiceAccount":        {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":             {Version: "v1", Resource: "configmaps"},
	"Secret":                {Version: "v1", Resource: "secrets"},
	"PersistentVolumeClaim": {Version: "v1", Resource: "persistentvolumeclaims"},
	"Role":                  {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"CronJob":               {Group: "batch", Version: "v1", Resource: "cronjobs"},
	"Deployment":            {Group: "apps", Version: "v1", Resource: "deployments"},
	"ExternalSecret":        {Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"},
	"Pod":                   {Version: "v1", Resource: "pods"},
	"Service":               {Version: "v1", Resource: "services"},
	"NetworkPolicy":         {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	"ServiceMonitor":        {Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"},
	"PrometheusRule":        {Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"},
}
