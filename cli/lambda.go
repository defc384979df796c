package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lambda"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/store"
)

// lambdaArgs makes the bare binary a Lambda bootstrap: with AWS_LAMBDA_RUNTIME_API set and no
// command given, it runs the lambda command.
func lambdaArgs(args []string) []string {
	if len(args) == 1 && lambda.Detect() {
		return append(args, "lambda")
	}
	return args
}

func lambdaCommand() *cli.Command {
	return &cli.Command{
		Name:  "lambda",
		Usage: "serve AWS Lambda invocations: one invocation = one run-once (the binary is a provided.al2023 bootstrap)",
		Description: "Runs when AWS_LAMBDA_RUNTIME_API is set (the bare binary does this by itself). The configuration\n" +
			"comes from --config (a file in the package or s3://bucket/key), else $" + lambda.ConfigYAMLEnv + ", plus\n" +
			"the SF2LOKI_* overrides; ${secretsmanager:...} and ${ssm:...} references are resolved once and again\n" +
			"after --refresh or a failed invocation. ok, busy and fenced return the run report; any other outcome is\n" +
			"a function error whose errorType is sf2loki.<outcome>.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "refresh", Value: 15 * time.Minute, EnvVars: []string{"SF2LOKI_LAMBDA_REFRESH"},
				Usage: "re-read the configuration and re-resolve its secret references after this long (0 = only after a failed invocation)"},
			&cli.StringFlag{Name: "job", EnvVars: []string{"SF2LOKI_JOB"}, Usage: "job group to run (jobs[].name)"},
		},
		Action: func(c *cli.Context) error {
			if !lambda.Detect() {
				return exitf(ExitConfig, "%s is not set: sf2loki lambda runs inside AWS Lambda or the Runtime Interface Emulator (use run-once elsewhere)", lambda.RuntimeAPIEnv)
			}
			fn := &lambdaFunction{c: c, refresh: c.Duration("refresh"), job: c.String("job"), now: time.Now}
			awslambda.StartWithOptions(fn.invoke, awslambda.WithContext(c.Context))
			return nil
		},
	}
}

// lambdaFunction is the process state of a Lambda execution environment. A warm environment
// keeps the configuration, the logger, the metrics and the clients (HTTP connection pools, the
// Salesforce token cache, the S3 client) across invocations; every invocation still reads the
// document, acquires, claims, commits and releases. The Lambda runtime hands the process one
// invocation at a time.
type lambdaFunction struct {
	c       *cli.Context
	refresh time.Duration
	job     string
	now     func() time.Time

	mu       sync.Mutex
	cfg      *config.Config
	log      *slog.Logger
	pm       *processMetrics
	warm     *warmClients
	loadedAt time.Time
	stale    bool // a failed invocation: re-resolve before the next one
}

// invoke is the Lambda handler. The payload (EventBridge Scheduler's input) is not used.
func (f *lambdaFunction) invoke(ctx context.Context, _ json.RawMessage) (*job.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := f.now()
	if err := f.ensureLoaded(ctx); err != nil {
		return f.finish(ctx, f.refusal(start, err.Error()))
	}
	deadline, _ := ctx.Deadline()
	d, err := lambda.RunDeadline(start, deadline, f.cfg.Run.MaxDuration.D(), lambda.Reserves{
		Push: f.cfg.Run.PushTimeout.D(), Commit: f.cfg.Run.CommitTimeout.D(),
		Release: f.cfg.Run.ReleaseTimeout.D(), Margin: f.cfg.Run.Margin.D(),
	})
	if err != nil {
		f.log.Error("refusing the invocation before claiming", "err", err)
		return f.finish(ctx, f.refusal(start, err.Error()))
	}
	run := *f.cfg
	run.Run.MaxDuration = config.Duration(d)
	rep := runInvocation(ctx, &run, f.log, invocationFlags{metrics: f.pm, warm: f.warm})
	return f.finish(ctx, rep)
}

// refusal is the report of an invocation that could not start: a configuration problem.
func (f *lambdaFunction) refusal(start time.Time, msg string) *job.Report {
	rep := &job.Report{Outcome: job.OutcomeConfig, Error: msg, StartedAt: start.UTC(), Duration: job.Millis(f.now().Sub(start))}
	rep.ExitCode = outcomeExit(rep.Outcome, false)
	return rep
}

// finish prints the run report, pushes the metrics before the environment can be frozen, and
// turns the report into the function's result.
func (f *lambdaFunction) finish(ctx context.Context, rep *job.Report) (*job.Report, error) {
	printReport(f.c.App.Writer, f.c.App.ErrWriter, rep)
	if f.pm != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.pm.timeout)
		if err := f.pm.m.Flush(fctx); err != nil {
			f.pm.log.Warn("metrics push failed", "err", err)
		}
		cancel()
	}
	if !lambda.Succeeded(rep.Outcome) {
		f.stale = true // an authentication failure may be a rotated secret
	}
	return lambda.Result(scrubReport(redactor(f.c), rep))
}

