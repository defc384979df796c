package cli

import (
	"errors"
	"fmt"

	"github.com/sf2loki/sf2loki/job"
)

// Exit codes: the one table (docs/fencing.md, "What each outcome means"). Every outcome maps to a
// code here and nowhere else; errors become outcomes in job.OutcomeOf.
const (
	ExitOK          = 0 // ok, nothing new, budget_paused, dry_run; busy and fenced unless --strict-exit-codes
	ExitInternal    = 1 // internal error
	ExitConfig      = 2 // config or usage error, RBAC forbidden, document fenced by another lease name; never retried
	ExitUnavailable = 3 // nothing shipped: Salesforce, Loki, store or lease API unavailable
	ExitPartial     = 4 // something shipped, then the run ended early; duplicates possible next run
	ExitBusy        = 5 // busy, under --strict-exit-codes
	ExitFenced      = 6 // fenced, under --strict-exit-codes
	ExitIntegrity   = 7 // needs a human: corrupt document, ignored precondition, same-epoch foreign writer, replay id lost
)

// Doctor has its own codes: 0 every check PASS/WARN/INFO/SKIP, ExitDoctorFail any FAIL, ExitConfig a
// configuration error.
const ExitDoctorFail = 1

// ExitError carries an exit code and the error that caused it.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitf returns an ExitError with a formatted message.
func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// exitCode maps an error returned by a command to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitInternal
}

// failed reports whether a run with this outcome failed: its exit code without strict codes is
// not 0 (busy and fenced are normal events of a scheduled job).
func failed(o job.Outcome) bool { return outcomeExit(o, false) != ExitOK }

// outcomeExit is the exit code of a run outcome. busy and fenced are normal events
// of a scheduled job and exit 0 unless strict exit codes are asked for.
func outcomeExit(o job.Outcome, strict bool) int {
	//exhaustive:enforce
	switch o {
	case job.OutcomeOK, job.OutcomeBudgetPaused, job.OutcomeDryRun:
		return ExitOK
	case job.OutcomeBusy:
		if strict {
			return ExitBusy
		}
		return ExitOK
	case job.OutcomeFenced:
		if strict {
			return ExitFenced
		}
		return ExitOK
	case job.OutcomeUnavailable:
		return ExitUnavailable
	case job.OutcomePartial:
		return ExitPartial
	case job.OutcomeIntegrity:
		return ExitIntegrity
	case job.OutcomeConfig:
		return ExitConfig
	case job.OutcomeInternal:
		return ExitInternal
	}
	return ExitInternal // an outcome this table does not know: a bug
}
