package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lambda"
	"github.com/sf2loki/sf2loki/obs"
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
			if n := lambda.Procs(os.LookupEnv); n > 0 {
				runtime.GOMAXPROCS(n)
			}
			fn := lambdaFunction(c, c.Duration("refresh"), c.String("job"))
			awslambda.StartWithOptions(fn.Invoke, awslambda.WithContext(c.Context))
			return nil
		},
	}
}

// lambdaState is what a warm Lambda execution environment keeps across invocations besides
// the configuration: the logger, the metrics and the clients (HTTP connection pools, the
// Salesforce token cache, the S3 client).
type lambdaState struct {
	log  *slog.Logger
	pm   *obs.Metrics
	warm *lambda.Warm
}

// lambdaFunction is the Lambda handler: lambda.Function with run-once's invocation.
func lambdaFunction(c *cli.Context, refresh time.Duration, jobName string) *lambda.Function[lambdaState] {
	return &lambda.Function[lambdaState]{
		Refresh: refresh,
		Load: func(ctx context.Context, prev *lambdaState) (*config.Config, *lambdaState, error) {
			return loadLambda(ctx, c, jobName, prev)
		},
		Log: func(st *lambdaState) *slog.Logger {
			if st != nil {
				return st.log
			}
			return slog.New(slog.NewJSONHandler(c.App.ErrWriter, nil)) // a refusal is logged all the same
		},
		Run: func(ctx context.Context, st *lambdaState, cfg *config.Config) *job.Report {
			return runInvocation(ctx, cfg, st.log, invocationFlags{metrics: st.pm, warm: st.warm})
		},
		Finish: func(ctx context.Context, st *lambdaState, rep *job.Report) *job.Report {
			if rep.ExitCode == ExitOK {
				rep.ExitCode = outcomeExit(rep.Outcome, false) // a refusal's
			}
			printReport(c.App.Writer, c.App.ErrWriter, rep)
			if st != nil {
				st.pm.Push(ctx) // before the environment can be frozen
			}
			return scrubReport(redactor(c), rep)
		},
	}
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

// loadLambda reads the configuration, resolving its secret references, and builds the state
// kept warm; prev (nil on the first load) is shut down once the new one stands.
func loadLambda(ctx context.Context, c *cli.Context, jobName string, prev *lambdaState) (*config.Config, *lambdaState, error) {
	// Every secret reaches the redactor as soon as it is known, so a refusal that quotes one
	// prints it scrubbed.
	r := redactor(c)
	l, err := lambda.LoadConfig(ctx, globalString(c, "config"), jobName, func(s string) { r.Add(s) })
	if err != nil {
		return nil, nil, err
	}
	r.Add(l.Secrets...)
	log, _, err := newLogger(c, l.Config)
	if err != nil {
		return nil, nil, err
	}
	if jobName != "" {
		log = log.With("job", jobName)
	}
	if prev != nil {
		prev.pm.Close(ctx)
	}
	pm, err := newProcessMetrics(context.WithoutCancel(ctx), l.Config.Metrics, log, false)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	if prev == nil {
		warnStartup(l.Config, log)
	}
	log.Info("configuration loaded", "secret_references", l.References)
	return l.Config, &lambdaState{log: log, pm: pm, warm: &lambda.Warm{}}, nil
}
