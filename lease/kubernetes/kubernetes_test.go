package kubernetes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/lease/kubernetes"
	"github.com/sf2loki/sf2loki/lease/leasetest"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
	"github.com/sf2loki/sf2loki/store/file"
	"github.com/sf2loki/sf2loki/store/storetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var leaseNames atomic.Int64

// world is one namespace where user-1 may only get, create and update leases, one Lease name,
// and a file store on a path all "processes" share (the pinned regression's topology).
type world struct {
	kube *testenv.Kube
	ns   string
	name string
	st   *store.Store
	file *file.Backend
}

func newWorld(t *testing.T) *world {
	kube := testenv.SharedKube(t)
	ns := kube.NewNamespace(t)
	kube.Grant(t, ns, "user-1", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}})
	fb, err := file.New(file.Options{Path: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	return &world{kube: kube, ns: ns, name: fmt.Sprintf("sf2loki-%d", leaseNames.Add(1)), st: storetest.NewStore(fb), file: fb}
}

func (w *world) lease(t *testing.T, c lease.Config) *kubernetes.Lease {
	l, err := kubernetes.New(kubernetes.Options{Config: c, Namespace: w.ns, Name: w.name, RESTConfig: w.kube.RESTConfig(w.kube.UserToken("user-1"))})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *world) bytes() []byte {
	data, _, _ := w.file.Load(context.Background())
	return data
}

func (w *world) get(t *testing.T) *coordv1.Lease {
	t.Helper()
	le, err := w.kube.AdminClient(t).CoordinationV1().Leases(w.ns).Get(context.Background(), w.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return le
}

func (w *world) create(t *testing.T, spec coordv1.LeaseSpec, meta metav1.ObjectMeta) {
	t.Helper()
	meta.Name = w.name
	if _, err := w.kube.AdminClient(t).CoordinationV1().Leases(w.ns).Create(context.Background(), &coordv1.Lease{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) delete(t *testing.T) {
	t.Helper()
	if err := w.kube.AdminClient(t).CoordinationV1().Leases(w.ns).Delete(context.Background(), w.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The shared behavioral suite, as a user holding only get/create/update on leases: least
// privilege proven by every step passing.
func TestE2ELeaseBehaviorKubernetes(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		w := newWorld(t)
		return leasetest.Env{Store: w.st, New: func(c lease.Config) lease.Lease { return w.lease(t, c) }, Bytes: w.bytes}
	})
}

// The shared suite with the checkpoint document in a ConfigMap, the CronJob pairing the chart
// renders: the lease as a user holding only get/create/update on leases, the store as one
// holding only get/create/update on configmaps.
func TestE2ELeaseBehaviorKubernetesConfigMap(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		w := newWorld(t)
		w.kube.Grant(t, w.ns, "user-2", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
		b, err := configmap.New(configmap.Options{Namespace: w.ns, Name: w.name + "-state", RESTConfig: w.kube.RESTConfig(w.kube.UserToken("user-2"))})
		if err != nil {
			t.Fatal(err)
		}
		return leasetest.Env{Store: storetest.NewStore(b), New: func(c lease.Config) lease.Lease { return w.lease(t, c) }, Bytes: func() []byte {
			data, _, _ := b.Load(context.Background())
			return data
		}}
	})
}

var hourAgo = metav1.NewMicroTime(time.Now().Add(-time.Hour))

// A takeover of a Lease with leaseTransitions 3 yields 4 and keeps what it did not mean to
// change; renewals keep the epoch and acquireTime.
func TestE2ETakeoverOfTransitionsThreeYieldsFour(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.create(t, coordv1.LeaseSpec{
		HolderIdentity: ptr.To("old-pod/old-run"), LeaseDurationSeconds: ptr.To[int32](30),
		AcquireTime: &hourAgo, RenewTime: &hourAgo, LeaseTransitions: ptr.To[int32](3),
		Strategy: ptr.To(coordv1.OldestEmulationVersion), PreferredHolder: ptr.To("old-pod/old-run"),
	}, metav1.ObjectMeta{Labels: map[string]string{"app": "sf2loki"}, Annotations: map[string]string{"owner": "team-x"}})
	// The API server keeps strategy/preferredHolder only with its CoordinatedLeaderElection
	// gate on; whatever it stored must survive our writes.
	stored := w.get(t).Spec
	l := w.lease(t, leasetest.Cfg("new", 30*time.Second, 0))
	g, err := l.Acquire(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Epoch != 4 {
		t.Fatalf("takeover epoch %d, want 4", g.Epoch)
	}
	le := w.get(t)
	acquired := le.Spec.AcquireTime
	if *le.Spec.LeaseTransitions != 4 || *le.Spec.HolderIdentity != "host/new" || le.Labels["app"] != "sf2loki" ||
		le.Annotations["owner"] != "team-x" || le.Annotations[kubernetes.EpochAnnotation] != "4" || string(le.UID) != g.UID {
		t.Fatalf("after takeover: %+v %+v", le.ObjectMeta, le.Spec)
	}
	if !reflect.DeepEqual(le.Spec.Strategy, stored.Strategy) || !reflect.DeepEqual(le.Spec.PreferredHolder, stored.PreferredHolder) {
		t.Fatalf("takeover changed strategy/preferredHolder: %v %v -> %v %v", stored.Strategy, stored.PreferredHolder, le.Spec.Strategy, le.Spec.PreferredHolder)
	}
	for range 3 {
		if g, err = l.Renew(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	le = w.get(t)
	if g.Epoch != 4 || *le.Spec.LeaseTransitions != 4 || !le.Spec.AcquireTime.Equal(acquired) || le.Labels["app"] != "sf2loki" ||
		!reflect.DeepEqual(le.Spec.Strategy, stored.Strategy) || !reflect.DeepEqual(le.Spec.PreferredHolder, stored.PreferredHolder) {
		t.Fatalf("after renewals: epoch %d spec %+v", g.Epoch, le.Spec)
	}
}

// A Lease whose leaseTransitions (and other fields, as a third-party tool may leave them) is
// unset is taken over without error and yields 1 (scenario 26).
func TestE2EUnsetTransitionsYieldsOne(t *testing.T) {
	for name, spec := range map[string]coordv1.LeaseSpec{
		"transitions unset": {HolderIdentity: ptr.To("x"), LeaseDurationSeconds: ptr.To[int32](30), RenewTime: &hourAgo},
		"everything unset":  {},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.create(t, spec, metav1.ObjectMeta{})
			g, err := w.lease(t, leasetest.Cfg("a", 30*time.Second, 0)).Acquire(context.Background(), 0, 0)
			if err != nil || g.Epoch != 1 {
				t.Fatalf("epoch %d, err %v; want 1", g.Epoch, err)
			}
		})
	}
}

func commit(t *testing.T, s *lease.Session, k string, v int64) {
	t.Helper()
	if err := s.Commit(context.Background(), store.Change{Set: map[string]json.RawMessage{k: storetest.Int(v)}}); err != nil {
		t.Fatal(err)
	}
}

// Lease deleted and recreated while the store keeps fence epoch 7: the next acquire yields 8
// (not 1), the uid change is accepted, and later holders are never locked out (D3, 25, 29).
func TestE2ERecreatedLeaseContinuesAboveTheFence(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	opts := lease.SessionOptions{Logger: leasetest.Quiet}
	l := w.lease(t, leasetest.Cfg("a", 30*time.Second, 0))
	g, err := l.Acquire(ctx, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Claim(ctx, g.ClaimRequest(), store.Snapshot{Absent: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	oldUID := g.UID
	w.delete(t)
	s, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("b", 30*time.Second, 0)), w.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Epoch() != 8 || *w.get(t).Spec.LeaseTransitions != 8 {
		t.Fatalf("epoch after recreation %d (lease %d), want 8", s.Epoch(), *w.get(t).Spec.LeaseTransitions)
	}
	if f := s.Document().Fence; f.LeaseUID == oldUID || f.LeaseUID != s.Grant().UID {
		t.Fatalf("fence uid %q (old %q, new %q)", f.LeaseUID, oldUID, s.Grant().UID)
	}
	commit(t, s, "k", 1)
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s2, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("c", 30*time.Second, 0)), w.st, opts)
	if err != nil || s2.Epoch() != 9 {
		t.Fatalf("the next holder: epoch %v err %v; want 9", s2, err)
	}
	_ = s2.Release(ctx)
}

// Scenario 4: the Lease is deleted between A's acquire and B's read, so both compute the same
// epoch; exactly one claim succeeds (strict), the other is fenced.
func TestE2ESameEpochTwiceOneIsFenced(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	snapA, err := w.st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ga, err := w.lease(t, leasetest.Cfg("a", 30*time.Second, 0)).Acquire(ctx, snapA.Floor(), 0)
	if err != nil {
		t.Fatal(err)
	}
	w.delete(t)
	snapB, err := w.st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := w.lease(t, leasetest.Cfg("b", 30*time.Second, 0)).Acquire(ctx, snapB.Floor(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ga.Epoch != gb.Epoch {
		t.Fatalf("epochs %d and %d: the scenario needs equal epochs", ga.Epoch, gb.Epoch)
	}
	errs := make(chan error, 2)
	go func() { _, err := w.st.Claim(ctx, ga.ClaimRequest(), snapA); errs <- err }()
	go func() { _, err := w.st.Claim(ctx, gb.ClaimRequest(), snapB); errs <- err }()
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || (!errors.Is(e1, store.ErrFenced) && !errors.Is(e2, store.ErrFenced)) {
		t.Fatalf("claims: %v and %v; want exactly one success and one ErrFenced", e1, e2)
	}
}

// Scenario 28: leaseTransitions at the int32 maximum is an integrity error, never a wrap.
func TestE2ETransitionsOverflowIsIntegrity(t *testing.T) {
	w := newWorld(t)
	w.create(t, coordv1.LeaseSpec{LeaseTransitions: ptr.To[int32](math.MaxInt32)}, metav1.ObjectMeta{})
	_, err := w.lease(t, leasetest.Cfg("a", 30*time.Second, 0)).Acquire(context.Background(), 0, 0)
	if !errors.Is(err, store.ErrIntegrity) {
		t.Fatalf("got %v, want ErrIntegrity", err)
	}
	if le := w.get(t); le.Spec.HolderIdentity != nil || *le.Spec.LeaseTransitions != math.MaxInt32 {
		t.Fatalf("the lease was written: %+v", le.Spec)
	}
}

// Scenario 69: without the update verb a takeover is a permission (configuration) error.
func TestE2EMissingUpdateVerbIsPermission(t *testing.T) {
	kube := testenv.SharedKube(t)
	ns := kube.NewNamespace(t)
	kube.Grant(t, ns, "user-2", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create"}})
	w := &world{kube: kube, ns: ns, name: "sf2loki"}
	w.create(t, coordv1.LeaseSpec{}, metav1.ObjectMeta{})
	l, err := kubernetes.New(kubernetes.Options{Config: leasetest.Cfg("a", 30*time.Second, 0), Namespace: ns, Name: "sf2loki", RESTConfig: kube.RESTConfig(kube.UserToken("user-2"))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), 0, 0); !errors.Is(err, store.ErrPermission) {
		t.Fatalf("got %v, want ErrPermission", err)
	}
}

// Scenario 24: the Lease is deleted while A holds it; A's renewer sees 404 and cancels A's
// context; B recreates the Lease above the fence and is not locked out.
func TestE2ERenewerCancelsWhenLeaseDeleted(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	a, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("a", 3*time.Second, 0)), w.st, lease.SessionOptions{RenewEvery: 200 * time.Millisecond, Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, a, "k", 1)
	w.delete(t)
	select {
	case <-a.Context().Done():
	case <-time.After(20 * time.Second): // a failure bound, not a timing assertion
		t.Fatal("the renewer never noticed the deletion")
	}
	if !errors.Is(a.Lost(), lease.ErrLost) {
		t.Fatalf("cause %v", a.Lost())
	}
	b, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("b", 3*time.Second, 0)), w.st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx) }()
	if b.Epoch() != a.Epoch()+1 || storetest.IntValue(b.Checkpoints(), "k") != 1 {
		t.Fatalf("B epoch %d (A %d), k=%d", b.Epoch(), a.Epoch(), storetest.IntValue(b.Checkpoints(), "k"))
	}
	// A's commit after loss is decided by the store: B claimed, so A is fenced.
	if err := a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(0)}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("A's commit after B's claim: got %v, want ErrFenced", err)
	}
}

// The pinned regression of the upstream report, with a real pause: a kubernetes lease with a
// file store on a shared path. A acquires and claims, then stops renewing (paused) past the
// lease duration while its own view still says it holds the lease; B takes over and commits;
// A resumes and commits: fenced, and B's checkpoints are unchanged.
func TestE2EPausedHolderRegressionKubernetesFile(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	const l = 2 * time.Second
	a, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("a", l, 0)), w.st, lease.SessionOptions{RenewEvery: time.Hour, Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, a, "k", 1)
	commit(t, a, "j", 1)
	time.Sleep(l + l/10 + 100*time.Millisecond) // A is paused past L + K
	if a.Context().Err() != nil && !errors.Is(a.Lost(), lease.ErrLost) {
		t.Fatalf("unexpected state of A: %v", context.Cause(a.Context()))
	}
	b, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("b", l, 0)), w.st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatalf("B's takeover after A's lease expired: %v", err)
	}
	defer func() { _ = b.Release(ctx) }()
	commit(t, b, "k", 5)
	before := w.bytes()
	err = a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(2), "j": storetest.Int(2)}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("A's commit after B's takeover: got %v, want ErrFenced", err)
	}
	if string(before) != string(w.bytes()) {
		t.Fatal("A's fenced commit changed the document")
	}
	if cps := b.Checkpoints(); storetest.IntValue(cps, "k") != 5 || storetest.IntValue(cps, "j") != 1 {
		t.Fatalf("B's checkpoints %v", cps)
	}
}

// Scenario 11: A acquires and is paused before claiming, past L; B takes over, claims and
// commits; A resumes and claims with its older epoch: fenced, B's commit intact.
func TestE2EPausedBeforeClaimIsFenced(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	snapA, err := w.st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ga, err := w.lease(t, leasetest.Cfg("a", 30*time.Second, 0)).Acquire(ctx, snapA.Floor(), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lease.Start(ctx, w.lease(t, leasetest.Cfg("b", 30*time.Second, time.Hour)), w.st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx) }()
	commit(t, b, "k", 7)
	before := w.bytes()
	if _, err := w.st.Claim(ctx, ga.ClaimRequest(), snapA); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("A's late claim: got %v, want ErrFenced", err)
	}
	if string(before) != string(w.bytes()) {
		t.Fatal("A's fenced claim changed the document")
	}
}
