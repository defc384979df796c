package lambda

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

// TestFunctionLoadsAgainAfterAFailureAndAfterRefresh: the configuration is loaded on the first
// invocation, kept while invocations succeed, and loaded again after a failed one and once the
// refresh period has passed.
func TestFunctionLoadsAgainAfterAFailureAndAfterRefresh(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	loads, outcome := 0, job.OutcomeOK
	f := &Function[int]{
		Refresh: 15 * time.Minute,
		Load: func(context.Context, *int) (*config.Config, *int, error) {
			loads++
			n := loads
			return config.Defaults(), &n, nil
		},
		Log: func(*int) *slog.Logger { t.Fatal("refused"); return nil },
		Run: func(_ context.Context, _ *int, cfg *config.Config) *job.Report {
			return &job.Report{Outcome: outcome}
		},
		Finish: func(_ context.Context, _ *int, rep *job.Report) *job.Report { return rep },
		Now:    func() time.Time { return now },
	}
	invoke := func(want int) {
		t.Helper()
		_, _ = f.Invoke(context.Background(), nil)
		if loads != want {
			t.Fatalf("%d loads, want %d", loads, want)
		}
	}
	invoke(1)
	now = now.Add(time.Minute)
	invoke(1)
	outcome = job.OutcomeUnavailable
	invoke(1) // fails: the next one loads again
	outcome = job.OutcomeOK
	invoke(2)
	now = now.Add(15 * time.Minute)
	invoke(3)
}

// TestFunctionRunDeadlineCountsFromAfterTheLoad: the run measures run.max_duration from when it
// starts, so the time left before the invocation's deadline is counted after the load (S3,
// Secrets Manager, SSM, throttling retries), not from when the invocation began; a slow cold
// start must not push the final push, commit and release past the deadline Lambda kills at.
func TestFunctionRunDeadlineCountsFromAfterTheLoad(t *testing.T) {
	begin := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := begin
	const loadTook = 20 * time.Second
	var runStart time.Time
	var runMax, margin time.Duration
	f := &Function[int]{
		Load: func(context.Context, *int) (*config.Config, *int, error) {
			now = now.Add(loadTook)
			cfg := config.Defaults()
			cfg.Run.MaxDuration = config.Duration(10 * time.Minute)
			margin = cfg.Run.Margin.D()
			n := 1
			return cfg, &n, nil
		},
		Log: func(*int) *slog.Logger { t.Fatal("refused"); return nil },
		Run: func(_ context.Context, _ *int, cfg *config.Config) *job.Report {
			runStart, runMax = now, cfg.Run.MaxDuration.D()
			return &job.Report{Outcome: job.OutcomeOK}
		},
		Finish: func(_ context.Context, _ *int, rep *job.Report) *job.Report { return rep },
		Now:    func() time.Time { return now },
	}
	deadline := begin.Add(2 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if _, err := f.Invoke(ctx, nil); err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if runStart.IsZero() {
		t.Fatal("the run did not start")
	}
	if want := deadline.Sub(runStart) - margin; runMax != want {
		t.Fatalf("max_duration %s for a run starting %s after the invocation, want %s (it ends %s before the deadline, want the margin %s)",
			runMax, runStart.Sub(begin), want, deadline.Sub(runStart.Add(runMax)), margin)
	}
}
