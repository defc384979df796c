// Package kubernetes is a lease on a coordination.k8s.io/v1 Lease, driven directly with
// client-go (not the leaderelection package, which cannot bump the epoch for a one-shot
// process and treats a restarted process with the same identity as the same holder), and
// without client-go's clientset (internal/kubeclient says why).
//
// The epoch is spec.leaseTransitions: a create writes max(0, floor) + 1, a takeover writes
// max(transitions, floor) + 1 (a missing value reads as 0), renewals keep it and keep
// acquireTime, and every write is an update carrying the resourceVersion it read (a 409 means
// someone else wrote first). Spec fields and metadata this package does not mean to change
// are kept. The holder identity is "<pod-or-host>/<invocation id>", and the Lease uid travels
// in the grant so the store records it and notices a recreated Lease.
//
// RBAC needed: get, create and update on leases in the namespace (no delete, no list).
package kubernetes

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sf2loki/sf2loki/internal/kubeclient"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// Kind is the lease kind recorded in the checkpoint document's fence.
const Kind = "Lease"

// EpochAnnotation repeats the epoch on the Lease for humans (kubectl describe).
const EpochAnnotation = "sf2loki.io/epoch"

// Options configures the Kubernetes lease. Zero values mean the defaults.
type Options struct {
	lease.Config
	// Namespace of the Lease. Default: the pod's namespace (service account mount) in
	// cluster, else "default".
	Namespace string
	// Name of the Lease. Default "sf2loki".
	Name string
	// Kubeconfig is a kubeconfig file for out-of-cluster use. Default: in-cluster config.
	Kubeconfig string
	// RESTConfig, when set, is used instead of Kubeconfig or the in-cluster config.
	RESTConfig *rest.Config
}

// Lease is a lease.Lease on a Kubernetes Lease object.
type Lease struct {
	api  *kubeclient.Objects[*coordv1.Lease]
	c    lease.Config
	ns   string
	name string
}

var _ lease.Lease = (*Lease)(nil)

const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// New returns the lease named by o.
func New(o Options) (*Lease, error) {
	if o.Name == "" {
		o.Name = "sf2loki"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
		if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
			o.Namespace = strings.TrimSpace(string(b))
		}
	}
	cfg, err := RESTConfig(o.RESTConfig, o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubeclient.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes lease: %w", err)
	}
	return &Lease{api: client.Leases(o.Namespace), c: o.WithDefaults(), ns: o.Namespace, name: o.Name}, nil
}

// RESTConfig returns cfg when set, else the kubeconfig file's configuration, else the
// in-cluster configuration.
func RESTConfig(cfg *rest.Config, kubeconfig string) (*rest.Config, error) {
	return kubeclient.Config(cfg, kubeconfig)
}

// Ref is the lease reference recorded in the checkpoint document.
func (l *Lease) Ref() store.LeaseRef {
	return store.LeaseRef{Kind: Kind, Namespace: l.ns, Name: l.name}
}

func (l *Lease) what() string { return "lease " + l.ns + "/" + l.name }

// classify maps an API error onto the lease/store sentinels.
func (l *Lease) classify(verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: %s %s: %w (the service account needs get, create and update on leases)", store.ErrPermission, verb, l.what(), err)
	default:
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, verb, l.what(), err)
	}
}

func record(le *coordv1.Lease) lease.Record {
	r := lease.Record{
		Ref:     store.LeaseRef{Kind: Kind, Namespace: le.Namespace, Name: le.Name},
		UID:     string(le.UID),
		Version: le.ResourceVersion,
	}
	s := le.Spec
	if s.HolderIdentity != nil {
		r.Holder = *s.HolderIdentity
	}
	r.Released = r.Holder == ""
	if s.LeaseTransitions != nil && *s.LeaseTransitions > 0 {
		r.Epoch = uint64(*s.LeaseTransitions)
	}
	if s.AcquireTime != nil {
		r.AcquiredAt = s.AcquireTime.Time
	}
	if s.RenewTime != nil {
		r.RenewedAt = s.RenewTime.Time
	}
	if s.LeaseDurationSeconds != nil {
		r.Duration = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	return r
}

// get reads the Lease: (nil, nil) when absent.
func (l *Lease) get(ctx context.Context) (*coordv1.Lease, error) {
	le, err := l.api.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, l.classify("reading", err)
	}
	return le, nil
}

func (l *Lease) durationSeconds() *int32 {
	s := int32(min(math.Ceil(l.c.Duration.Seconds()), math.MaxInt32))
	return &s
}

