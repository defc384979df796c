package deploytest

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/sf2loki/sf2loki/deploy/grafana"
)

// TestConfigurationIsASecretByDefault: the rendered configuration file lives in a Secret that
// the pods mount, so an inline secret under `config` is as protected as the Secret of key files;
// an existing Secret can hold the whole file instead, and then the chart renders none.
func TestConfigurationIsASecretByDefault(t *testing.T) {
	cases := []struct {
		name       string
		set        []string
		kind       string // rendered object holding config.yaml; "" for none
		volumeFrom string // the secret or ConfigMap the config volume mounts
	}{
		{"default", nil, "Secret", "sf2loki-config"},
		{"inline private key", []string{"config.salesforce.private_key=-----BEGIN PRIVATE KEY-----"}, "Secret", "sf2loki-config"},
		{"ConfigMap without secrets", []string{"configStorage.type=ConfigMap"}, "ConfigMap", "sf2loki-config"},
		{"existing Secret", []string{"configStorage.existingSecret=my-sf2loki-config"}, "", "my-sf2loki-config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := parseManifests(t, renderCase{set: c.set}.render(t, "sf2loki"))
			var holders []string
			for _, kind := range []string{"Secret", "ConfigMap"} {
				for _, o := range m.ofKind(kind) {
					_, inData, _ := unstructuredField(o.Object, "data", "config.yaml")
					_, inStringData, _ := unstructuredField(o.Object, "stringData", "config.yaml")
					if inData || inStringData {
						holders = append(holders, kind+"/"+o.GetName())
					}
				}
			}
			want := []string{}
			if c.kind != "" {
				want = []string{c.kind + "/sf2loki-config"}
			}
			if !slices.Equal(holders, want) {
				t.Errorf("config.yaml rendered in %v, want %v", holders, want)
			}
			for _, p := range m.podTemplates(t) {
				var src string
				for _, v := range p.spec.Volumes {
					if v.Name != "config" {
						continue
					}
					switch {
					case v.Secret != nil && c.kind != "ConfigMap":
						src = v.Secret.SecretName
					case v.ConfigMap != nil && c.kind == "ConfigMap":
						src = v.ConfigMap.Name
					}
				}
				if src != c.volumeFrom {
					t.Errorf("%s: the config volume mounts %q, want the %s %q", p.owner, src, map[bool]string{true: "ConfigMap", false: "Secret"}[c.kind == "ConfigMap"], c.volumeFrom)
				}
			}
		})
	}
}

// unstructuredField reads a nested map field.
func unstructuredField(obj map[string]any, path ...string) (any, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[p]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// TestInlineSecretsNeverInAConfigMap: with configStorage.type ConfigMap, `helm template` fails on
// any secret written inline under config, naming it and pointing at the Secret storage and at
// mounted files; a ${VARIABLE} reference is not inline.
func TestInlineSecretsNeverInAConfigMap(t *testing.T) {
	refused := []struct {
		path string // what the failure must name
		set  []string
	}{
		{"config.salesforce.private_key", []string{"config.salesforce.private_key=-----BEGIN PRIVATE KEY-----"}},
		{"config.orgs[0].salesforce.client_secret", []string{"config.orgs[0].name=eu", "config.orgs[0].salesforce.client_secret=s3cr3t"}},
		{"config.sink.loki.password", []string{"config.sink.loki.password=hunter2"}},
		{"config.sink.loki.bearer_token", []string{"config.sink.loki.bearer_token=eyJhbGciOi"}},
		{"config.state.s3.secret_access_key", []string{"config.state.s3.secret_access_key=wJalrXUtnFEMI"}},
		{"config.shape.salt", []string{"config.shape.salt=0123456789abcdef"}},
		{"config.metrics.otlp.headers.Authorization", []string{"config.metrics.otlp.headers.Authorization=Basic dXNlcjpwYXNz"}},
	}
	for _, c := range refused {
		t.Run(c.path, func(t *testing.T) {
			out, err := helm(t, renderCase{set: append([]string{"configStorage.type=ConfigMap"}, c.set...)}.args(t, "sf2loki", "sf2loki")...)
			if err == nil {
				t.Fatalf("rendered an inline secret into a ConfigMap:\n%.600s", out)
			}
			for _, want := range []string{c.path, "configStorage.type Secret", "_file", "secrets.source"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the failure does not name %q:\n%v", want, err)
				}
			}
		})
	}
	if _, err := helm(t, renderCase{set: []string{"configStorage.type=ConfigMap", "config.sink.loki.password=${LOKI_PASSWORD}"}}.args(t, "sf2loki", "sf2loki")...); err != nil {
		t.Errorf("a ${VARIABLE} reference was refused as an inline secret: %v", err)
	}
}

