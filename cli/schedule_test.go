package cli

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

func scheduleConfig(spec string) *config.Config {
	cfg := config.Defaults()
	cfg.Schedule.Spec, cfg.Schedule.Jitter = spec, config.Duration(200*time.Millisecond)
	return cfg
}

func TestSchedulerSurvivesPanicsAndEveryOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		outcomes := []job.Outcome{job.OutcomeBusy, job.OutcomeFenced, job.OutcomeUnavailable, job.OutcomeIntegrity, job.OutcomeOK}
		run := func(context.Context) *job.Report {
			n := calls.Add(1)
			if n == 1 {
				panic("boom")
			}
			return &job.Report{Outcome: outcomes[int(n-2)%len(outcomes)]}
		}
		s, err := newScheduler(scheduleConfig("@every 1s"), slog.New(slog.DiscardHandler), []scheduledJob{{Name: "default", Spec: "@every 1s", Run: run}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.run(ctx); close(done) }()
		time.Sleep(10*time.Second + 500*time.Millisecond)
		cancel()
		<-done
		if got := calls.Load(); got < 9 {
			t.Fatalf("%d invocations in 10 ticks; the scheduler stopped after a panic or an outcome", got)
		}
		if ok, _ := s.health(time.Now()); !ok {
			t.Error("health is not ok after a normal series of ticks")
		}
	})
}

func TestSchedulerNeverOverlapsAndCancelsOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, maxRunning, calls atomic.Int32
		var canceled atomic.Bool
		run := func(ctx context.Context) *job.Report {
			calls.Add(1)
			if n := running.Add(1); n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			defer running.Add(-1)
			select {
			case <-time.After(2500 * time.Millisecond): // longer than the period
			case <-ctx.Done():
				canceled.Store(true)
			}
			return &job.Report{Outcome: job.OutcomeOK}
		}
		s, err := newScheduler(scheduleConfig("@every 1s"), slog.New(slog.DiscardHandler), []scheduledJob{{Name: "default", Spec: "@every 1s", Run: run}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx) }()
		time.Sleep(10*time.Second + 500*time.Millisecond) // tick 10 runs from at most 10.2s (jitter) to 12.7s
		cancel()
		wg.Wait()
		if maxRunning.Load() != 1 {
			t.Errorf("%d invocations ran at once; SkipIfStillRunning must keep it to 1", maxRunning.Load())
		}
		if c := calls.Load(); c < 3 || c > 5 {
			t.Errorf("%d invocations in 10s of 2.5s runs, want 3-5", c)
		}
		if !canceled.Load() {
			t.Error("the running invocation's context was not canceled on shutdown")
		}
	})
}

func TestSchedulerHealthFailsWhenATickIsOverdue(t *testing.T) {
	s, err := newScheduler(scheduleConfig("@every 1m"), slog.New(slog.DiscardHandler), []scheduledJob{{Name: "default", Spec: "@every 1m", Run: func(context.Context) *job.Report { return &job.Report{} }}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.health(time.Now()); ok {
		t.Error("healthy before the scheduler started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go s.run(ctx)
	defer cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ok, _ := s.health(time.Now()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never healthy after start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ok, _ := s.health(time.Now().Add(time.Hour)); ok {
		t.Error("healthy although the next tick is an hour overdue")
	}
}

func TestScheduleSpecErrors(t *testing.T) {
	if _, err := newScheduler(scheduleConfig("@every 1m"), slog.New(slog.DiscardHandler), []scheduledJob{{Name: "g", Spec: "not a spec"}}); err == nil {
		t.Error("a bad spec was accepted")
	}
}
