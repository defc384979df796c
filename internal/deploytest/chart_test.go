package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestHelmLint lints the chart with its defaults and with every tested combination of values;
// --strict turns warnings into failures.
func TestHelmLint(t *testing.T) {
	for _, c := range renderCases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--kube-version", kubeVersion}
			for _, v := range c.values {
				args = append(args, "--values", filepath.Join(repoRoot(t), "internal", "deploytest", "testdata", "values", v))
			}
			out, err := helm(t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "[WARNING]") || strings.Contains(line, "[ERROR]") {
					t.Errorf("helm lint: %s", line)
				}
			}
		})
	}
}

// TestGoldenRenders compares each render with its golden file, and renders twice to show the
// output is stable. SF2LOKI_UPDATE_GOLDEN=1 rewrites the golden files.
func TestGoldenRenders(t *testing.T) {
	update := os.Getenv(envUpdateGolden) == "1"
	for _, c := range renderCases {
		t.Run(c.name, func(t *testing.T) {
			got := c.render(t, "sf2loki")
			if again := c.render(t, "sf2loki"); again != got {
				t.Fatal("two renders of the same values differ")
			}
			path := filepath.Join(repoRoot(t), "internal", "deploytest", "testdata", "golden", c.name+".yaml")
			if update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (generate with %s=1)", err, envUpdateGolden)
			}
			if got != string(want) {
				t.Errorf("render differs from %s (regenerate with %s=1 after checking the change):\n%s",
					path, envUpdateGolden, firstDiff(string(want), got))
			}
		})
	}
}

// firstDiff shows the first differing line with a little context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  golden: " + wl + "\n  render: " + gl
		}
	}
	return "(no line differs)"
}

// TestRenderRefuses lists the values the chart refuses to render, each with the reason it
// must name.
func TestRenderRefuses(t *testing.T) {
	cases := []struct {
		name string
		set  []string
		want string
	}{
		{"file store without a volume", []string{"config.state.store=file"}, "needs persistence.enabled"},
		{"file outside the volume", []string{"config.state.store=file", "persistence.enabled=true", "config.state.file.path=/tmp/state.json"}, "must lie under persistence.mountPath"},
		{"existing ServiceAccount without a name", []string{"serviceAccount.create=false"}, "serviceAccount.name is required"},
		{"the default ServiceAccount", []string{"serviceAccount.create=false", "serviceAccount.name=default"}, "default"},
		{"created as default", []string{"serviceAccount.name=default"}, "default"},
		{"deadline not below the period (Forbid)", []string{"cronjob.schedule=*/2 * * * *"}, "is not below the schedule period 120s"},
		{"lease outliving the period", []string{"cronjob.schedule=* * * * *", "cronjob.concurrencyPolicy=Allow", "config.lease.duration=60s", "config.lease.renew_interval=20s"}, "a crashed run would make the next tick busy"},
		{"Replace", []string{"cronjob.concurrencyPolicy=Replace"}, "concurrencyPolicy"},
		{"not a cron spec", []string{"cronjob.schedule=every five minutes"}, "is not a 5-field cron spec"},
		{"period not derivable", []string{"cronjob.schedule=0 9-17/x * * *"}, "set the period explicitly"},
		{"period longer than the schedule's", []string{"cronjob.schedulePeriod=10m"}, "is longer than the shortest gap"},
		{"duration the chart cannot read", []string{"config.run.max_duration=${MAX}"}, "max_duration"},
		{"scheduler without a listen address", []string{"mode=schedule", "config.schedule.listen="}, "needs config.schedule.listen"},
		{"existing Secret without a name", []string{"secrets.source=existing"}, "secrets.existingSecret is required"},
		{"chart Secret without data", []string{"secrets.source=chart"}, "needs secrets.data"},
		{"ExternalSecret without a store", []string{"secrets.source=external", "secrets.external.data[0].secretKey=k"}, "secretStoreRef.name"},
		{"secrets over the config", []string{"secrets.source=existing", "secrets.existingSecret=s", "secrets.mountPath=/etc/sf2loki/secrets"}, "must not lie under /etc/sf2loki"},
		{"root user", []string{"podSecurity.runAsUser=0"}, "runAsUser"},
		{"weakened security context", []string{"podSecurity.readOnlyRootFilesystem=false"}, "readOnlyRootFilesystem"},
		{"privileged via securityContext", []string{"securityContext.privileged=true"}, "securityContext"},
		{"the chart's own env", []string{"config.run.deadline=1h"}, "deadline"},
		{"group name too long", []string{"fullnameOverride=a-release-name-of-thirty-chars", "config.jobs[0].name=a-job-group-name-of-thirty-char"}, "52 characters"},
		{"settings of an unknown group", []string{"groups.nope.suspend=true"}, "no job group \"nope\""},
		{"inline secret in a ConfigMap", []string{"configStorage.type=ConfigMap", "config.salesforce.private_key=k"}, "configStorage.type Secret"},
		{"ServiceMonitor of a CronJob", []string{"serviceMonitor.enabled=true"}, "needs mode schedule"},
		{"NetworkPolicy allowing nothing", []string{"networkPolicy.enabled=true"}, "needs networkPolicy.egress"},
		{"a UID of 0", []string{"podSecurity.fsGroup=0"}, "fsGroup"},
		{"unreadable memory limit", []string{"resources.limits.memory=lots"}, "resources.limits.memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := helm(t, renderCase{set: c.set}.args(t, "sf2loki", "sf2loki")...)
			if err == nil {
				t.Fatalf("rendered, want a failure naming %q:\n%.600s", c.want, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("failure does not name %q:\n%v", c.want, err)
			}
		})
	}
}

