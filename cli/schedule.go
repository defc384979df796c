package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

func scheduleCommand() *cli.Command {
	return &cli.Command{
		Name:  "schedule",
		Usage: "run invocations on an embedded cron schedule (schedule.spec), with /healthz and /readyz",
		Description: "Every tick is a fresh run-once invocation; busy and fenced ticks are normal and never stop\n" +
			"the scheduler. Any number of replicas may run: the lease decides which one ships.",
		Flags: append(runFlags(),
			&cli.StringFlag{Name: "listen", Usage: "address of /healthz, /readyz and /metrics (schedule.listen); empty = off"},
		),
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			if err := applyRunFlags(c, cfg); err != nil {
				return err
			}
			if c.IsSet("listen") {
				cfg.Schedule.Listen = c.String("listen")
			}
			log, _, err := newLogger(c, cfg)
			if err != nil {
				return err
			}
			warnStartup(cfg, log)
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := checkJobs(ctx, cfg); err != nil { // refuse at start what every tick would refuse
				return err
			}
			pm, err := newProcessMetrics(ctx, cfg.Metrics, log, true)
			if err != nil {
				return exitf(ExitConfig, "metrics: %v", err)
			}
			defer pm.shutdown(ctx)
			jobs, err := scheduledJobs(cfg, c.String("job"), log, pm)
			if err != nil {
				return exitf(ExitConfig, "%v", err)
			}
			s, err := newScheduler(cfg, log, jobs)
			if err != nil {
				return exitf(ExitConfig, "%v", err)
			}
			if cfg.Schedule.Listen != "" {
				ln, err := net.Listen("tcp", cfg.Schedule.Listen)
				if err != nil {
					return exitf(ExitConfig, "schedule.listen: %v", err)
				}
				srv := &http.Server{Handler: s.handler(pm.handler()), ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer srv.Close()
				log.Info("health endpoints listening", "addr", ln.Addr().String())
			}
			s.run(ctx)
			return nil
		},
	}
}

// scheduledJobs returns one cron entry per job group (or the one job when there are no groups;
// only the named group when name is set).
func scheduledJobs(cfg *config.Config, name string, log *slog.Logger, pm *processMetrics) ([]scheduledJob, error) {
	names := cfg.JobNames()
	if name != "" || len(names) == 0 {
		names = []string{name}
	}
	var out []scheduledJob
	for _, n := range names {
		gcfg, err := cfg.ForJob(n)
		if err != nil {
			return nil, err
		}
		glog, label := log, n
		if n != "" {
			glog = log.With("job", n)
		} else {
			label = "default"
		}
		out = append(out, scheduledJob{Name: label, Spec: gcfg.Schedule.Spec,
			Run: func(ctx context.Context) *job.Report {
				return runInvocation(ctx, gcfg, glog, invocationFlags{metrics: pm})
			}})
	}
	return out, nil
}

// scheduledJob is one cron entry: a job group's spec and its invocation.
type scheduledJob struct {
	Name string
	Spec string
	Run  func(ctx context.Context) *job.Report
}

// scheduler runs invocations on cron specs. Every tick gets a fresh invocation and a context
// canceled on shutdown; outcomes never stop it.
type scheduler struct {
	cron   *cron.Cron
	log    *slog.Logger
	jitter time.Duration
	grace  time.Duration
	slack  time.Duration // how late a tick may be before /healthz fails
	// unreadyAfter is how many consecutive failed ticks of a job make /readyz fail (0 = never).
	unreadyAfter int

	mu      sync.Mutex
	ctx     context.Context
	started bool
	ticks   map[string]*tickState
	ids     map[string]cron.EntryID
}

// tickState is what /healthz reports about one scheduled job.
type tickState struct {
	Ticks       int         `json:"ticks"`
	Running     bool        `json:"running"`
	LastStart   time.Time   `json:"last_start,omitzero"`
	LastEnd     time.Time   `json:"last_end,omitzero"`
	LastOutcome job.Outcome `json:"last_outcome,omitempty"`
	Next        time.Time   `json:"next,omitzero"`
	// Failures counts the job's consecutive failed ticks (see tickFailed).
	Failures int `json:"consecutive_failures"`
}

func newScheduler(cfg *config.Config, log *slog.Logger, jobs []scheduledJob) (*scheduler, error) {
	loc, err := time.LoadLocation(cfg.Schedule.Timezone)
	if err != nil {
		return nil, fmt.Errorf("schedule.timezone: %w", err)
	}
	cl := cronLogger{log}
	s := &scheduler{
		// Recover must sit inside SkipIfStillRunning: robfig/cron v3.0.1's SkipIfStillRunning
		// returns its token without a defer, so a panic escaping it would skip every later tick.
		cron:         cron.New(cron.WithLocation(loc), cron.WithChain(cron.SkipIfStillRunning(cl), cron.Recover(cl))),
		log:          log,
		jitter:       cfg.Schedule.Jitter.D(),
		grace:        max(cfg.Run.TerminationGrace.D(), cfg.Run.CommitTimeout.D()+cfg.Run.ReleaseTimeout.D()+cfg.Run.Margin.D()),
		slack:        cfg.Schedule.Jitter.D() + cfg.Run.MaxDuration.D() + time.Minute,
		unreadyAfter: cfg.Schedule.UnreadyAfter,
		ticks:        map[string]*tickState{},
		ids:          map[string]cron.EntryID{},
	}
	for _, j := range jobs {
		st := &tickState{}
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
func (s *scheduler) tick(j scheduledJob, st *tickState) {
	s.mu.Lock()
	ctx := s.ctx
	st.Ticks++
	st.Running = true
	st.LastStart = time.Now()
	s.mu.Unlock()
	ran := false
	var rep *job.Report
	defer func() {
		s.mu.Lock()
		st.Running = false
		st.LastEnd = time.Now()
		if ran { // a tick canceled during its jitter did not run; a panic (rep nil) failed
			switch {
			case tickFailed(rep):
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

// tickFailed reports whether a tick's outcome counts against readiness: one that exits non-zero
// in run-once, or no report at all (a panic). Busy and fenced say only that another replica
// shipped: they neither count as failures nor end a series of them.
func tickFailed(rep *job.Report) bool {
	return rep == nil || outcomeExit(rep.Outcome, false) != ExitOK
}

// ready reports whether the scheduler started and no job has failed unreadyAfter ticks in a row.
func (s *scheduler) ready() (bool, map[string]any) {
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
func (s *scheduler) run(ctx context.Context) {
	s.mu.Lock()
	s.ctx, s.started = ctx, true
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

func (s *scheduler) logNext(name string) {
	e := s.cron.Entry(s.ids[name])
	s.mu.Lock()
	s.ticks[name].Next = e.Next
	s.mu.Unlock()
	s.log.Info("next run", "job", name, "at", e.Next.UTC().Format(time.RFC3339))
}

// health reports whether the scheduler loop is alive: no tick is overdue by more than the slack.
func (s *scheduler) health(now time.Time) (bool, map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.started
	jobs := map[string]tickState{}
	for name, st := range s.ticks {
		jobs[name] = *st
		if next := s.cron.Entry(s.ids[name]).Next; !st.Running && !next.IsZero() && now.After(next.Add(s.slack)) {
			ok = false
		}
	}
	return ok, map[string]any{"ok": ok, "jobs": jobs}
}

// handler serves /healthz, /readyz and, from the process's metrics, /metrics.
func (s *scheduler) handler(metrics http.Handler) http.Handler {
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
