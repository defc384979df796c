package schedule

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/job"
)

// testOptions are the options of the tests' schedulers: a 200 ms jitter, and failed ticks as
// run-once's exit codes count them (every outcome but ok, busy, fenced, budget_paused, dry_run).
func testOptions() Options {
	return Options{
		Timezone: "UTC", Jitter: 200 * time.Millisecond, Grace: 30 * time.Second, MaxRun: 3 * time.Minute, UnreadyAfter: 3,
		Failed: func(o job.Outcome) bool {
			switch o {
			case job.OutcomeOK, job.OutcomeBusy, job.OutcomeFenced, job.OutcomeBudgetPaused, job.OutcomeDryRun:
				return false
			}
			return true
		},
		Log: slog.New(slog.DiscardHandler),
	}
}

// runScheduler starts a scheduler of one job, default, ticking on spec; stop cancels it and
// waits for Run to return.
func runScheduler(t *testing.T, spec string, run func(context.Context) *job.Report) (s *Scheduler, stop func()) {
	t.Helper()
	s, err := New(testOptions(), []Job{{Name: "default", Spec: spec, Run: run}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return s, func() { cancel(); <-done }
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
		s, stop := runScheduler(t, "@every 1s", run)
		time.Sleep(10*time.Second + 500*time.Millisecond)
		stop()
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
		_, stop := runScheduler(t, "@every 1s", run)
		time.Sleep(10*time.Second + 500*time.Millisecond) // tick 10 runs from at most 10.2s (jitter) to 12.7s
		stop()
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
	s, err := New(testOptions(), []Job{{Name: "default", Spec: "@every 1m", Run: func(context.Context) *job.Report { return &job.Report{} }}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.health(time.Now()); ok {
		t.Error("healthy before the scheduler started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go s.Run(ctx)
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
	if _, err := New(testOptions(), []Job{{Name: "g", Spec: "not a spec"}}); err == nil {
		t.Error("a bad spec was accepted")
	}
}

// TestReadyzTurnsUnreadyAfterFailedTicks: with schedule.unready_after 3, /readyz stays 200
// through two failed ticks, answers 503 after the third failure in a row (naming the job) and 200
// again after one good tick; busy and fenced ticks neither count nor end the series; a panicking
// tick counts as failed. With unready_after 0 it never turns unready.
func TestReadyzTurnsUnreadyAfterFailedTicks(t *testing.T) {
	outcomes := []job.Outcome{}
	run := func(context.Context) *job.Report {
		o := outcomes[0]
		outcomes = outcomes[1:]
		if o == "panic" {
			panic("boom")
		}
		return &job.Report{Outcome: o}
	}
	newSched := func(unreadyAfter int) (*Scheduler, Job) {
		o := testOptions()
		o.Jitter, o.UnreadyAfter = 0, unreadyAfter
		j := Job{Name: "elf", Spec: "@every 1m", Run: run}
		s, err := New(o, []Job{j})
		if err != nil {
			t.Fatal(err)
		}
		s.ctx, s.started = context.Background(), true
		return s, j
	}
	// tick runs one tick synchronously the way cron does (a panic is recovered by cron.Recover).
	tick := func(s *Scheduler, j Job, o job.Outcome) {
		outcomes = append(outcomes, o)
		func() {
			defer func() { _ = recover() }()
			s.tick(j, s.ticks[j.Name])
		}()
	}
	readyz := func(s *Scheduler) (int, map[string]any) {
		rec := httptest.NewRecorder()
		s.Handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("/readyz body %q: %v", rec.Body.String(), err)
		}
		return rec.Code, body
	}

	s, j := newSched(3)
	steps := []struct {
		outcome job.Outcome
		want    int
	}{
		{job.OutcomeOK, 200},
		{job.OutcomeUnavailable, 200},
		{job.OutcomeBusy, 200}, // another replica shipped: neither a failure nor a success
		{job.OutcomePartial, 200},
		{"panic", 503}, // the third failure in a row
		{job.OutcomeFenced, 503},
		{job.OutcomeIntegrity, 503},
		{job.OutcomeOK, 200},
		{job.OutcomeConfig, 200},
	}
	for i, st := range steps {
		tick(s, j, st.outcome)
		if code, body := readyz(s); code != st.want {
			t.Fatalf("after tick %d (%s): /readyz %d %v, want %d", i+1, st.outcome, code, body, st.want)
		} else if code == 503 && body["failing"].(map[string]any)["elf"] == nil {
			t.Errorf("503 body does not name the failing job: %v", body)
		}
	}
	if ok, _ := s.health(s.ticks["elf"].LastEnd); !ok {
		t.Error("/healthz must not depend on failed ticks: the process is alive")
	}

	s, j = newSched(0)
	for range 5 {
		tick(s, j, job.OutcomeUnavailable)
	}
	if code, body := readyz(s); code != 200 {
		t.Errorf("unready_after 0: /readyz %d %v after 5 failed ticks, want 200", code, body)
	}
}

// TestSchedulerHealthFailsWhenAnInvocationHangs: a hung invocation (a call that ignores its
// context) makes SkipIfStillRunning skip every later tick while cron moves next forward, so
// only the running invocation's age shows that no tick ran: once it has run longer than
// Jitter + MaxRun + 1m, /healthz must fail and the liveness probe restart the process.
func TestSchedulerHealthFailsWhenAnInvocationHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		run := func(context.Context) *job.Report {
			<-release // hung: ignores its context
			return &job.Report{Outcome: job.OutcomeOK}
		}
		s, stop := runScheduler(t, "@every 1m", run)
		time.Sleep(3 * time.Minute) // the first tick's invocation is 2m old: within MaxRun (3m)
		within, body := s.health(time.Now())
		time.Sleep(27 * time.Minute) // 29m old: far past Jitter + MaxRun + 1m
		hung, hungBody := s.health(time.Now())
		close(release)
		stop()
		if !within {
			t.Errorf("/healthz failed while the invocation was still within MaxRun: %v", body)
		}
		if hung {
			t.Errorf("/healthz ok although the invocation has run 29 minutes (MaxRun 3m) and blocked every later tick: %v", hungBody)
		}
	})
}

// TestHealthzIgnoresAWallClockStep: the wall clock steps 10 minutes forward a minute after the
// scheduler planned its next tick (an NTP correction, a VM resumed with its clock set). cron's
// timer runs on the monotonic clock and fires as planned, 4 minutes later; /healthz, which the
// liveness probe calls, must not call that tick overdue meanwhile and have the pod restarted.
func TestHealthzIgnoresAWallClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(testOptions(), []Job{{Name: "default", Spec: "@every 5m", Run: func(context.Context) *job.Report {
			return &job.Report{Outcome: job.OutcomeOK}
		}}})
		if err != nil {
			t.Fatal(err)
		}
		var step atomic.Int64
		s.wall = func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		healthz := func() (int, string) {
			rec := httptest.NewRecorder()
			s.Handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			return rec.Code, rec.Body.String()
		}

		time.Sleep(time.Minute)
		step.Store(int64(10 * time.Minute))
		if code, body := healthz(); code != http.StatusOK {
			t.Fatalf("a minute after planning, with the wall clock stepped 10m forward: /healthz %d %s, want 200: the tick is not due for 4 more minutes", code, body)
		}
		// The rule still holds on the monotonic clock: past the slack after the planned tick
		// (4 minutes from now), a tick that has not run is overdue.
		if ok, body := s.health(time.Now().Add(4*time.Minute + s.slack + time.Second)); ok {
			t.Errorf("a tick the slack past its planned time is not overdue after a wall clock step: %v", body)
		}
	})
}