// TestPodHardeningInEveryRender checks the security context of every pod template of every
// tested render (the workloads and the helm test hook): values can change the numeric
// identity, nothing else.
func TestPodHardeningInEveryRender(t *testing.T) {
	for _, c := range renderCases {
		t.Run(c.name, func(t *testing.T) {
			m := parseManifests(t, c.render(t, "sf2loki"))
			pods := m.podTemplates(t)
			if len(pods) == 0 {
				t.Fatalf("no workload rendered: %v", m.kinds())
			}
			for _, p := range pods {
				checkHardened(t, p)
			}
		})
	}
}

func checkHardened(t *testing.T, p podTemplate) {
	t.Helper()
	psc := p.spec.SecurityContext
	// runAsUser may be absent (a platform such as OpenShift assigns it), never 0.
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || (psc.RunAsUser != nil && *psc.RunAsUser == 0) ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context %+v, want non-root with RuntimeDefault seccomp", p.owner, psc)
	}
	if p.spec.HostNetwork || p.spec.HostPID || p.spec.HostIPC {
		t.Errorf("%s: shares a host namespace", p.owner)
	}
	if len(p.spec.Containers) != 1 || len(p.spec.InitContainers) != 0 {
		t.Fatalf("%s: %d containers, %d init containers; want the one sf2loki container", p.owner, len(p.spec.Containers), len(p.spec.InitContainers))
	}
	sc := p.spec.Containers[0].SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: no container security context", p.owner)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: privilege escalation allowed", p.owner)
	case sc.Privileged != nil && *sc.Privileged:
		t.Errorf("%s: privileged", p.owner)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root filesystem writable", p.owner)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
		t.Errorf("%s: capabilities %+v, want all dropped and none added", p.owner, sc.Capabilities)
	case sc.RunAsUser != nil && *sc.RunAsUser == 0:
		t.Errorf("%s: container runs as root", p.owner)
	}
	if p.spec.ServiceAccountName == "" || p.spec.ServiceAccountName == "default" {
		t.Errorf("%s: runs as ServiceAccount %q", p.owner, p.spec.ServiceAccountName)
	}
}