// TestOpenShiftValuesNameNoUser: with the three numbers null (OpenShift's restricted-v2 SCC
// assigns them), no pod template names a user, group or fsGroup, and each still demands a
// non-root user.
func TestOpenShiftValuesNameNoUser(t *testing.T) {
	out := renderCase{values: []string{"openshift.yaml"}}.render(t, "sf2loki")
	for _, field := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
		if strings.Contains(out, field) {
			t.Errorf("the OpenShift render names %s", field)
		}
	}
	m := parseManifests(t, out)
	pods := m.podTemplates(t)
	if len(pods) < 2 {
		t.Fatalf("want the CronJob's and the test hook's pods, got %v", m.kinds())
	}
	for _, p := range pods {
		if sc := p.spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: runAsNonRoot is not set", p.owner)
		}
	}
}

// TestGoMemLimitIsNinetyPercent: GOMEMLIMIT is 90% of each pod's own memory limit, in MiB,
// for the default, per-group and decimal-unit limits; a pod without a limit has none.
func TestGoMemLimitIsNinetyPercent(t *testing.T) {
	cases := []struct {
		name string
		c    renderCase
		want map[string]string // pod owner -> GOMEMLIMIT ("" = unset)
	}{
		{"default 256Mi", renderCase{}, map[string]string{"CronJob/sf2loki": "230MiB", "Pod/sf2loki-doctor": "230MiB"}},
		{"1Gi for one group, 300M for the other", renderCase{values: []string{"conventions.yaml"}},
			map[string]string{"CronJob/sf2loki-elf": "921MiB", "CronJob/sf2loki-objects": "257MiB", "Pod/sf2loki-doctor": "257MiB"}},
		{"no limit", renderCase{set: []string{"resources.limits=null"}}, map[string]string{"CronJob/sf2loki": "", "Pod/sf2loki-doctor": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			for _, p := range parseManifests(t, c.c.render(t, "sf2loki")).podTemplates(t) {
				got[p.owner] = envOf(p.spec.Containers[0])["GOMEMLIMIT"]
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("GOMEMLIMIT per pod %v, want %v", got, c.want)
			}
		})
	}
	out, err := helm(t, renderCase{set: []string{"resources.limits.memory=lots"}}.args(t, "sf2loki", "sf2loki")...)
	if err == nil || !strings.Contains(err.Error(), "resources.limits.memory") {
		t.Errorf("an unreadable memory limit rendered (err %v):\n%.300s", err, out)
	}
}

// TestGoMaxProcsOneUnderOneCPU: a pod whose CPU limit is under one core runs with GOMAXPROCS=1
// (millicores and decimals); at one core or more, and without a CPU limit (the default), the
// runtime's choice stands; an unreadable limit is refused naming the key.
func TestGoMaxProcsOneUnderOneCPU(t *testing.T) {
	cases := []struct {
		name string
		c    renderCase
		want string // GOMAXPROCS of every pod ("" = unset)
	}{
		{"no CPU limit", renderCase{}, ""},
		{"500m", renderCase{set: []string{"resources.limits.cpu=500m"}}, "1"},
		{"0.25", renderCase{set: []string{"resources.limits.cpu=0.25"}}, "1"},
		{"999m", renderCase{set: []string{"resources.limits.cpu=999m"}}, "1"},
		{"1000m", renderCase{set: []string{"resources.limits.cpu=1000m"}}, ""},
		{"1", renderCase{set: []string{"resources.limits.cpu=1"}}, ""},
		{"2", renderCase{set: []string{"resources.limits.cpu=2"}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pods := parseManifests(t, c.c.render(t, "sf2loki")).podTemplates(t)
			if len(pods) == 0 {
				t.Fatal("no pods rendered")
			}
			for _, p := range pods {
				if got := envOf(p.spec.Containers[0])["GOMAXPROCS"]; got != c.want {
					t.Errorf("%s: GOMAXPROCS %q, want %q", p.owner, got, c.want)
				}
			}
		})
	}
	out, err := helm(t, renderCase{set: []string{"resources.limits.cpu=lots"}}.args(t, "sf2loki", "sf2loki")...)
	if err == nil || !strings.Contains(err.Error(), "resources.limits.cpu") {
		t.Errorf("an unreadable CPU limit rendered (err %v):\n%.300s", err, out)
	}
}

