package job_test

import (
	"context"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
)

// A signal before anything was shipped ends unavailable (exit 3), not partial: nothing was
// shipped, so nothing can be duplicated or is left to commit.
func TestSignalBeforeShippingIsUnavailable(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 1000})}}, Sink: sink}
	opts := baseOptions()
	ctx, cancel := context.WithCancel(context.Background())
	opts.Hook = func(s job.Step) {
		if s == job.StepAfterClaim {
			cancel() // SIGTERM after the claim, before the first push
		}
	}
	rep := job.Run(ctx, deps, opts)
	if rep.Outcome != job.OutcomeUnavailable || rep.Records != 0 {
		t.Fatalf("outcome %s with %d records (%s), want unavailable with none", rep.Outcome, rep.Records, rep.Error)
	}
	if n := len(srv.Entries()); n != 0 {
		t.Fatalf("%d entries reached the receiver", n)
	}
}
