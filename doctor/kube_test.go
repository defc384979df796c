package doctor

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/sf2loki/sf2loki/internal/kubeclient"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestKubeProbeBeforeTheFirstRun probes a Lease and a ConfigMap that do not exist yet (a fresh
// install, before the first run created them), on a real API server: a ServiceAccount-like user
// holding the chart's rules (get and update on the name, create) is found to have every verb,
// and one holding only get is told which verbs are missing.
func TestKubeProbeBeforeTheFirstRun(t *testing.T) {
	k := testenv.StartKube(t)
	ns := k.NewNamespace(t)
	k.Grant(t, ns, "user-1",
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"sf2loki"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"sf2loki-state"}, Verbs: []string{"get", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	k.Grant(t, ns, "user-2",
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"sf2loki"}, Verbs: []string{"get"}})
	client := func(user string) *kubeclient.Client {
		c, err := kubeclient.New(k.RESTConfig(k.UserToken(user)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, obj := range []KubeObject{
		{Client: client("user-1"), Resource: ResourceLeases, Namespace: ns, Name: "sf2loki"},
		{Client: client("user-1"), Resource: ResourceConfigMaps, Namespace: ns, Name: "sf2loki-state"},
	} {
		a, err := obj.probe(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", obj.what(), err)
		}
		if a.present || len(a.missing) != 0 {
			t.Errorf("%s: present %v, missing %v; want absent with every verb allowed (%v)", obj.what(), a.present, a.missing, a.done)
		}
	}
	a, err := KubeObject{Client: client("user-2"), Resource: ResourceLeases, Namespace: ns, Name: "sf2loki"}.probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.missing, []string{"update", "create"}) {
		t.Errorf("get-only user: missing %v, want [update create] (%v)", a.missing, a.done)
	}
}