// TestTokenOnlyWhenTheAPIIsUsed: the ServiceAccount token is mounted, and a Role bound, exactly
// when the lease or the store talks to the Kubernetes API.
func TestTokenOnlyWhenTheAPIIsUsed(t *testing.T) {
	cases := map[string]bool{
		"default": true, "jobgroups": true, "schedule-mode": true, "file-store": true,
		"store-lease-s3": false, "chart-secret": true, "external-secrets": true,
		"existing-serviceaccount": true, "strict-allow": true, "openshift": true, "config-configmap": true,
		"monitoring": true, "conventions": true,
	}
	for _, c := range renderCases {
		want, ok := cases[c.name]
		if !ok {
			t.Fatalf("case %s: say whether it needs the API", c.name)
		}
		t.Run(c.name, func(t *testing.T) {
			m := parseManifests(t, c.render(t, "sf2loki"))
			for _, p := range m.podTemplates(t) {
				if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken != want {
					t.Errorf("%s: automountServiceAccountToken %v, want %v", p.owner, p.spec.AutomountServiceAccountToken, want)
				}
			}
			if got := len(m.roles(t)) > 0; got != want {
				t.Errorf("Role rendered: %v, want %v (%v)", got, want, m.kinds())
			}
			if got := len(m.roleBindings(t)) > 0; got != want {
				t.Errorf("RoleBinding rendered: %v, want %v", got, want)
			}
			for _, sa := range m.ofKind("ServiceAccount") {
				if v, ok := sa.Object["automountServiceAccountToken"].(bool); !ok || v {
					t.Errorf("ServiceAccount %s mounts its token by default", sa.GetName())
				}
			}
		})
	}
}

// TestRBACIsExactlyWhatTheJobDoes derives every group's Lease and ConfigMap names through the
// real config.Load and Config.ForJob and compares them with the rendered Role: get and update
// on exactly those names, create unscoped, and no other verb or resource.
func TestRBACIsExactlyWhatTheJobDoes(t *testing.T) {
	for _, c := range renderCases {
		t.Run(c.name, func(t *testing.T) {
			m := parseManifests(t, c.render(t, "sf2loki"))
			roles := m.roles(t)
			if len(roles) == 0 {
				return // TestTokenOnlyWhenTheAPIIsUsed says whether that is right
			}
			cfg := loadRenderedConfig(t, m, nil)
			var leases, configMaps []string
			for _, g := range groupConfigs(t, cfg) {
				if g.cfg.Lease.Type == "kubernetes" {
					leases = append(leases, g.cfg.Lease.Name)
				}
				if g.cfg.State.Store == "configmap" {
					configMaps = append(configMaps, g.cfg.State.ConfigMap.Name)
				}
			}
			if len(roles) != 1 || roles[0].Namespace != "sf2loki" {
				t.Fatalf("%d Roles, want one in the release namespace", len(roles))
			}
			var want []rbacv1.PolicyRule
			if len(leases) > 0 {
				want = append(want,
					rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: leases, Verbs: []string{"get", "update"}},
					rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}})
			}
			if len(configMaps) > 0 {
				want = append(want,
					rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: configMaps, Verbs: []string{"get", "update"}},
					rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
			}
			if got := roles[0].Rules; !rulesEqual(got, want) {
				t.Errorf("Role rules\n  got  %+v\n  want %+v", got, want)
			}
			rbs := m.roleBindings(t)
			if len(rbs) != 1 {
				t.Fatalf("%d RoleBindings, want 1", len(rbs))
			}
			rb := rbs[0]
			if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != roles[0].Name || len(rb.Subjects) != 1 {
				t.Fatalf("RoleBinding %+v does not bind the Role to one subject", rb)
			}
			sub := rb.Subjects[0]
			pods := m.podTemplates(t)
			if sub.Kind != "ServiceAccount" || sub.Namespace != "sf2loki" || sub.Name != pods[0].spec.ServiceAccountName {
				t.Errorf("RoleBinding subject %+v, want the pods' ServiceAccount %s", sub, pods[0].spec.ServiceAccountName)
			}
		})
	}
}

