package job_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
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

// downSink is a receiver that is down: each push takes a while (the client retrying 503s with
// backoff) and then delivers nothing.
type downSink struct{ took time.Duration }

func (s downSink) Push(ctx context.Context, entries []loki.Entry) loki.Result {
	select {
	case <-time.After(s.took):
	case <-ctx.Done():
	}
	res := loki.Result{Outcomes: make([]loki.Outcome, len(entries)),
		Err: fmt.Errorf("%w: 503 after retries", loki.ErrUnavailable)}
	for i := range entries {
		res.NotDelivered = append(res.NotDelivered, entries[i].Ref)
	}
	return res
}

// Loki is down and the run's one push, started before the intake deadline, fails after it
// (the client kept retrying into the push reserve): nothing was shipped and the key is frozen,
// so the run is unavailable (exit 3) and not caught up, although intake had already stopped
// for its deadline when the push failed.
func TestPushFailingAfterTheIntakeDeadlineIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		coord := jobtest.New()
		deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10})}},
			Sink: downSink{took: 90 * time.Second}}
		// Intake stops 60 s in; the push may last 2 minutes and fails 90 s in.
		opts := job.Options{MaxDuration: 4 * time.Minute, PushReserve: 2 * time.Minute, CommitReserve: 30 * time.Second,
			ReleaseReserve: 30 * time.Second}
		start := time.Now()
		rep := job.Run(context.Background(), deps, opts)
		if took := time.Since(start); took < 90*time.Second {
			t.Fatalf("setup: the run took %v, want the push to end past the intake deadline", took)
		}
		if rep.Records != 0 || len(rep.Frozen) != 1 {
			t.Fatalf("setup: records %d frozen %+v", rep.Records, rep.Frozen)
		}
		if rep.Outcome != job.OutcomeUnavailable || rep.CaughtUp || !strings.Contains(rep.Error, "503") {
			t.Fatalf("Loki down, nothing shipped, key a frozen (%s): outcome %s caught_up %v error %q; want unavailable naming the push failure, not caught up",
				rep.Frozen[0].Reason, rep.Outcome, rep.CaughtUp, rep.Error)
		}
	})
}
