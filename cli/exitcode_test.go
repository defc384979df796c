package cli

import (
	"testing"

	"github.com/sf2loki/sf2loki/job"
)

func TestOutcomeExitTable(t *testing.T) {
	cases := []struct {
		o      job.Outcome
		strict bool
		want   int
	}{
		{job.OutcomeOK, false, 0}, {job.OutcomeDryRun, false, 0}, {job.OutcomeBudgetPaused, false, 0},
		{job.OutcomeBusy, false, 0}, {job.OutcomeBusy, true, 5},
		{job.OutcomeFenced, false, 0}, {job.OutcomeFenced, true, 6},
		{job.OutcomeInternal, false, 1}, {job.OutcomeConfig, false, 2}, {job.OutcomeUnavailable, false, 3},
		{job.OutcomePartial, false, 4}, {job.OutcomeIntegrity, false, 7}, {job.OutcomeIntegrity, true, 7},
		{job.Outcome("something new"), false, 1},
	}
	for _, c := range cases {
		if got := outcomeExit(c.o, c.strict); got != c.want {
			t.Errorf("outcomeExit(%s, strict=%v) = %d, want %d", c.o, c.strict, got, c.want)
		}
	}
}