func rulesEqual(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	norm := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	for i := range a {
		x, y := a[i], b[i]
		if !slices.Equal(norm(x.APIGroups), norm(y.APIGroups)) || !slices.Equal(norm(x.Resources), norm(y.Resources)) ||
			!slices.Equal(norm(x.ResourceNames), norm(y.ResourceNames)) || !slices.Equal(norm(x.Verbs), norm(y.Verbs)) ||
			len(x.NonResourceURLs) != 0 {
			return false
		}
	}
	return true
}

// TestJobGroupsRenderOneCronJobEach: one CronJob per group, running run-once --job NAME on the
// group's own schedule (or the chart's), and nothing for the unnamed default.
func TestJobGroupsRenderOneCronJobEach(t *testing.T) {
	m := parseManifests(t, renderCase{values: []string{"jobgroups.yaml"}}.render(t, "sf2loki"))
	cjs := m.cronJobs(t)
	want := map[string]struct{ group, schedule string }{
		"sf2loki-elf":     {"elf", "7,37 * * * *"},
		"sf2loki-objects": {"objects", "*/5 * * * *"},
	}
	if len(cjs) != len(want) {
		t.Fatalf("%d CronJobs, want %d: %v", len(cjs), len(want), m.kinds())
	}
	for _, cj := range cjs {
		w, ok := want[cj.Name]
		if !ok {
			t.Fatalf("unexpected CronJob %s", cj.Name)
		}
		if cj.Spec.Schedule != w.schedule {
			t.Errorf("%s: schedule %q, want %q", cj.Name, cj.Spec.Schedule, w.schedule)
		}
		args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
		if !slices.Equal(args, []string{"run-once", "--config", "/etc/sf2loki/config.yaml", "--job", w.group}) {
			t.Errorf("%s: args %q", cj.Name, args)
		}
	}
}

// TestRBACVariants: each lease and store combination gets exactly its rules, in the namespace
// where its objects live, bound to the pods' ServiceAccount in the release namespace; nothing at
// all when both reach the API through a kubeconfig.
func TestRBACVariants(t *testing.T) {
	type nsRules struct{ leases, configMaps []string }
	cases := []struct {
		name  string
		set   []string
		want  map[string]nsRules // namespace -> names
		token bool
	}{
		{"lease in another namespace", []string{"config.lease.namespace=coordination"},
			map[string]nsRules{"coordination": {leases: []string{"sf2loki"}}, "sf2loki": {configMaps: []string{"sf2loki-state"}}}, true},
		{"store lease, ConfigMap store", []string{"config.lease.type=store"},
			map[string]nsRules{"sf2loki": {configMaps: []string{"sf2loki-state"}}}, true},
		{"Kubernetes lease, GCS store", []string{"config.state.store=gcs", "config.state.gcs.bucket=b"},
			map[string]nsRules{"sf2loki": {leases: []string{"sf2loki"}}}, true},
		{"named lease and ConfigMap", []string{"config.lease.name=shipper", "config.state.configmap.name=shipper-doc"},
			map[string]nsRules{"sf2loki": {leases: []string{"shipper"}, configMaps: []string{"shipper-doc"}}}, true},
		{"both through a kubeconfig", []string{"config.lease.kubeconfig=/k", "config.state.configmap.kubeconfig=/k"},
			map[string]nsRules{}, false},
		{"rbac.create false", []string{"rbac.create=false", "serviceAccount.name=runner"}, map[string]nsRules{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := parseManifests(t, renderCase{set: c.set}.render(t, "sf2loki"))
			pod := m.podTemplates(t)[0]
			if got := pod.spec.AutomountServiceAccountToken; got == nil || *got != c.token {
				t.Errorf("automountServiceAccountToken %v, want %v", got, c.token)
			}
			roles, rbs := m.roles(t), m.roleBindings(t)
			if len(roles) != len(c.want) || len(rbs) != len(c.want) {
				t.Fatalf("%d Roles and %d RoleBindings, want %d of each", len(roles), len(rbs), len(c.want))
			}
			for i, r := range roles {
				w, ok := c.want[r.Namespace]
				if !ok {
					t.Fatalf("Role in namespace %s", r.Namespace)
				}
				var rules []rbacv1.PolicyRule
				if len(w.leases) > 0 {
					rules = append(rules, chartDefaultRules(w.leases[0], "")[:2]...)
					rules[0].ResourceNames = w.leases
				}
				if len(w.configMaps) > 0 {
					cm := chartDefaultRules("", w.configMaps[0])[2:]
					cm[0].ResourceNames = w.configMaps
					rules = append(rules, cm...)
				}
				if !rulesEqual(r.Rules, rules) {
					t.Errorf("Role in %s: %+v, want %+v", r.Namespace, r.Rules, rules)
				}
				rb := rbs[i]
				if rb.Namespace != r.Namespace || len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != "sf2loki" || rb.Subjects[0].Name != pod.spec.ServiceAccountName {
					t.Errorf("RoleBinding %s/%s subjects %+v", rb.Namespace, rb.Name, rb.Subjects)
				}
			}
		})
	}
}

