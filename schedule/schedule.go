// Package schedule runs sf2loki invocations on cron specs in one long-running process (`sf2loki
// schedule`): every tick is a fresh invocation after a random jitter, ticks never overlap
// (robfig/cron's SkipIfStillRunning) and no outcome or panic stops the scheduler; /healthz
// says whether the loop is alive and /readyz whether a job has failed too many ticks in a row.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sf2loki/sf2loki/job"
)

// Options configures a Scheduler.
type Options struct {
	// Timezone of the specs (an IANA name; "" is UTC).
	Timezone string
	// Jitter is the most a tick waits at random before it runs, so replicas do not contend.
	Jitter time.Duration
	// Grace is how long shutdown waits for a running invocation to commit and release.
	Grace time.Duration
	// MaxRun is an invocation's longest run: a tick later than Jitter + MaxRun + 1m, or an
	// invocation running longer than that, makes /healthz fail.
	MaxRun time.Duration
	// UnreadyAfter is how many consecutive failed ticks of a job make /readyz fail (0: never).
	UnreadyAfter int
	// Failed says whether an outcome counts as a failed tick (busy and fenced must neither
	// count nor end a series: they say only that another replica shipped).
	Failed func(job.Outcome) bool
	Log    *slog.Logger
}

// Job is one cron entry: a job group's spec and its invocation.
type Job struct {
	Name string
	Spec string
	Run  func(ctx context.Context) *job.Report
}

// scheduler runs invocations on cron specs. Every tick gets a fresh invocation and a context
// canceled on shutdown; outcomes never stop it.
type Scheduler struct {
	cron   *cron.Cron
	log    *slog.Logger
	jitter time.Duration
	grace  time.Duration
	slack  time.Duration // how late a tick may be before /healthz fails
	// unreadyAfter is how many consecutive failed ticks of a job make /readyz fail (0 = never).
	unreadyAfter int
	failed       func(job.Outcome) bool

	mu      sync.Mutex
	ctx     context.Context
	started bool
	ticks   map[string]*TickState
	ids     map[string]cron.EntryID
	// wall is the wall clock cron plans by (time.Now; tests step it). planned is the last time
	// cron planned its timer from (its start, each tick), read on both clocks.
	wall    func() time.Time
	planned clocks
}

// clocks is one moment read on the wall clock (without a monotonic reading) and the monotonic.
type clocks struct{ wall, mono time.Time }

func (s *Scheduler) read() clocks {
	mono := time.Now()
	return clocks{wall: s.wall().Round(0), mono: mono}
}

// TickState is what /healthz reports about one scheduled job.
type TickState struct {
	Ticks       int         `json:"ticks"`
	Running     bool        `json:"running"`
	LastStart   time.Time   `json:"last_start,omitzero"`
	LastEnd     time.Time   `json:"last_end,omitzero"`
	LastOutcome job.Outcome `json:"last_outcome,omitempty"`
	Next        time.Time   `json:"next,omitzero"`
	// Failures counts the job's consecutive failed ticks (see tickFailed).
	Failures int `json:"consecutive_failures"`
}

