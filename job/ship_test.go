package job_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
)

// TestRateCapsPushEachStreamOldestFirst: a batch holds a stream's rows out of time order (a late
// file for hour 0 after hour 2's, in one run; the stream has no head yet, so none is late). One
// push takes them whatever their order: the client sends each stream's entries oldest first.
// When the egress rate cap cuts the batch into several pushes (10 lines/s: about 60 in the
// first), each stream's entries still go oldest first across them: none is refused for being
// behind a newer entry of the same batch, re-stamped or, under on-late reject, dropped.
func TestRateCapsPushEachStreamOldestFirst(t *testing.T) {
	for _, policy := range []job.TimestampPolicy{job.Restamp, job.RejectLate} {
		t.Run(map[job.TimestampPolicy]string{job.Restamp: "restamp", job.RejectLate: "reject"}[policy], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := time.Now().Add(-6 * time.Hour)
				srv, sink := receiver(t, simloki.Options{})
				src := hourly(base, map[string][]int{"Login": {2, 0}}, nil)
				opts := baseOptions()
				opts.Egress = job.EgressOptions{LinesPerSecond: 10}
				opts.Ordering.Policy = policy
				rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
				if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 || len(rep.Restamped) != 0 || srv.RejectedCount("") != 0 {
					t.Fatalf("%s %s: dropped %v, restamped %v, the receiver refused %d; want every row at its own time",
						rep.Outcome, rep.Error, rep.Dropped, rep.Restamped, srv.RejectedCount(""))
				}
				if rep.Pushes < 2 {
					t.Fatalf("setup: %d pushes; want the rate cap to cut the batch", rep.Pushes)
				}
				assertExactlyOnce(t, delivered(t, srv), src.Totals)
				if moved := eventTimes(t, srv, src.Stamp); moved != 0 {
					t.Fatalf("%d rows moved", moved)
				}
			})
		})
	}
}