// TestGroupOverrides: groups.<name> settings reach only that group's CronJob.
func TestGroupOverrides(t *testing.T) {
	m := parseManifests(t, renderCase{values: []string{"jobgroups.yaml"}, set: []string{
		"groups.elf.suspend=true", "groups.elf.resources.limits.memory=1Gi", "groups.elf.extraArgs[0]=--drain",
		"groups.objects.schedulePeriod=4m",
	}}.render(t, "sf2loki"))
	for _, cj := range m.cronJobs(t) {
		c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		elf := cronGroup(cj) == "elf"
		if got := cj.Spec.Suspend != nil && *cj.Spec.Suspend; got != elf {
			t.Errorf("%s: suspend %v", cj.Name, got)
		}
		if got := c.Resources.Limits.Memory().String() == "1Gi"; got != elf {
			t.Errorf("%s: memory limit %s", cj.Name, c.Resources.Limits.Memory())
		}
		if got := slices.Contains(c.Args, "--drain"); got != elf {
			t.Errorf("%s: args %q", cj.Name, c.Args)
		}
		if !elf && envOf(c)["SF2LOKI_RUN__SCHEDULE_PERIOD"] != "240s" {
			t.Errorf("%s: schedule period %s, want the override 240s", cj.Name, envOf(c)["SF2LOKI_RUN__SCHEDULE_PERIOD"])
		}
	}
}

// TestStrictExitCodesFailTheJob: under strict exit codes, busy (5) and fenced (6) fail the Job
// at once like 2 and 7, so no replacement pod retries a run that would only be busy again; by
// default they exit 0 and are not listed.
func TestStrictExitCodesFailTheJob(t *testing.T) {
	cases := []struct {
		name   string
		c      renderCase
		strict bool
	}{
		{"default", renderCase{}, false},
		{"config", renderCase{values: []string{"strict-allow.yaml"}}, true},
		{"flag of one group", renderCase{values: []string{"jobgroups.yaml"}, set: []string{"groups.elf.extraArgs[0]=--strict-exit-codes"}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, cj := range parseManifests(t, c.c.render(t, "sf2loki")).cronJobs(t) {
				job := cj.Spec.JobTemplate.Spec
				want := c.strict && (c.name != "flag of one group" || cronGroup(cj) == "elf")
				if !failsJobOn(job, 2) || !failsJobOn(job, 7) || failsJobOn(job, 5) != want || failsJobOn(job, 6) != want {
					t.Errorf("%s: podFailurePolicy %+v (strict %v)", cj.Name, job.PodFailurePolicy, want)
				}
			}
		})
	}
}