// scrubReport returns the report as the redactor prints it: the function's result (the report,
// or a function error carrying its error) leaves the process as the printed line does, so it
// must not carry a secret or a URL credential either. The JSON round trip scrubs every field,
// including ones added later.
func scrubReport(r *obs.Redactor, rep *job.Report) *job.Report {
	b, err := json.Marshal(rep)
	if err == nil {
		var out job.Report
		if err = json.Unmarshal([]byte(r.Scrub(string(b))), &out); err == nil {
			return &out
		}
	}
	// Not expected: keep what the result needs, scrubbed.
	return &job.Report{Outcome: rep.Outcome, ExitCode: rep.ExitCode, Error: r.Scrub(rep.Error),
		Invocation: rep.Invocation, StartedAt: rep.StartedAt, Duration: rep.Duration}
}

// ensureLoaded loads the configuration on the first invocation, after a failed one, and when
// the refresh period has passed, resolving its secret references.
func (f *lambdaFunction) ensureLoaded(ctx context.Context) error {
	if f.cfg != nil && !f.stale && (f.refresh <= 0 || f.now().Sub(f.loadedAt) < f.refresh) {
		return nil
	}
	cfg, log, resolved, err := f.load(ctx)
	if err != nil {
		if f.log == nil {
			f.log = slog.New(slog.NewJSONHandler(f.c.App.ErrWriter, nil)) // a report must still be written
		}
		f.log.Error("configuration is invalid", "err", err)
		return err
	}
	if f.pm != nil {
		f.pm.shutdown(ctx)
	}
	pm, err := newProcessMetrics(context.WithoutCancel(ctx), cfg.Metrics, log, false)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if f.cfg == nil {
		warnStartup(cfg, log)
	}
	log.Info("configuration loaded", "secret_references", resolved)
	f.cfg, f.log, f.pm, f.warm = cfg, log, pm, &warmClients{}
	f.loadedAt, f.stale = f.now(), false
	return nil
}

// load reads the configuration and builds a logger that redacts every secret, resolved
// ones included.
func (f *lambdaFunction) load(ctx context.Context) (*config.Config, *slog.Logger, int, error) {
	// Every secret reaches the redactor as soon as it is known, so a refusal that quotes one
	// prints it scrubbed.
	l, err := lambda.LoadConfig(ctx, globalString(f.c, "config"), f.job, func(s string) { redactor(f.c).Add(s) })
	if err != nil {
		return nil, nil, 0, err
	}
	level, format := l.Config.Log.Level, l.Config.Log.Format
	if v := globalString(f.c, "log-level"); v != "" {
		level = v
	}
	if v := globalString(f.c, "log-format"); v != "" {
		format = v
	}
	r := redactor(f.c)
	r.Add(l.Secrets...)
	log, err := obs.NewLogger(f.c.App.ErrWriter, obs.LogOptions{Level: level, Format: format, Redactor: r})
	if err != nil {
		return nil, nil, 0, err
	}
	if f.job != "" {
		log = log.With("job", f.job)
	}
	return l.Config, log, l.References, nil
}

// warmClients are the clients a Lambda execution environment keeps across warm invocations:
// the store backend (its S3 client), the Loki client and the Salesforce clients (connection
// pools and token caches), and the S3 client of the dead letters. The lease, the claim, the
// sources and the job are built afresh for every invocation. A nil *warmClients builds every
// client for one invocation (run-once, schedule).
type warmClients struct {
	st   *store.Store
	sink *loki.Client
	sf   map[string]*salesforce.Client // by the org's config path
	dead lambda.DeadLetters
}

func (w *warmClients) store(ctx context.Context, cfg *config.Config, log *slog.Logger) (*store.Store, error) {
	if w == nil {
		return buildStore(ctx, cfg, log)
	}
	if w.st == nil {
		st, err := buildStore(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		w.st = st
		return st, nil
	}
	return store.New(w.st.Backend(), store.Options{Logger: log, Now: testNow}), nil // this invocation's logger
}

func (w *warmClients) lokiClient(o loki.Options) (*loki.Client, error) {
	if w == nil {
		return loki.New(o)
	}
	if w.sink == nil {
		c, err := loki.New(o)
		if err != nil {
			return nil, err
		}
		w.sink = c
	}
	return w.sink, nil
}

func (w *warmClients) salesforceClient(key string, o salesforce.Options) (*salesforce.Client, error) {
	if w == nil {
		return salesforce.New(o)
	}
	if c, ok := w.sf[key]; ok {
		return c, nil
	}
	c, err := salesforce.New(o)
	if err != nil {
		return nil, err
	}
	if w.sf == nil {
		w.sf = map[string]*salesforce.Client{}
	}
	w.sf[key] = c
	return c, nil
}
