package cli

import (
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// TestLimitsPollerRespectsItsIntervalAcrossRuns runs run-once four times against the simulated
// org with salesforce.limits.interval 1m: the org's call counter shows one /limits call for the
// first run, none for a second run right after it (the sample time came from the checkpoint
// document, not from the process), one again once the interval has passed on the job's clock,
// and none when the poller is off. The shipped sample reaches the receiver as one entry.
func TestLimitsPollerRespectsItsIntervalAcrossRuns(t *testing.T) {
	w := newSimWorld(t, 6)
	sources := "  soql:\n    enabled: true\n    objects:\n      - name: LoginHistory\n"
	limits := func(interval string) string {
		return "  limits:\n    interval: " + interval + "\n    ship: true\n"
	}
	cfgPath := w.config(t, limits("1m"), sources, "")
	calls := func() int { return w.org.CallCount(simsf.KindLimits) }

	rep, stderr := runOnce(t, cfgPath)
	if rep.Outcome != job.OutcomeOK || calls() != 1 || len(rep.Limits) != 1 || !rep.Limits[0].Shipped {
		t.Fatalf("first run: outcome %s, %d /limits calls, samples %+v\n%s", rep.Outcome, calls(), rep.Limits, stderr)
	}
	if rep, _ := runOnce(t, cfgPath); rep.Outcome != job.OutcomeOK || calls() != 1 || len(rep.Limits) != 0 {
		t.Fatalf("second run within the interval: outcome %s, %d /limits calls in total, samples %+v", rep.Outcome, calls(), rep.Limits)
	}
	testNow = func() time.Time { return time.Now().Add(61 * time.Second) }
	t.Cleanup(func() { testNow = nil })
	if rep, _ := runOnce(t, cfgPath); rep.Outcome != job.OutcomeOK || calls() != 2 || len(rep.Limits) != 1 {
		t.Fatalf("third run after the interval: outcome %s, %d /limits calls in total, samples %+v", rep.Outcome, calls(), rep.Limits)
	}
	testNow = func() time.Time { return time.Now().Add(10 * time.Minute) }
	cfgPath = w.config(t, "", sources, "")
	if rep, _ := runOnce(t, cfgPath); rep.Outcome != job.OutcomeOK || calls() != 2 || len(rep.Limits) != 0 {
		t.Fatalf("poller off: outcome %s, %d /limits calls in total", rep.Outcome, calls())
	}

	var samples int
	for _, s := range w.receiver.Streams() {
		if strings.Contains(s, `source="limits"`) && strings.Contains(s, `event_type="OrgLimits"`) && strings.Contains(s, `sf_org_id="00D`) {
			for _, e := range w.receiver.Stream(s) {
				samples++
				if !strings.Contains(e.Line, `"DailyApiRequests.Remaining":`) {
					t.Errorf("limits line lacks DailyApiRequests.Remaining: %s", e.Line)
				}
			}
		}
	}
	if samples != 2 {
		t.Errorf("%d limits entries at the receiver, want 2; streams %v", samples, w.receiver.Streams())
	}
}