// Acquire implements lease.Lease.
func (l *Lease) Acquire(ctx context.Context, floor uint64, wait time.Duration) (lease.Grant, error) {
	var cur *coordv1.Lease
	_, err := lease.TakeoverRule(ctx, l.c, wait, func(ctx context.Context) (lease.Observed, error) {
		le, err := l.get(ctx)
		if err != nil {
			return lease.Observed{}, err
		}
		cur = le
		if le == nil {
			return lease.Observed{Absent: true}, nil
		}
		return lease.Observed{Record: record(le)}, nil
	})
	if err != nil {
		return lease.Grant{}, err
	}
	var counter uint64
	if cur != nil {
		counter = record(cur).Epoch
	}
	epoch, err := lease.NextEpoch(counter, floor, math.MaxInt32, "leaseTransitions (int32) of "+l.what())
	if err != nil {
		return lease.Grant{}, err
	}
	if floor > counter {
		l.c.Logger.Info("lease counter is behind the checkpoint document's fence; continuing from the fence",
			"lease", l.what(), "lease_transitions", counter, "fence", floor, "epoch", epoch)
	}
	sent := time.Now()
	stamp := l.c.Stamp()
	now := metav1.NewMicroTime(stamp.Wall)
	holder := l.c.Holder()
	transitions := int32(epoch)
	var written *coordv1.Lease
	if cur == nil {
		written, err = l.api.Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.ns, Annotations: map[string]string{EpochAnnotation: strconv.FormatUint(epoch, 10)}},
			Spec: coordv1.LeaseSpec{
				HolderIdentity: &holder, LeaseDurationSeconds: l.durationSeconds(),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: &transitions,
			},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return lease.Grant{}, fmt.Errorf("%w: another invocation created %s first", lease.ErrBusy, l.what())
		}
		if apierrors.IsNotFound(err) {
			return lease.Grant{}, fmt.Errorf("%w: creating %s: %w", store.ErrNoLocation, l.what(), err)
		}
	} else {
		next := cur.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[EpochAnnotation] = strconv.FormatUint(epoch, 10)
		next.Spec.HolderIdentity = &holder
		next.Spec.LeaseDurationSeconds = l.durationSeconds()
		next.Spec.AcquireTime = &now
		next.Spec.RenewTime = &now
		next.Spec.LeaseTransitions = &transitions
		written, err = l.api.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return lease.Grant{}, fmt.Errorf("%w: another invocation wrote %s first", lease.ErrBusy, l.what())
		}
	}
	if err != nil {
		return lease.Grant{}, l.classify("writing", err)
	}
	return lease.Grant{
		Epoch: epoch, Holder: holder, Invocation: l.c.Invocation, Ref: l.Ref(), UID: string(written.UID),
		Duration: l.c.Duration, ValidUntil: l.c.ValidUntil(sent), Token: written.ResourceVersion, Stamped: stamp,
	}, nil
}

// ours reads the Lease and checks that g still holds it.
func (l *Lease) ours(ctx context.Context, g lease.Grant) (*coordv1.Lease, error) {
	le, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	if le == nil {
		return nil, fmt.Errorf("%w: %s was deleted", lease.ErrLost, l.what())
	}
	r := record(le)
	if r.Holder != g.Holder || r.Epoch != g.Epoch || r.UID != g.UID {
		return nil, fmt.Errorf("%w: %s is now held by %q with epoch %d (ours %q, epoch %d)", lease.ErrLost, l.what(), r.Holder, r.Epoch, g.Holder, g.Epoch)
	}
	return le, nil
}

// Renew implements lease.Lease: renewTime moves; holder, epoch and acquireTime stay.
func (l *Lease) Renew(ctx context.Context, g lease.Grant) (lease.Grant, error) {
	sent := time.Now()
	le, err := l.ours(ctx, g)
	if err != nil {
		return g, err
	}
	stamp := l.c.Stamp()
	now := metav1.NewMicroTime(stamp.Wall)
	le.Spec.RenewTime = &now
	le.Spec.LeaseDurationSeconds = l.durationSeconds()
	written, err := l.api.Update(ctx, le, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return g, fmt.Errorf("%w: %s was deleted", lease.ErrLost, l.what())
		}
		return l.c.MayHaveRenewed(g, sent, stamp), l.classify("renewing", err) // a 409 is settled by the next renewal's read
	}
	g.ValidUntil = l.c.RenewedUntil(g, sent, stamp)
	g.Token = written.ResourceVersion
	return g, nil
}

// Release implements lease.Lease: the holder is cleared; the epoch and duration stay.
func (l *Lease) Release(ctx context.Context, g lease.Grant) error {
	for attempt := 0; ; attempt++ {
		le, err := l.ours(ctx, g)
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(l.c.Now())
		le.Spec.HolderIdentity = nil
		le.Spec.RenewTime = &now
		_, err = l.api.Update(ctx, le, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 2 {
			continue
		}
		if err != nil {
			return l.classify("releasing", err)
		}
		return nil
	}
}

// ReleaseFor releases the Lease on behalf of the holder rec names, compared on that holder,
// epoch and uid (the epoch stays).
func (l *Lease) ReleaseFor(ctx context.Context, rec lease.Record) error {
	return l.Release(ctx, lease.Grant{Holder: rec.Holder, Epoch: rec.Epoch, UID: rec.UID, Ref: rec.Ref, Invocation: l.c.Invocation})
}

// Inspect implements lease.Lease.
func (l *Lease) Inspect(ctx context.Context) (lease.Record, error) {
	le, err := l.get(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	if le == nil {
		return lease.Record{}, fmt.Errorf("%w: %s", lease.ErrAbsent, l.what())
	}
	return record(le), nil
}
