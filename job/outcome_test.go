package job_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/store"
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

// beginFails is a coordinator whose claim fails as a store call does when its context ends or
// the store cannot be reached.
type beginFails struct{ *jobtest.Coordinator }

func (c beginFails) Begin(ctx context.Context, _ string) (job.Session, error) {
	cause := ctx.Err()
	if cause == nil {
		cause = errors.New("connection refused")
	}
	return nil, fmt.Errorf("%w: reading state.json: %w", store.ErrUnavailable, cause)
}

// A signal while the lease is being claimed ends unavailable and says the signal cut the claim
// short (a scheduler's last tick reads as interrupted, not as a store outage); a store that
// cannot be reached without a signal is reported as it is.
func TestSignalDuringClaimSaysInterrupted(t *testing.T) {
	_, sink := receiver(t, simloki.Options{})
	deps := job.Deps{Coordinator: beginFails{jobtest.New()}, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10})}}, Sink: sink}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM before the claim
	rep := job.Run(ctx, deps, baseOptions())
	if rep.Outcome != job.OutcomeUnavailable || !strings.Contains(rep.Error, "interrupted by a signal before the lease was claimed") ||
		!strings.Contains(rep.Error, "context canceled") {
		t.Fatalf("outcome %s (%s), want unavailable, interrupted by a signal, with the store's error", rep.Outcome, rep.Error)
	}
	rep = job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeUnavailable || strings.Contains(rep.Error, "signal") || !strings.Contains(rep.Error, "connection refused") {
		t.Fatalf("outcome %s (%s), want unavailable with the store's error and no signal", rep.Outcome, rep.Error)
	}
}