func New(o Options, jobs []Job) (*Scheduler, error) {
	loc, err := time.LoadLocation(o.Timezone)
	if err != nil {
		return nil, fmt.Errorf("schedule.timezone: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	cl := cronLogger{o.Log}
	s := &Scheduler{
		// Recover must sit inside SkipIfStillRunning: robfig/cron v3.0.1's SkipIfStillRunning
		// returns its token without a defer, so a panic escaping it would skip every later tick.
		cron:         cron.New(cron.WithLocation(loc), cron.WithChain(cron.SkipIfStillRunning(cl), cron.Recover(cl))),
		log:          o.Log,
		jitter:       o.Jitter,
		grace:        o.Grace,
		slack:        o.Jitter + o.MaxRun + time.Minute,
		unreadyAfter: o.UnreadyAfter,
		failed:       o.Failed,
		ticks:        map[string]*TickState{},
		ids:          map[string]cron.EntryID{},
		wall:         time.Now,
	}
	for _, j := range jobs {
		st := &TickState{}
		s.ticks[j.Name] = st
		id, err := s.cron.AddFunc(j.Spec, func() { s.tick(j, st) })
		if err != nil {
			return nil, fmt.Errorf("schedule spec %q of %s: %w", j.Spec, j.Name, err)
		}
		s.ids[j.Name] = id
	}
	return s, nil
}

// tick runs one invocation after a random jitter, so replicas do not contend at one instant.
func (s *Scheduler) tick(j Job, st *TickState) {
	s.mu.Lock()
	ctx := s.ctx
	st.Ticks++
	st.Running = true
	st.LastStart = time.Now()
	s.planned = s.read() // cron woke for this tick and plans its next timer from now
	s.mu.Unlock()
	ran := false
	var rep *job.Report
	defer func() {
		s.mu.Lock()
		st.Running = false
		st.LastEnd = time.Now()
		if ran { // a tick canceled during its jitter did not run; a panic (rep nil) failed
			switch {
			case rep == nil || s.failed(rep.Outcome): // a panic, or an outcome that fails
				st.Failures++
			case rep.Outcome != job.OutcomeBusy && rep.Outcome != job.OutcomeFenced:
				st.Failures = 0
			}
		}
		s.mu.Unlock()
		s.logNext(j.Name)
	}()
	if s.jitter > 0 {
		t := time.NewTimer(rand.N(s.jitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	ran = true
	rep = j.Run(ctx)
	s.mu.Lock()
	st.LastOutcome = rep.Outcome
	s.mu.Unlock()
}

// ready reports whether the scheduler started and no job has failed unreadyAfter ticks in a row.
func (s *Scheduler) ready() (bool, map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.started
	failing := map[string]int{}
	for name, st := range s.ticks {
		if s.unreadyAfter > 0 && st.Failures >= s.unreadyAfter {
			ok = false
			failing[name] = st.Failures
		}
	}
	body := map[string]any{"ok": ok}
	if len(failing) > 0 {
		body["failing"] = failing // job -> consecutive failed ticks
	}
	return ok, body
}

// run schedules until ctx ends, then stops scheduling and waits (up to the grace period) for a
// running invocation, whose context is already canceled, to commit what it pushed and release.
func (s *Scheduler) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx, s.started = ctx, true
	s.planned = s.read()
	s.mu.Unlock()
	s.cron.Start()
	for name := range s.ids {
		s.logNext(name)
	}
	<-ctx.Done()
	s.log.Info("stopping the scheduler; waiting for a running invocation to finish", "grace", s.grace)
	done := s.cron.Stop()
	select {
	case <-done.Done():
	case <-time.After(s.grace):
		s.log.Warn("a running invocation did not finish within the grace period")
	}
}

func (s *Scheduler) logNext(name string) {
	e := s.cron.Entry(s.ids[name])
	s.mu.Lock()
	s.ticks[name].Next = e.Next
	s.mu.Unlock()
	s.log.Info("next run", "job", name, "at", e.Next.UTC().Format(time.RFC3339))
}

// health reports whether the scheduler loop is alive at now (a time.Now reading: only its
// monotonic reading counts): no tick is overdue by more than the slack.
func (s *Scheduler) health(now time.Time) (bool, map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.started
	jobs := map[string]TickState{}
	for name, st := range s.ticks {
		jobs[name] = *st
		if s.overdue(st, s.cron.Entry(s.ids[name]).Next, now) {
			ok = false
		}
	}
	return ok, map[string]any{"ok": ok, "jobs": jobs}
}

// overdue reports whether a job's tick is later than the slack. A running invocation is late
// once it has run longer than the slack: SkipIfStillRunning skips the ticks it blocks and cron
// moves next past them, so a hung invocation would otherwise never look overdue.
//
// Both are measured on the monotonic clock, as cron's timer is: cron sleeps next minus the wall
// time it planned at, so the tick is due that long after the plan however the wall clock steps
// meanwhile. Comparing next with the wall clock instead would call a tick overdue for up to a
// whole period after a forward step (an NTP correction, a VM resumed), until cron's timer fires
// and runs it, and the liveness probe would restart the process for nothing; and it would never
// see the ticks a backward step delays (cron then sleeps again until the wall clock is back at
// next), which this rule reports once they are later than the slack.
func (s *Scheduler) overdue(st *TickState, next, now time.Time) bool {
	if st.Running {
		return now.After(st.LastStart.Add(s.slack))
	}
	if next.IsZero() {
		return false
	}
	due := s.planned.mono.Add(next.Sub(s.planned.wall))
	return now.After(due.Add(s.slack))
}

// handler serves /healthz, /readyz and, from the process's metrics, /metrics.
func (s *Scheduler) Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, body := s.health(time.Now())
		writeJSON(w, ok, body)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, body := s.ready()
		writeJSON(w, ok, body)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// cronLogger adapts slog to robfig/cron's logger (panics recovered, skipped ticks).
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" {
		l.log.Warn("tick skipped: the previous invocation is still running", kv...)
		return
	}
	l.log.Debug("cron: "+msg, kv...)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	if errors.Is(err, context.Canceled) {
		return
	}
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}
