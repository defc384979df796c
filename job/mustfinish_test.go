package job_test

import (
	"context"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// TestARunCutShortByTimeIsNotFinished: a draining run whose time runs out before every key
// reached its end, whether in the middle of a key or before a source could even open, is not
// caught up. A scheduled run ends ok (the next run goes on); a run with MustFinish (a backfill:
// no later run reads its keys) ends partial, or unavailable when nothing was shipped, saying it
// is not finished, why, and that running it again ships the rest.
func TestARunCutShortByTimeIsNotFinished(t *testing.T) {
	for _, c := range []struct {
		name       string
		slowOpen   bool // the source opens only once the run's intake is over
		mustFinish bool
		want       job.Outcome
		shipped    bool
	}{
		{name: "scheduled, mid-key", want: job.OutcomeOK, shipped: true},
		{name: "must finish, mid-key", mustFinish: true, want: job.OutcomePartial, shipped: true},
		{name: "scheduled, before open", slowOpen: true, want: job.OutcomeOK},
		{name: "must finish, before open", slowOpen: true, mustFinish: true, want: job.OutcomeUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			coord := jobtest.New()
			_, sink := receiver(t, simloki.Options{})
			src := numbered(map[string]int{"a": 1_000_000})
			src.Delay = 100 * time.Microsecond
			var bound source.Source = src
			if c.slowOpen {
				bound = openAtIntakeEnd{src}
			}
			opts := baseOptions()
			opts.Drain, opts.MustFinish, opts.PushEntries = true, c.mustFinish, 20
			opts.MaxDuration = opts.PushReserve + opts.CommitReserve + opts.ReleaseReserve + 300*time.Millisecond
			rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: bound}}, Sink: sink}, opts)
			if rep.Outcome != c.want || rep.CaughtUp || (rep.Records > 0) != c.shipped || len(rep.Errors) > 0 {
				t.Fatalf("outcome %s caught_up %v, %d records, errors %v (%s); want %s, not caught up, shipped %v, no source errors",
					rep.Outcome, rep.CaughtUp, rep.Records, rep.Errors, rep.Error, c.want, c.shipped)
			}
			if got := checkpoints(t, coord)["a"]; int64(got) != rep.Records {
				t.Errorf("stored cursor %d; want the %d records shipped committed", got, rep.Records)
			}
			if c.mustFinish && (!strings.Contains(rep.Error, "not finished") || !strings.Contains(rep.Error, "time ran out") ||
				!strings.Contains(rep.Error, "running this again")) {
				t.Errorf("error %q; want it to say the run is not finished because its time ran out, and that running it again finishes it", rep.Error)
			}
			if !c.mustFinish && rep.Error != "" {
				t.Errorf("error %q; want none", rep.Error)
			}
		})
	}
}

// openAtIntakeEnd is a source whose Open takes until the run's intake is over (a listing that
// outlasts the time left) and then fails for it.
type openAtIntakeEnd struct{ *sourcetest.Numbered }

func (s openAtIntakeEnd) Open(ctx context.Context, _ source.OpenRequest) ([]source.Stream, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
