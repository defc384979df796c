package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

// Function is the process state of a Lambda execution environment: it keeps what Load built —
// the configuration with its secret references resolved, and whatever the caller keeps warm
// (clients, metrics) — across invocations, and loads it again on the first invocation, after a
// failed one (an authentication failure may be a rotated secret) and once Refresh has passed.
// Every invocation still runs the whole protocol (read, acquire, claim, commit, release). The
// runtime hands the process one invocation at a time; Invoke serialises them anyway.
type Function[S any] struct {
	// Refresh re-loads after this long; 0: only after a failed invocation.
	Refresh time.Duration
	// Load loads the configuration and builds the state kept warm (the previous one, nil on the
	// first invocation, is the caller's to shut down).
	Load func(ctx context.Context, prev *S) (*config.Config, *S, error)
	// Log is the logger of an invocation refused before it claims anything (a configuration that
	// does not load, a deadline shorter than the reserves); state is nil when nothing loaded yet.
	Log func(state *S) *slog.Logger
	// Run runs one invocation with cfg, whose run.max_duration fits the invocation's deadline.
	Run func(ctx context.Context, state *S, cfg *config.Config) *job.Report
	// Finish sees every report before it becomes the result (print it, flush metrics), and
	// returns the report the result carries (scrubbed of secrets).
	Finish func(ctx context.Context, state *S, rep *job.Report) *job.Report
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu       sync.Mutex
	cfg      *config.Config
	state    *S
	loadedAt time.Time
	stale    bool
}

// Invoke is the handler: the payload (EventBridge Scheduler's input) is not used. ok, busy,
// fenced and budget_paused return the report; every other outcome is a function error
// (Result).
func (f *Function[S]) Invoke(ctx context.Context, _ json.RawMessage) (*job.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	refuse := func(err error) (*job.Report, error) {
		msg := "configuration is invalid"
		if errors.Is(err, ErrDeadlineTooShort) {
			msg = "refusing the invocation before claiming"
		}
		f.Log(f.state).Error(msg, "err", err)
		rep := &job.Report{Outcome: job.OutcomeConfig, Error: err.Error(), StartedAt: start.UTC(), Duration: job.Millis(now().Sub(start))}
		return f.finish(ctx, rep)
	}
	if f.cfg == nil || f.stale || (f.Refresh > 0 && now().Sub(f.loadedAt) >= f.Refresh) {
		cfg, state, err := f.Load(ctx, f.state)
		if err != nil {
			return refuse(err)
		}
		f.cfg, f.state, f.loadedAt, f.stale = cfg, state, now(), false
	}
	// The run measures max_duration from when it starts, after the load (S3, Secrets Manager,
	// SSM) above: the time left is counted from now, not from when the invocation began.
	deadline, _ := ctx.Deadline()
	d, err := RunDeadline(now(), deadline, f.cfg.Run.MaxDuration.D(), Reserves{
		Push: f.cfg.Run.PushTimeout.D(), Commit: f.cfg.Run.CommitTimeout.D(),
		Release: f.cfg.Run.ReleaseTimeout.D(), Margin: f.cfg.Run.Margin.D(),
	})
	if err != nil {
		return refuse(err)
	}
	run := *f.cfg
	run.Run.MaxDuration = config.Duration(d)
	return f.finish(ctx, f.Run(ctx, f.state, &run))
}

func (f *Function[S]) finish(ctx context.Context, rep *job.Report) (*job.Report, error) {
	rep = f.Finish(ctx, f.state, rep)
	if !Succeeded(rep.Outcome) {
		f.stale = true // an authentication failure may be a rotated secret
	}
	return Result(rep)
}
