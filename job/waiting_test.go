package job_test

import (
	"context"
	"strings"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
)

// TestAWaitingKeyIsNotCaughtUp: a key that stops with more to ship (source.ErrWaiting) ends
// like a key at its end — what it handed out before is pushed and committed, the other keys go
// on, nothing is an error — but the run is not caught up: the report lists the key with its
// source's reason under waiting and says so in a note. For a scheduled run the outcome is ok
// (the next run ships the rest); with MustFinish (a backfill: no later run reads its keys) it
// is partial, or unavailable when nothing was shipped, naming the key. The next
// run ships the rest once, and is caught up.
func TestAWaitingKeyIsNotCaughtUp(t *testing.T) {
	for _, c := range []struct {
		name        string
		totals      map[string]int
		waitAt      int // on key "a"
		mustFinish  bool
		want        job.Outcome
		wantRecords int64
	}{
		{name: "scheduled", totals: map[string]int{"a": 10, "b": 5}, waitAt: 4, want: job.OutcomeOK, wantRecords: 8},
		{name: "must finish", totals: map[string]int{"a": 10, "b": 5}, waitAt: 4, mustFinish: true, want: job.OutcomePartial, wantRecords: 8},
		{name: "must finish, nothing shipped", totals: map[string]int{"a": 10}, waitAt: 1, mustFinish: true, want: job.OutcomeUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			coord := jobtest.New()
			srv, sink := receiver(t, simloki.Options{})
			src := numbered(c.totals)
			src.WaitAt = map[string]int{"a": c.waitAt}
			deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
			opts := baseOptions()
			opts.MustFinish = c.mustFinish
			rep := job.Run(context.Background(), deps, opts)
			if rep.Outcome != c.want || rep.CaughtUp || rep.Records != c.wantRecords || len(rep.Errors) > 0 {
				t.Fatalf("outcome %s caught_up %v records %d errors %v (%s); want %s, not caught up, %d records, no errors",
					rep.Outcome, rep.CaughtUp, rep.Records, rep.Errors, rep.Error, c.want, c.wantRecords)
			}
			if len(rep.Waiting) != 1 || rep.Waiting[0].Key != "a" || !strings.Contains(rep.Waiting[0].Reason, "is not ready yet") {
				t.Fatalf("waiting %+v; want key a with its source's reason", rep.Waiting)
			}
			if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "numbered: a: waits for a later run: a #") {
				t.Errorf("notes %q; want one naming the key and why it waits", notes)
			}
			if c.mustFinish && (!strings.Contains(rep.Error, "not finished: a waits for a later run") || !strings.Contains(rep.Error, "running this again")) {
				t.Errorf("error %q; want it to say the run is not finished, naming the key, and that running it again finishes it", rep.Error)
			}
			if got := checkpoints(t, coord); got["a"] != c.waitAt-1 || got["b"] != c.totals["b"] {
				t.Fatalf("stored cursors %v; want a at %d, b at its end", got, c.waitAt-1)
			}

			src.WaitAt = nil
			rep = job.Run(context.Background(), deps, opts)
			if rep.Outcome != job.OutcomeOK || !rep.CaughtUp || len(rep.Waiting) > 0 {
				t.Fatalf("next run: outcome %s caught_up %v waiting %v (%s); want ok and caught up", rep.Outcome, rep.CaughtUp, rep.Waiting, rep.Error)
			}
			assertExactlyOnce(t, delivered(t, srv), c.totals)
		})
	}
}
