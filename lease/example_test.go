package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/lease/leasetest"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// The life of one invocation, as a job sees it; the same for every lease backend.
func ExampleStart() {
	ctx := context.Background()
	st := store.New(storetest.NewMemory(), store.Options{Logger: leasetest.Quiet})
	l := leasestore.New(st, leasestore.Options{Config: lease.Config{Host: "example", Logger: leasetest.Quiet}})

	s, err := lease.Start(ctx, l, st, lease.SessionOptions{Logger: leasetest.Quiet})
	switch {
	case errors.Is(err, lease.ErrBusy): // a live holder: do nothing, exit busy
		return
	case errors.Is(err, store.ErrFenced): // superseded between acquire and claim: exit fenced
		return
	case err != nil: // unavailable, corrupt, foreign lease, permission, integrity
		return
	}
	start := s.Checkpoints() // sources resume from the claimed version only
	_ = start

	// ... intake under s.Context() (canceled when the lease is lost), push to Loki ...

	err = s.Commit(ctx, store.Change{
		Set:      map[string]json.RawMessage{"soql:LoginHistory": json.RawMessage(`{"v":1,"ts":"2026-11-29T10:00:00Z","last_id":"0Ya1"}`)},
		Counters: map[string]store.Counter{"egress:bytes": {Window: "2026-11-29", Value: 52_000}},
	})
	fmt.Println("epoch", s.Epoch(), "commit", err)
	fmt.Println("release", s.Release(ctx))
	// Output:
	// epoch 1 commit <nil>
	// release <nil>
}
