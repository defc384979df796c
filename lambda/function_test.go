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
