package deploytest

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/lease"
	leasek8s "github.com/sf2loki/sf2loki/lease/kubernetes"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
)

// TestE2EChartServiceAccountRBAC installs the rendered chart (default values, and two job
// groups) on a real kube-apiserver, authenticates as the chart's ServiceAccount with a token
// from the TokenRequest API, bound by nothing but the chart's RoleBinding, and runs the real
// lease/kubernetes and store/configmap code with it for every group: acquire (create, then a
// takeover by update), claim, commit and release all succeed. As the same identity, listing or
// reading Secrets, reading or writing another Lease or ConfigMap, and listing, watching,
// patching or deleting its own objects are forbidden.
func TestE2EChartServiceAccountRBAC(t *testing.T) {
	k := testenv.SharedKube(t)
	for _, c := range []renderCase{{name: "default"}, {name: "jobgroups", values: []string{"jobgroups.yaml"}}} {
		t.Run(c.name, func(t *testing.T) {
			ns := restrictedNamespace(t, k)
			m := parseManifests(t, c.render(t, ns))
			createAll(t, k, ns, m)
			sa := m.podTemplates(t)[0].spec.ServiceAccountName
			saCfg := serviceAccountConfig(t, k, ns, sa)
			client, err := kubernetes.NewForConfig(saCfg)
			if err != nil {
				t.Fatal(err)
			}
			admin := k.AdminClient(t)
			cfg := loadRenderedConfig(t, m, nil)
			groups := groupConfigs(t, cfg)
			for _, g := range groups {
				runJobProtocol(t, saCfg, ns, g.cfg.Lease.Name, g.cfg.State.ConfigMap.Name)
			}

			// Objects that are not the job's: a Secret, another Lease, the chart's own config.
			ctx := t.Context()
			if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "salesforce"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			other := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "another-controller"}}
			if other, err = admin.CoordinationV1().Leases(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			own := groups[0].cfg.Lease.Name
			ownCM := groups[0].cfg.State.ConfigMap.Name
			patch := []byte(`{"metadata":{"annotations":{"x":"y"}}}`)
			forbidden := map[string]func() error{
				"list secrets": func() error {
					_, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
					return err
				},
				"get a secret": func() error {
					_, err := client.CoreV1().Secrets(ns).Get(ctx, "salesforce", metav1.GetOptions{})
					return err
				},
				"get another lease": func() error {
					_, err := client.CoordinationV1().Leases(ns).Get(ctx, other.Name, metav1.GetOptions{})
					return err
				},
				"update another lease": func() error {
					_, err := client.CoordinationV1().Leases(ns).Update(ctx, other, metav1.UpdateOptions{})
					return err
				},
				"list leases": func() error {
					_, err := client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
					return err
				},
				"watch leases": func() error {
					w, err := client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{})
					if err == nil {
						w.Stop()
					}
					return err
				},
				"patch its lease": func() error {
					_, err := client.CoordinationV1().Leases(ns).Patch(ctx, own, types.MergePatchType, patch, metav1.PatchOptions{})
					return err
				},
				"delete its lease": func() error {
					return client.CoordinationV1().Leases(ns).Delete(ctx, own, metav1.DeleteOptions{})
				},
				"get the chart's config": func() error {
					_, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "sf2loki-config", metav1.GetOptions{})
					return err
				},
				"list configmaps": func() error {
					_, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
					return err
				},
				"delete its configmap": func() error {
					return client.CoreV1().ConfigMaps(ns).Delete(ctx, ownCM, metav1.DeleteOptions{})
				},
				"get a lease in another namespace": func() error {
					_, err := client.CoordinationV1().Leases("default").Get(ctx, own, metav1.GetOptions{})
					return err
				},
				"list pods": func() error {
					_, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
					return err
				},
			}
			for what, call := range forbidden {
				if err := call(); !apierrors.IsForbidden(err) {
					t.Errorf("%s as the chart's ServiceAccount: %v, want Forbidden", what, err)
				}
			}
			// create cannot be limited to a name by RBAC (the object does not exist yet): the
			// Role grants it unscoped, on leases and configmaps only, as documented.
			if _, err := client.CoordinationV1().Leases(ns).Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "any-name"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("create (dry run) of a lease: %v, want allowed (unscoped create)", err)
			}
			if _, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
				t.Errorf("create (dry run) of a secret: %v, want Forbidden", err)
			}
		})
	}
}

// runJobProtocol runs two invocations' worth of the lease and store protocol with the real
// backends as the given identity: the first creates the Lease and the ConfigMap, the second
// takes the released Lease over by update and commits on top of the first one's document.
func runJobProtocol(t *testing.T, cfg *rest.Config, ns, leaseName, cmName string) {
	t.Helper()
	for round := 1; round <= 2; round++ {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		b, err := configmap.New(configmap.Options{Namespace: ns, Name: cmName, RESTConfig: cfg})
		if err != nil {
			t.Fatal(err)
		}
		st := store.New(b, store.Options{})
		l, err := leasek8s.New(leasek8s.Options{Namespace: ns, Name: leaseName, RESTConfig: cfg,
			Config: lease.Config{Duration: 30 * time.Second, Host: "rbac-test"}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := lease.Start(ctx, l, st, lease.SessionOptions{})
		if err != nil {
			cancel()
			t.Fatalf("lease %s / configmap %s round %d: start: %v", leaseName, cmName, round, err)
		}
		if s.Epoch() != uint64(round) {
			t.Errorf("lease %s round %d: epoch %d", leaseName, round, s.Epoch())
		}
		if round == 2 {
			if cp, ok := s.Checkpoints()["rbac:test"]; !ok || string(cp.Value) != `1` {
				t.Errorf("round 2 does not read round 1's checkpoint: %+v", s.Checkpoints())
			}
		}
		if err := s.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"rbac:test": json.RawMessage(strconv.Itoa(round))}}); err != nil {
			t.Fatalf("lease %s round %d: commit: %v", leaseName, round, err)
		}
		if err := s.Release(ctx); err != nil {
			t.Fatalf("lease %s round %d: release: %v", leaseName, round, err)
		}
		cancel()
	}
}
