package deploytest

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// plainManifests reads deploy/kubernetes/*.yaml in apply order.
func plainManifests(t testing.TB) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	sort.Strings(files)
	var all []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, string(raw))
	}
	return parseManifests(t, strings.Join(all, "\n---\n"))
}

// TestPlainManifests holds the manifests for people without Helm to the chart's standards:
// hardened pods, the token mounted only into the job, a Role of exactly the job's operations on
// the names its configuration uses, and the time budget (docs/fencing.md) with config.Load accepting the
// configuration and the CronJob's environment.
func TestPlainManifests(t *testing.T) {
	m := plainManifests(t)
	for _, o := range m {
		if o.GetKind() != "Namespace" && o.GetNamespace() != "sf2loki" {
			t.Errorf("%s/%s is not in the namespace sf2loki", o.GetKind(), o.GetName())
		}
	}
	pods := m.podTemplates(t)
	if len(pods) != 1 {
		t.Fatalf("%d workloads, want the one CronJob", len(pods))
	}
	checkHardened(t, pods[0])
	if a := pods[0].spec.AutomountServiceAccountToken; a == nil || !*a {
		t.Error("the job's pod does not mount the ServiceAccount token its lease and store need")
	}
	for _, sa := range m.ofKind("ServiceAccount") {
		if v, ok := sa.Object["automountServiceAccountToken"].(bool); !ok || v {
			t.Errorf("ServiceAccount %s mounts its token by default", sa.GetName())
		}
	}

	cj := m.cronJobs(t)[0]
	env := envOf(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0])
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg := loadRenderedConfig(t, m, environ)
	period := minCronGap(t, cj.Spec.Schedule)
	if got := parseSeconds(t, "SF2LOKI_RUN__SCHEDULE_PERIOD", env["SF2LOKI_RUN__SCHEDULE_PERIOD"]); got != period {
		t.Errorf("SF2LOKI_RUN__SCHEDULE_PERIOD %s, the schedule fires every %s", got, period)
	}
	for _, v := range budgetViolations(cj, cfg, period) {
		t.Error(v)
	}

	roles := m.roles(t)
	if len(roles) != 1 {
		t.Fatalf("%d Roles", len(roles))
	}
	want := chartDefaultRules(cfg.Lease.Name, cfg.State.ConfigMap.Name)
	if !rulesEqual(roles[0].Rules, want) {
		t.Errorf("Role rules\n  got  %+v\n  want %+v", roles[0].Rules, want)
	}
	rb := m.roleBindings(t)[0]
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != pods[0].spec.ServiceAccountName || rb.Subjects[0].Namespace != "sf2loki" || rb.RoleRef.Name != roles[0].Name {
		t.Errorf("RoleBinding %+v does not bind the Role to the job's ServiceAccount", rb)
	}
}

// TestPlainManifestsMatchTheChart: the CronJob's scheduling, deadlines, failure policy,
// environment and security contexts are those of the chart's default render.
func TestPlainManifestsMatchTheChart(t *testing.T) {
	plain := plainManifests(t).cronJobs(t)[0]
	chart := parseManifests(t, renderCase{}.render(t, "sf2loki")).cronJobs(t)[0]
	pj, cj := plain.Spec.JobTemplate.Spec, chart.Spec.JobTemplate.Spec
	pp, cp := pj.Template.Spec, cj.Template.Spec
	fields := map[string][2]any{
		"schedule":                     {plain.Spec.Schedule, chart.Spec.Schedule},
		"timeZone":                     {plain.Spec.TimeZone, chart.Spec.TimeZone},
		"concurrencyPolicy":            {plain.Spec.ConcurrencyPolicy, chart.Spec.ConcurrencyPolicy},
		"startingDeadlineSeconds":      {plain.Spec.StartingDeadlineSeconds, chart.Spec.StartingDeadlineSeconds},
		"activeDeadlineSeconds":        {pj.ActiveDeadlineSeconds, cj.ActiveDeadlineSeconds},
		"backoffLimit":                 {pj.BackoffLimit, cj.BackoffLimit},
		"podReplacementPolicy":         {pj.PodReplacementPolicy, cj.PodReplacementPolicy},
		"podFailurePolicy":             {pj.PodFailurePolicy, cj.PodFailurePolicy},
		"ttlSecondsAfterFinished":      {pj.TTLSecondsAfterFinished, cj.TTLSecondsAfterFinished},
		"terminationGracePeriod":       {pp.TerminationGracePeriodSeconds, cp.TerminationGracePeriodSeconds},
		"pod securityContext":          {pp.SecurityContext, cp.SecurityContext},
		"container securityContext":    {pp.Containers[0].SecurityContext, cp.Containers[0].SecurityContext},
		"container env":                {pp.Containers[0].Env, cp.Containers[0].Env},
		"container resources":          {pp.Containers[0].Resources, cp.Containers[0].Resources},
		"automountServiceAccountToken": {pp.AutomountServiceAccountToken, cp.AutomountServiceAccountToken},
	}
	for name, v := range fields {
		if !reflect.DeepEqual(v[0], v[1]) {
			t.Errorf("%s: deploy/kubernetes has %+v, the chart renders %+v", name, v[0], v[1])
		}
	}
}

// TestE2EPlainManifestsAcceptedByAPIServer creates the manifests on a real kube-apiserver (in a
// fresh namespace enforcing the restricted Pod Security profile): server-side dry run, then for
// real; the Namespace object itself as a dry run.
func TestE2EPlainManifestsAcceptedByAPIServer(t *testing.T) {
	k := testenv.SharedKube(t)
	ns := restrictedNamespace(t, k)
	var objs manifests
	for _, o := range plainManifests(t) {
		o = o.DeepCopy()
		if o.GetKind() == "Namespace" {
			dyn, err := dynamic.NewForConfig(k.RESTConfig(k.AdminToken))
			if err != nil {
				t.Fatal(err)
			}
			nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
			if _, err := dyn.Resource(nsGVR).Create(t.Context(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
				t.Fatalf("Namespace (dry run): %v", err)
			}
			continue
		}
		o.SetNamespace(ns)
		if o.GetKind() == "RoleBinding" {
			subjects, _ := o.Object["subjects"].([]any)
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
		}
		objs = append(objs, o)
	}
	createAll(t, k, ns, objs)
}

// chartDefaultRules is the Role of a Kubernetes lease and a ConfigMap store.
func chartDefaultRules(leaseName, configMap string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{leaseName}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{configMap}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
	}
}
