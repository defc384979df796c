package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// Lease is the lease to check.
type Lease struct {
	// Lease reads the lease record. When nil, LeaseErr says why it could not be built.
	Lease    lease.Lease
	LeaseErr error
	// Type is the lease.type value (store, kubernetes); StoreType the state.store value.
	Type      string
	StoreType string
	// Ref is the lease this deployment is configured with (kind, namespace, name).
	Ref store.LeaseRef
	// Store reads the document's fence (nil when the store could not be built).
	Store *store.Store
	// Kube is the Kubernetes Lease object (kubernetes leases: permissions by dry run).
	Kube *KubeObject
	// Skew is lease.max_clock_skew (expiry by wall clock allows it).
	Skew time.Duration
	// Now is the wall clock. Default time.Now.
	Now func() time.Time
}

func (l Lease) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// LeaseChecks returns the checks of the lease: a read of the real lease, its permissions (dry
// runs), its agreement with the document's fence, and the lease/store pairing.
func LeaseChecks(l Lease) []Check {
	checks := []Check{{ID: "lease.read", Title: "lease", Run: l.checkRead}}
	if l.Kube != nil {
		checks = append(checks, l.Kube.Check("lease.rbac", "lease.read"))
	}
	checks = append(checks,
		Check{ID: "lease.fence", Title: "lease and document fence agree", Needs: []string{"lease.read", "store.read"}, Run: l.checkFence},
		Check{ID: "lease.pairing", Title: "lease and store pairing", Run: l.checkPairing},
	)
	return checks
}

func recordDetails(r lease.Record) []string {
	d := []string{"lease: " + r.Ref.String()}
	if r.UID != "" {
		d = append(d, "uid: "+r.UID)
	}
	if !r.AcquiredAt.IsZero() {
		d = append(d, "acquired at: "+r.AcquiredAt.UTC().Format(time.RFC3339))
	}
	if r.Version != "" {
		d = append(d, "version: "+r.Version)
	}
	return d
}

func (l Lease) checkRead(ctx context.Context) Result {
	if l.Lease == nil {
		return Fail("fix the lease section (sf2loki config check)", "cannot build the %s lease: %v", l.Type, l.LeaseErr)
	}
	r, err := l.Lease.Inspect(ctx)
	switch {
	case errors.Is(err, lease.ErrAbsent):
		return Info("%s does not exist yet: the first run creates it", l.Ref)
	case err != nil && l.Type == "store":
		// Every error reading a store lease is the store's (store.read reports it with its
		// fix); the Kubernetes advice below would send the operator to RBAC that does not exist.
		return Skip("the store lease lives in the document, which cannot be read (see store.read): %v", err)
	case errors.Is(err, store.ErrPermission):
		return Fail("grant the service account get, create and update on leases (apiGroup coordination.k8s.io) in namespace "+l.Ref.Namespace, "%v", err)
	case err != nil:
		return Fail("check the API server address, kubeconfig and network", "reading %s: %v", l.Ref, err)
	}
	return Pass("%s", r.Describe(l.now(), l.Skew)).With(recordDetails(r)...)
}

// checkFence compares the lease with the fence recorded in the document.
func (l Lease) checkFence(ctx context.Context) Result {
	snap, err := l.Store.Read(ctx)
	if err != nil {
		return storeFailure(l.Store.Object(), err)
	}
	if snap.Absent || snap.Doc.Fence == nil {
		return Pass("the document has no fence yet: the first claim records %s", l.Ref)
	}
	f := snap.Doc.Fence
	if f.Lease.Name != "" && f.Lease != l.Ref {
		return Fail(fmt.Sprintf("give each deployment its own document (state.file.path, state.s3.key, state.gcs.object or state.configmap.name), or set the lease (type, namespace, name) back to %s", f.Lease),
			"%s is fenced by lease %s, but this deployment uses lease %s: runs would stop with a configuration error (two deployments sharing one document would otherwise fence each other forever)",
			l.Store.Object(), f.Lease, l.Ref)
	}
	r, err := l.Lease.Inspect(ctx)
	if errors.Is(err, lease.ErrAbsent) {
		return Info("%s does not exist, the document's fence is at epoch %d: the first run recreates it at epoch %d", l.Ref, f.Epoch, f.Epoch+1)
	}
	if err != nil {
		return Fail("check the lease (see lease.read)", "reading %s: %v", l.Ref, err)
	}
	switch {
	case f.LeaseUID != "" && r.UID != "" && f.LeaseUID != r.UID:
		return Info("%s was recreated (uid %s, the document recorded %s): the epoch continues from the document's fence %d, nothing to do",
			l.Ref, r.UID, f.LeaseUID, f.Epoch)
	case r.Epoch < f.Epoch:
		return Info("%s is at epoch %d, behind the document's fence %d (recreated or reset): the next run continues at epoch %d",
			l.Ref, r.Epoch, f.Epoch, f.Epoch+1)
	case r.Epoch > f.Epoch:
		return Info("%s is at epoch %d, ahead of the document's fence %d: a run acquired the lease and has not claimed the document (in progress, or it ended between the two)",
			l.Ref, r.Epoch, f.Epoch)
	}
	return Pass("lease and document agree: epoch %d, lease %s", f.Epoch, l.Ref)
}

func (l Lease) checkPairing(context.Context) Result {
	if w := lease.PairingWarning(l.Type, l.StoreType); w != "" {
		return Warn("use state.store configmap (or s3/gcs) with lease.type kubernetes when several hosts can run sf2loki", "%s", w)
	}
	switch l.Type {
	case "store":
		return Pass("lease.type store with state.store %s: acquiring and claiming are one write", l.StoreType)
	case "kubernetes":
		return Pass("lease.type kubernetes with state.store %s", l.StoreType)
	}
	return Fail("set lease.type to store or kubernetes", "unknown lease.type %q", l.Type)
}
