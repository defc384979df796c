package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/sf2loki/sf2loki/config"
)

// TimeBudget holds the time-budget symbols of docs/fencing.md ("The time budget"): the
// configuration's (config.Config.Budget). Zero scheduler values (SchedulePeriod, Deadline,
// TerminationGrace) mean "not passed by the scheduler".
type TimeBudget = config.Budget

// Config returns the check that reports the configuration as loaded: PASS, or WARN with every
// piece of advice (warnings). A configuration that does not load never gets here: the CLI
// reports it as a FAIL of this check and exits 2.
func Config(source string, warnings []string) Check {
	return Check{ID: "config", Title: "configuration", Run: func(context.Context) Result {
		if len(warnings) > 0 {
			return Warn("see the lines above; each names the key to change",
				"%s is valid, with %d warning(s)", source, len(warnings)).With(warnings...)
		}
		return Pass("%s is valid", source)
	}}
}

// ConfigFailed is the result the CLI reports when the configuration does not load.
func ConfigFailed(err error) Result {
	r := Fail("fix the keys named above (sf2loki config check shows the same list)", "the configuration is invalid")
	r.ID, r.Title = "config", "configuration"
	r.Details = splitLines(err.Error())
	return r
}

// Budget returns the check of the time-budget invariants. The hard ones are already enforced
// when the configuration loads (a violation is a config error); this check shows the numbers,
// names the invariants it could not check because the scheduler did not pass its values, and
// warns about choices that cost ticks.
func Budget(b TimeBudget) Check {
	return Check{ID: "budget", Title: "time budget", Needs: []string{"config"}, Run: func(context.Context) Result {
		var details, warns []string
		ok := func(format string, a ...any) { details = append(details, "ok: "+fmt.Sprintf(format, a...)) }
		unknown := func(format string, a ...any) { details = append(details, "not checked: "+fmt.Sprintf(format, a...)) }
		intake := b.MaxDuration - (b.Push + b.Commit + b.Release)
		ok("intake window %s = max_duration %s - push %s - commit %s - release %s", intake, b.MaxDuration, b.Push, b.Commit, b.Release)
		if b.RenewInterval > 0 && b.LeaseDuration > 0 {
			if 3*b.RenewInterval <= b.LeaseDuration {
				ok("renew interval %s <= lease duration %s / 3", b.RenewInterval, b.LeaseDuration)
			} else {
				warns = append(warns, fmt.Sprintf("renew interval %s is above lease duration %s / 3: one slow renewal loses the lease", b.RenewInterval, b.LeaseDuration))
			}
		}
		if b.Deadline > 0 {
			need := b.Startup + b.AcquireWait + b.MaxDuration + b.Release + b.Margin
			ok("startup %s + acquire wait %s + max_duration %s + release %s + margin %s = %s <= deadline %s",
				b.Startup, b.AcquireWait, b.MaxDuration, b.Release, b.Margin, need, b.Deadline)
		} else {
			unknown("the scheduler deadline (run.deadline, a Job's activeDeadlineSeconds) was not given")
		}
		if b.TerminationGrace > 0 {
			ok("termination grace %s >= commit %s + release %s + margin %s", b.TerminationGrace, b.Commit, b.Release, b.Margin)
		} else {
			unknown("the termination grace (run.termination_grace) was not given")
		}
		if b.SchedulePeriod > 0 {
			need := b.LeaseDuration + b.ClockSkew + b.Startup
			ok("lease duration %s + clock skew %s + startup %s = %s < schedule period %s", b.LeaseDuration, b.ClockSkew, b.Startup, need, b.SchedulePeriod)
			if b.MaxDuration >= b.SchedulePeriod {
				warns = append(warns, fmt.Sprintf("max_duration %s is not below the schedule period %s: overlapping ticks will mostly end busy", b.MaxDuration, b.SchedulePeriod))
			}
		} else {
			unknown("the schedule period (run.schedule_period) was not given")
		}
		if len(warns) > 0 {
			return Warn("lower run.max_duration or lease.renew_interval, or lengthen the schedule",
				"%s", warns[0]).With(append(warns[1:], details...)...)
		}
		return Pass("intake window %s of max_duration %s; lease %s renewed every %s", intake, b.MaxDuration, b.LeaseDuration, b.RenewInterval).With(details...)
	}}
}

func splitLines(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '\n' })
}
