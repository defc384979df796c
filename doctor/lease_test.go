package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/lease"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/store"
)

// deniedBackend is an object store that refuses access (an S3 403, a file the user may not read).
type deniedBackend struct{}

func (deniedBackend) Load(context.Context) ([]byte, store.Version, error) {
	return nil, "", fmt.Errorf("%w: s3://bucket/state.json: GetObject: 403 AccessDenied", store.ErrPermission)
}
func (deniedBackend) Store(context.Context, []byte, store.Version) (store.Version, error) {
	return "", fmt.Errorf("%w: 403", store.ErrPermission)
}
func (deniedBackend) Delete(context.Context) error { return nil }
func (deniedBackend) MaxSize() int                 { return 0 }
func (deniedBackend) String() string               { return "s3://bucket/state.json" }

// deniedKubeLease is a Kubernetes lease whose Lease object sf2loki may not read.
type deniedKubeLease struct{ lease.Lease }

func (deniedKubeLease) Inspect(context.Context) (lease.Record, error) {
	return lease.Record{}, fmt.Errorf("%w: leases.coordination.k8s.io \"sf2loki\" is forbidden", store.ErrPermission)
}

func (deniedKubeLease) Ref() store.LeaseRef {
	return store.LeaseRef{Kind: "kubernetes", Namespace: "sf2loki", Name: "sf2loki"}
}

// A permission error reading the lease gets the fix of the system that refused it: Lease RBAC
// for a Kubernetes lease, and for a store lease (which lives in the document, with no Lease
// object, service account or namespace) none of its own — store.read FAILs with the store's fix
// and lease.read says it depends on it.
func TestLeaseReadPermissionFixMatchesLeaseType(t *testing.T) {
	st := store.New(deniedBackend{}, store.Options{})
	storeLease := leasestore.New(st, leasestore.Options{})
	kubeLease := deniedKubeLease{}
	tests := []struct {
		name       string
		lease      Lease
		wantStatus Status
		wantFix    string // a substring of lease.read's fix; "" for none
	}{
		{"store lease", Lease{Lease: storeLease, Type: "store", StoreType: "s3", Ref: storeLease.Ref(), Store: st}, StatusSkip, ""},
		{"kubernetes lease", Lease{Lease: kubeLease, Type: "kubernetes", StoreType: "s3", Ref: kubeLease.Ref(), Store: st}, StatusFail, "coordination.k8s.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks := append(LeaseChecks(tt.lease), StoreChecks(Store{Store: st, Type: "s3", ProbeNote: "n/a"})...)
			rep, err := Run(context.Background(), checks, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := rep.Result("store.read"); r.Status != StatusFail || !strings.Contains(r.Fix, "read and write access") {
				t.Errorf("store.read = %s (fix %q), want FAIL with the store's access fix", r.Status, r.Fix)
			}
			r, _ := rep.Result("lease.read")
			if r.Status != tt.wantStatus {
				t.Errorf("lease.read = %s %q (fix %q), want %s", r.Status, r.Message, r.Fix, tt.wantStatus)
			}
			if tt.wantFix == "" && r.Fix != "" || !strings.Contains(r.Fix, tt.wantFix) {
				t.Errorf("lease.read fix = %q, want %q", r.Fix, tt.wantFix)
			}
		})
	}
}