// TestCommonChartConventions checks the conventions render: a global registry mirror and pull
// secrets on every pod, envFrom, templated topology spread constraints, extra objects, and a
// NetworkPolicy allowing DNS and the listed CIDRs and ports only.
func TestCommonChartConventions(t *testing.T) {
	m := parseManifests(t, renderCase{values: []string{"conventions.yaml"}}.render(t, "sf2loki"))
	pods := m.podTemplates(t)
	for _, p := range pods {
		c := p.spec.Containers[0]
		if want := "registry.internal.example.com/sf2loki/sf2loki:0.1.0"; c.Image != want {
			t.Errorf("%s: image %s, want %s", p.owner, c.Image, want)
		}
		var pulls []string
		for _, s := range p.spec.ImagePullSecrets {
			pulls = append(pulls, s.Name)
		}
		if !slices.Equal(pulls, []string{"mirror-pull", "ghcr-pull"}) {
			t.Errorf("%s: imagePullSecrets %v", p.owner, pulls)
		}
		if len(c.EnvFrom) != 2 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "sf2loki-env" ||
			c.EnvFrom[1].ConfigMapRef == nil || c.EnvFrom[1].ConfigMapRef.Name != "sf2loki-proxy" {
			t.Errorf("%s: envFrom %+v", p.owner, c.EnvFrom)
		}
		if len(p.spec.TopologySpreadConstraints) != 1 ||
			p.spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "sf2loki" {
			t.Errorf("%s: topologySpreadConstraints %+v (templated release name expected)", p.owner, p.spec.TopologySpreadConstraints)
		}
	}
	if got := m.ofKind("ConfigMap"); len(got) != 1 || got[0].GetName() != "sf2loki-notes" || got[0].GetNamespace() != "sf2loki" {
		t.Errorf("extraObjects: ConfigMaps %v", m.kinds())
	}
	if len(m.ofKind("ServiceAccount")) != 2 {
		t.Errorf("extraObjects: want the chart's and the extra ServiceAccount, have %v", m.kinds())
	}

	nps := m.ofKind("NetworkPolicy")
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies", len(nps))
	}
	np := convert[networkingv1.NetworkPolicy](t, nps[0])
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) || len(np.Spec.Ingress) != 0 {
		t.Errorf("a CronJob's pods must accept no connection: policyTypes %v, ingress %+v", np.Spec.PolicyTypes, np.Spec.Ingress)
	}
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/instance"] != "sf2loki" {
		t.Errorf("podSelector %+v does not select the release's pods", np.Spec.PodSelector)
	}
	if len(np.Spec.Egress) != 2 {
		t.Fatalf("egress %+v, want DNS and the listed CIDRs", np.Spec.Egress)
	}
	dns := np.Spec.Egress[0]
	if len(dns.Ports) != 2 || dns.Ports[0].Port.IntValue() != 53 || *dns.Ports[0].Protocol != corev1.ProtocolUDP || *dns.Ports[1].Protocol != corev1.ProtocolTCP {
		t.Errorf("DNS egress %+v", dns)
	}
	out := np.Spec.Egress[1]
	var cidrs []string
	for _, p := range out.To {
		cidrs = append(cidrs, p.IPBlock.CIDR)
	}
	if !slices.Equal(cidrs, []string{"203.0.113.0/24", "198.51.100.7/32"}) || len(out.Ports) != 1 || out.Ports[0].Port.IntValue() != 443 {
		t.Errorf("egress %+v, want the listed CIDRs on 443", out)
	}
}

