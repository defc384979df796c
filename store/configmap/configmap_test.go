package configmap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
	"github.com/sf2loki/sf2loki/store/storetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var names atomic.Int64

// factory returns backends on fresh ConfigMaps in ns, acting as user.
func factory(kube *testenv.Kube, ns, user string) storetest.Factory {
	return func(t *testing.T) store.Backend {
		b, err := configmap.New(configmap.Options{
			Namespace: ns, Name: fmt.Sprintf("state-%d", names.Add(1)), RESTConfig: kube.RESTConfig(kube.UserToken(user)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// leastPrivilege returns a namespace where user-1 may only get, create and update configmaps.
func leastPrivilege(t *testing.T) (*testenv.Kube, string) {
	kube := testenv.SharedKube(t)
	ns := kube.NewNamespace(t)
	kube.Grant(t, ns, "user-1", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
	return kube, ns
}

// existing creates cm in ns as the admin (a ConfigMap that was there before sf2loki wrote to
// it) and returns a backend on it acting as user-1.
func existing(t *testing.T, kube *testenv.Kube, ns string, cm *corev1.ConfigMap) *configmap.Backend {
	t.Helper()
	if _, err := kube.AdminClient(t).CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := configmap.New(configmap.Options{Namespace: ns, Name: cm.Name, RESTConfig: kube.RESTConfig(kube.UserToken("user-1"))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestE2EConformanceConfigMap(t *testing.T) {
	kube, ns := leastPrivilege(t)
	storetest.Run(t, factory(kube, ns, "user-1"))
}

func TestE2EConcurrencyConfigMap(t *testing.T) {
	kube, ns := leastPrivilege(t)
	storetest.RunConcurrency(t, factory(kube, ns, "user-1"), 8, 6, testenv.Iterations(2))
}

// Scenario 35 (ConfigMap): the update is applied and the client sees a failure; the protocol
// re-reads and finds its own stamp.
func TestE2ELostAcknowledgementConfigMap(t *testing.T) {
	ctx := context.Background()
	kube, ns := leastPrivilege(t)
	fb := storetest.NewFaulty(factory(kube, ns, "user-1")(t))
	st := storetest.NewStore(fb)
	fb.FailNext(storetest.OpStore, storetest.LostAck)
	w, err := st.Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true})
	if err != nil {
		t.Fatal(err)
	}
	fb.FailNext(storetest.OpStore, storetest.LostAck)
	if err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(1)}}); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.LostAcks != 2 { // the claim's and the commit's
		t.Fatalf("stats %+v", s)
	}
}

func TestE2EOtherKeysAreKept(t *testing.T) {
	ctx := context.Background()
	kube, ns := leastPrivilege(t)
	b := existing(t, kube, ns, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Labels: map[string]string{"team": "x"}},
		Data:       map[string]string{"other": "keep me"},
	})
	st := storetest.NewStore(b)
	snap, err := st.Read(ctx)
	if err != nil || !snap.Absent {
		t.Fatalf("a ConfigMap without the key must read as absent: %+v %v", snap, err)
	}
	if _, err := st.Claim(ctx, storetest.Req(1, "a"), snap); err != nil {
		t.Fatal(err)
	}
	cm, err := kube.AdminClient(t).CoreV1().ConfigMaps(ns).Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["other"] != "keep me" || cm.Labels["team"] != "x" || !strings.Contains(cm.Data["state.json"], `"epoch": 1`) {
		t.Fatalf("ConfigMap after claim: labels %v data %v", cm.Labels, cm.Data)
	}
}

func TestE2EPermissionAndMissingNamespaceAreDistinct(t *testing.T) {
	ctx := context.Background()
	kube := testenv.SharedKube(t)
	ns := kube.NewNamespace(t) // user-2 has no rights here
	denied := storetest.NewStore(factory(kube, ns, "user-2")(t))
	if _, err := denied.Read(ctx); !errors.Is(err, store.ErrPermission) {
		t.Fatalf("read without RBAC: got %v, want ErrPermission", err)
	}
	admin, err := configmap.New(configmap.Options{Namespace: "sf2loki-no-such-namespace", RESTConfig: kube.RESTConfig(kube.AdminToken)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.NewStore(admin).Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true}); !errors.Is(err, store.ErrNoLocation) {
		t.Fatalf("claim in a missing namespace: got %v, want ErrNoLocation", err)
	}
}

// Scenario 43: a document near the 1 MiB ConfigMap limit is refused before the API server
// would, with nothing written.
func TestE2EDocumentNearTheLimit(t *testing.T) {
	ctx := context.Background()
	kube, ns := leastPrivilege(t)
	b := factory(kube, ns, "user-1")(t)
	var logs bytes.Buffer
	st := store.New(b, store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	w, err := st.Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true})
	if err != nil {
		t.Fatal(err)
	}
	big := func(n int) store.Change {
		return store.Change{Set: map[string]json.RawMessage{"big": store.StringValue(strings.Repeat("x", n))}}
	}
	if err := w.Commit(ctx, big(800<<10)); err != nil {
		t.Fatalf("800 KiB document: %v", err)
	}
	if !strings.Contains(logs.String(), "approaching its size limit") {
		t.Fatalf("no warning for an 800 KiB document in a ConfigMap; logs: %s", logs.String())
	}
	before, v, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, big(1<<20)); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("1 MiB checkpoint: got %v, want ErrTooLarge", err)
	}
	after, v2, err := b.Load(ctx)
	if err != nil || v2 != v || string(after) != string(before) {
		t.Fatal("the refused write changed the ConfigMap")
	}
}

