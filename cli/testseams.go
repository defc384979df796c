package cli

import (
	"time"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// Test seams. They are nil in the sf2loki binary; only tests of this package set them (the
// adversarial suite re-executes its test binary as real run-once processes and installs crash
// points, store fault wrappers and skewed clocks through them).
var (
	// testHook is called at each step of an invocation.
	testHook func(job.Step)
	// testWrapBackend wraps the checkpoint store's backend (journaling writes, lost acks).
	testWrapBackend func(store.Backend) store.Backend
	// testWrapLease wraps the lease (a crash between acquire and claim).
	testWrapLease func(lease.Lease) lease.Lease
	// testNow replaces the wall clock of the lease, the store and the job (clock skew).
	testNow func() time.Time
)