// TestMonitoringObjects: in mode schedule the Service selects the scheduler's pods, the
// ServiceMonitor selects the Service's http port on /metrics, and the PrometheusRule holds
// exactly the rule groups of deploy/grafana/sf2loki-alerts.yaml.
func TestMonitoringObjects(t *testing.T) {
	m := parseManifests(t, renderCase{values: []string{"monitoring.yaml"}}.render(t, "sf2loki"))
	deps := m.deployments(t)
	svcs := m.ofKind("Service")
	mons := m.ofKind("ServiceMonitor")
	rules := m.ofKind("PrometheusRule")
	if len(deps) != 1 || len(svcs) != 1 || len(mons) != 1 || len(rules) != 1 {
		t.Fatalf("want one Deployment, Service, ServiceMonitor and PrometheusRule: %v", m.kinds())
	}
	svc := convert[corev1.Service](t, svcs[0])
	for k, v := range svc.Spec.Selector {
		if deps[0].Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the scheduler's pods lack", k, v)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("Service ports %+v", svc.Spec.Ports)
	}
	sel, _, _ := unstructuredField(mons[0].Object, "spec", "selector", "matchLabels")
	for k, v := range sel.(map[string]any) {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%v, which the Service lacks", k, v)
		}
	}
	eps, _, _ := unstructuredField(mons[0].Object, "spec", "endpoints")
	ep := eps.([]any)[0].(map[string]any)
	if ep["port"] != "http" || ep["path"] != "/metrics" || ep["interval"] != "1m" {
		t.Errorf("ServiceMonitor endpoint %v", ep)
	}
	if mons[0].GetLabels()["release"] != "kube-prometheus-stack" || rules[0].GetLabels()["release"] != "kube-prometheus-stack" {
		t.Error("serviceMonitor.labels / prometheusRule.labels not applied")
	}

	var want struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(grafana.Alerts, &want); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructuredField(rules[0].Object, "spec", "groups")
	if len(want.Groups) == 0 || !reflect.DeepEqual(got, want.Groups) {
		t.Errorf("the PrometheusRule's groups differ from deploy/grafana/sf2loki-alerts.yaml (run make generate)")
	}
}

// TestHelmTestRunsDoctor: `helm test` runs one Pod, a test hook, running sf2loki doctor with the
// release's configuration and the CronJob's time budget, hardened like the workload.
func TestHelmTestRunsDoctor(t *testing.T) {
	m := parseManifests(t, renderCase{values: []string{"jobgroups.yaml"}}.render(t, "sf2loki"))
	pods := m.ofKind("Pod")
	if len(pods) != 1 {
		t.Fatalf("%d Pods rendered, want the test hook: %v", len(pods), m.kinds())
	}
	if got := pods[0].GetAnnotations()["helm.sh/hook"]; got != "test" {
		t.Errorf("helm.sh/hook %q, want test", got)
	}
	pod := convert[corev1.Pod](t, pods[0])
	c := pod.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"doctor", "--config", "/etc/sf2loki/config.yaml"}) {
		t.Errorf("args %v", c.Args)
	}
	cj := m.cronJobs(t)[0].Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	for _, k := range []string{"SF2LOKI_RUN__DEADLINE", "SF2LOKI_RUN__TERMINATION_GRACE"} {
		if envOf(c)[k] == "" || envOf(c)[k] != envOf(cj)[k] {
			t.Errorf("%s: the doctor pod has %q, the CronJob %q", k, envOf(c)[k], envOf(cj)[k])
		}
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %s", pod.Spec.RestartPolicy)
	}
	off := renderCase{set: []string{"helmTest.enabled=false"}}
	if len(parseManifests(t, off.render(t, "sf2loki")).ofKind("Pod")) != 0 {
		t.Error("helmTest.enabled=false still renders the test Pod")
	}
}
