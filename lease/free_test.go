package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/lease/leasetest"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// Free releases an expired holder's lease at once, and a live holder's only when the operator
// names that holder or forces it; a refusal is ErrBusy and writes nothing.
func TestFreeReleasesOnlyWithConsent(t *testing.T) {
	ctx := context.Background()
	st := store.New(storetest.NewMemory(), store.Options{Logger: leasetest.Quiet})
	newLease := func(host string) lease.Lease {
		return leasestore.New(st, leasestore.Options{Config: lease.Config{Host: host, Logger: leasetest.Quiet}})
	}
	op := newLease("operator")
	if f, err := lease.Free(ctx, op, lease.FreeOptions{Now: time.Now()}); err != nil || !f.Absent {
		t.Fatalf("absent lease: %+v, %v; want Absent", f, err)
	}
	s, err := lease.Start(ctx, newLease("job"), st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Release(ctx) }()
	holder, err := op.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	version := func() store.Version {
		snap, err := st.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Version
	}
	before := version()
	for _, o := range []lease.FreeOptions{{}, {Holder: "someone-else/x"}} {
		o.Now = time.Now()
		f, err := lease.Free(ctx, op, o)
		if !errors.Is(err, lease.ErrBusy) || f.State != lease.StateHeld {
			t.Fatalf("Free(%+v) of a live holder: state %s, err %v; want held and ErrBusy", o, f.State, err)
		}
		if v := version(); v != before {
			t.Fatalf("Free(%+v) refused but wrote the document (version %s → %s)", o, before, v)
		}
	}
	// An expired holder: freed without consent.
	f, err := lease.Free(ctx, op, lease.FreeOptions{Now: time.Now().Add(time.Hour)})
	if err != nil || f.State != lease.StateExpired || f.Record.Holder != holder.Holder {
		t.Fatalf("expired holder: %+v, %v; want its record, expired, no error", f, err)
	}
	if f, err := lease.Free(ctx, op, lease.FreeOptions{Holder: holder.Holder, Now: time.Now()}); err != nil || f.State != lease.StateReleased {
		t.Fatalf("freeing a freed lease: state %s, %v; want released, no error", f.State, err)
	}
	if err := s.Commit(ctx, store.Change{}); !errors.Is(err, store.ErrFenced) && !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the freed holder's commit: %v; want it fenced", err)
	}
}

// Naming the live holder is consent: Free releases it.
func TestFreeNamedHolder(t *testing.T) {
	ctx := context.Background()
	st := store.New(storetest.NewMemory(), store.Options{Logger: leasetest.Quiet})
	l := func(host string) lease.Lease {
		return leasestore.New(st, leasestore.Options{Config: lease.Config{Host: host, Logger: leasetest.Quiet}})
	}
	s, err := lease.Start(ctx, l("job"), st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Release(ctx) }()
	rec, err := l("operator").Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []lease.FreeOptions{{Holder: rec.Holder}, {Force: true}} {
		o.Now = time.Now()
		f, err := lease.Free(ctx, l("operator"), o)
		if err != nil || f.State == lease.StateReleased {
			t.Fatalf("Free(%+v): state %s, %v; want the live holder released", o, f.State, err)
		}
		if s, err = lease.Start(ctx, l("job"), st, lease.SessionOptions{Logger: leasetest.Quiet}); err != nil {
			t.Fatalf("after Free(%+v) the lease is not free: %v", o, err)
		}
	}
}

// A maintenance write refused by a live holder says who holds the lease, and writes nothing.
func TestMaintainRefusalDescribesTheHolder(t *testing.T) {
	ctx := context.Background()
	st := store.New(storetest.NewMemory(), store.Options{Logger: leasetest.Quiet})
	l := func(host string) lease.Lease {
		return leasestore.New(st, leasestore.Options{Config: lease.Config{Host: host, Logger: leasetest.Quiet}})
	}
	s, err := lease.Start(ctx, l("job-host"), st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Release(ctx) }()
	edited := false
	_, err = lease.Maintain(ctx, l("operator"), st, lease.MaintainOptions{SessionOptions: lease.SessionOptions{Logger: leasetest.Quiet}},
		func(*store.Document) (*store.Change, error) { edited = true; return nil, nil })
	if !errors.Is(err, lease.ErrBusy) || !strings.Contains(err.Error(), "job-host") || !strings.Contains(err.Error(), "nothing was changed") || edited {
		t.Fatalf("Maintain against a live holder: %v (edited %v); want ErrBusy naming job-host, nothing changed", err, edited)
	}
}
