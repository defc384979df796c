package lambda

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"

	"github.com/sf2loki/sf2loki/job"
)

// RuntimeAPIEnv is set by the Lambda service (and the Runtime Interface Emulator) in the
// environment of a function's bootstrap.
const RuntimeAPIEnv = "AWS_LAMBDA_RUNTIME_API"

// Detect reports whether the process runs as a Lambda function's bootstrap.
func Detect() bool { return os.Getenv(RuntimeAPIEnv) != "" }

// ErrorTypePrefix starts the errorType of every function error sf2loki returns; the outcome
// follows, e.g. "sf2loki.partial".
const ErrorTypePrefix = "sf2loki."

// Succeeded reports whether an outcome is a successful Lambda invocation. ok, busy (another
// invocation holds the lease) and fenced (a newer one superseded this one) are normal ends of a
// scheduled run, and so are budget_paused and dry_run, which exit 0 from the command line too;
// anything else is a function error, so that Lambda sends it to the on-failure destination.
func Succeeded(o job.Outcome) bool {
	//exhaustive:enforce
	switch o {
	case job.OutcomeOK, job.OutcomeBusy, job.OutcomeFenced, job.OutcomeBudgetPaused, job.OutcomeDryRun:
		return true
	case job.OutcomeUnavailable, job.OutcomePartial, job.OutcomeIntegrity, job.OutcomeConfig, job.OutcomeInternal:
		return false
	}
	return false
}

// ErrorType is the Lambda errorType of a failed outcome.
func ErrorType(o job.Outcome) string { return ErrorTypePrefix + string(o) }

// Result turns a run report into the function's result: the report itself on success, and
// otherwise a function error whose errorType names the outcome and whose message carries the
// report's error. aws-lambda-go returns an error of type messages.InvokeResponse_Error unchanged.
func Result(rep *job.Report) (*job.Report, error) {
	if Succeeded(rep.Outcome) {
		return rep, nil
	}
	msg := fmt.Sprintf("outcome %s (exit %d)", rep.Outcome, rep.ExitCode)
	if rep.Error != "" {
		msg += ": " + rep.Error
	}
	return nil, messages.InvokeResponse_Error{Type: ErrorType(rep.Outcome), Message: msg}
}

// ErrDeadlineTooShort is returned by RunDeadline when the invocation's remaining time cannot hold
// the push, commit and release reserves: the function's timeout is too short for the
// configuration, so the run must refuse before it claims anything.
var ErrDeadlineTooShort = errors.New("the invocation's deadline is shorter than the reserves")

// Reserves are the parts of a run's time budget that must fit after intake stops.
type Reserves struct {
	Push, Commit, Release time.Duration
	// Margin is kept between the run's own deadline and the invocation's hard one.
	Margin time.Duration
}

// Total is the time the run needs after intake: push, commit and release.
func (r Reserves) Total() time.Duration { return r.Push + r.Commit + r.Release }

// RunDeadline returns the run's maximum duration for an invocation that must end by deadline:
// the configured maximum, shortened to the remaining time minus the margin. When that leaves no
// intake window beyond the reserves it returns ErrDeadlineTooShort.
func RunDeadline(now, deadline time.Time, configured time.Duration, r Reserves) (time.Duration, error) {
	d := configured
	if !deadline.IsZero() {
		d = min(d, deadline.Sub(now)-r.Margin)
	}
	if d <= r.Total() {
		return 0, fmt.Errorf("%w: %s left (the invocation ends at %s, less the margin %s), but push, commit and release need %s; raise the function's timeout or lower run.push_timeout, run.commit_timeout and run.release_timeout",
			ErrDeadlineTooShort, max(0, d).Round(time.Millisecond), deadline.UTC().Format(time.RFC3339Nano), r.Margin, r.Total())
	}
	return d, nil
}