// The API server caps a whole ConfigMap (all keys together) at 1 MiB. A commit whose document
// fits the backend's cap but not beside a shared ConfigMap's other keys is refused before it
// is sent, as ErrTooLarge (a person must make room: exit 7), never as ErrUnavailable retried
// on every run; nothing is written.
func TestE2ESharedConfigMapOverLimitIsTooLarge(t *testing.T) {
	ctx := context.Background()
	kube, ns := leastPrivilege(t)
	b := existing(t, kube, ns, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-big"},
		Data:       map[string]string{"other": strings.Repeat("o", 300<<10)},
	})
	st := storetest.NewStore(b)
	w, err := st.Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true})
	if err != nil {
		t.Fatal(err)
	}
	before, v, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 800 KiB: under the backend's 960 KiB document cap, over 1 MiB with the other key.
	err = w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"big": store.StringValue(strings.Repeat("x", 800<<10))}})
	if !errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("commit that makes the shared ConfigMap exceed 1 MiB: got %v; want ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("other keys (%d bytes)", 300<<10)) {
		t.Fatalf("the message does not say how much the other keys take: %v", err)
	}
	if s := w.Stats(); s.Retries != 0 {
		t.Fatalf("a refused oversize commit was retried: %+v", s)
	}
	after, v2, err := b.Load(ctx)
	if err != nil || v2 != v || string(after) != string(before) {
		t.Fatalf("the refused write changed the ConfigMap (%v)", err)
	}
}

// The API server's own 422 "Too long" (here for a backend whose cap is set above 1 MiB) is
// ErrTooLarge too, not an unavailable store.
func TestE2EConfigMapTooLongAnswerIsTooLarge(t *testing.T) {
	kube, ns := leastPrivilege(t)
	b, err := configmap.New(configmap.Options{
		Namespace: ns, Name: "over-the-cap", MaxSize: 2 << 20, RESTConfig: kube.RESTConfig(kube.UserToken("user-1")),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Store(context.Background(), []byte(strings.Repeat("x", 1<<20+1)), "")
	if !errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a ConfigMap the API server refuses as too long: got %v; want ErrTooLarge", err)
	}
}

// Any other 422 Invalid is the API server refusing the ConfigMap for good: an immutable
// ConfigMap is a store location that cannot work, ErrPermission (a configuration error,
// exit 2), not an unavailable store retried on every run.
func TestE2EImmutableConfigMapIsAConfigurationError(t *testing.T) {
	ctx := context.Background()
	kube, ns := leastPrivilege(t)
	immutable := true
	b := existing(t, kube, ns, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "frozen"},
		Data:       map[string]string{"other": "x"},
		Immutable:  &immutable,
	})
	_, err := storetest.NewStore(b).Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true})
	if !errors.Is(err, store.ErrPermission) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claim on an immutable ConfigMap: got %v; want ErrPermission", err)
	}
	if !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("the message does not name the cause: %v", err)
	}
}

// Room is what a size check must measure a document against in a shared ConfigMap: the 1 MiB
// less the other keys, as last read, not the document cap alone.
func TestE2ERoomLeavesOutTheOtherKeys(t *testing.T) {
	ctx := context.Background()
	kube, ns := leastPrivilege(t)
	b := existing(t, kube, ns, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-room"},
		Data:       map[string]string{"other": strings.Repeat("o", 300<<10)},
	})
	if limit, others := b.Room(); limit != configmap.DefaultMaxSize || others != 0 {
		t.Fatalf("Room before any read: %d, %d; want the cap %d, 0", limit, others, configmap.DefaultMaxSize)
	}
	if _, err := storetest.NewStore(b).Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if limit, others := b.Room(); limit != 1<<20-300<<10 || others != 300<<10 {
		t.Fatalf("Room beside 300 KiB of other keys: %d, %d; want %d, %d", limit, others, 1<<20-300<<10, 300<<10)
	}
}
