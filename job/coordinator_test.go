package job_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// The claim's conflicts are store contention like any commit's: the run report counts them
// (with the store lease, the default, acquiring is the claim).
func TestReportCountsTheClaimsConflicts(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	mem := storetest.NewMemory()
	st := store.New(mem, store.Options{Logger: quiet, Backoff: time.Millisecond})
	l := leasestore.New(st, leasestore.Options{Config: lease.Config{Duration: 30 * time.Second, Logger: quiet}})
	coord := &job.LeaseCoordinator{Lease: l, Store: st, Options: lease.SessionOptions{Logger: quiet}}
	_, sink := receiver(t, simloki.Options{})
	mem.FailNext(storetest.OpStore, storetest.Conflict) // the claim meets a concurrent conditional write
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 3})}}, Sink: sink},
		withLog(baseOptions(), quiet))
	if rep.Outcome != job.OutcomeOK || rep.Records != 3 {
		t.Fatalf("outcome %s with %d records (%s), want ok with 3", rep.Outcome, rep.Records, rep.Error)
	}
	if rep.CASConflicts != 1 || rep.CASRetries != 2 {
		t.Fatalf("report counts %d conflicts and %d CAS retries, want the claim's 1 conflict (1 conflict + 1 retry)", rep.CASConflicts, rep.CASRetries)
	}
}

func withLog(o job.Options, l *slog.Logger) job.Options {
	o.Log = l
	return o
}
