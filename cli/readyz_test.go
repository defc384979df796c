package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sf2loki/sf2loki/job"
)

// TestReadyzTurnsUnreadyAfterFailedTicks: with schedule.unready_after 3, /readyz stays 200
// through two failed ticks, answers 503 after the third failure in a row (naming the job) and 200
// again after one good tick; busy and fenced ticks neither count nor end the series; a panicking
// tick counts as failed. With unready_after 0 it never turns unready.
func TestReadyzTurnsUnreadyAfterFailedTicks(t *testing.T) {
	outcomes := []job.Outcome{}
	run := func(context.Context) *job.Report {
		o := outcomes[0]
		outcomes = outcomes[1:]
		if o == "panic" {
			panic("boom")
		}
		return &job.Report{Outcome: o}
	}
	newSched := func(unreadyAfter int) (*scheduler, scheduledJob) {
		cfg := scheduleConfig("@every 1m")
		cfg.Schedule.Jitter, cfg.Schedule.UnreadyAfter = 0, unreadyAfter
		j := scheduledJob{Name: "elf", Spec: "@every 1m", Run: run}
		s, err := newScheduler(cfg, slog.New(slog.DiscardHandler), []scheduledJob{j})
		if err != nil {
			t.Fatal(err)
		}
		s.ctx, s.started = context.Background(), true
		return s, j
	}
	// tick runs one tick synchronously the way cron does (a panic is recovered by cron.Recover).
	tick := func(s *scheduler, j scheduledJob, o job.Outcome) {
		outcomes = append(outcomes, o)
		func() {
			defer func() { _ = recover() }()
			s.tick(j, s.ticks[j.Name])
		}()
	}
	readyz := func(s *scheduler) (int, map[string]any) {
		rec := httptest.NewRecorder()
		s.handler(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("/readyz body %q: %v", rec.Body.String(), err)
		}
		return rec.Code, body
	}

	s, j := newSched(3)
	steps := []struct {
		outcome job.Outcome
		want    int
	}{
		{job.OutcomeOK, 200},
		{job.OutcomeUnavailable, 200},
		{job.OutcomeBusy, 200}, // another replica shipped: neither a failure nor a success
		{job.OutcomePartial, 200},
		{"panic", 503}, // the third failure in a row
		{job.OutcomeFenced, 503},
		{job.OutcomeIntegrity, 503},
		{job.OutcomeOK, 200},
		{job.OutcomeConfig, 200},
	}
	for i, st := range steps {
		tick(s, j, st.outcome)
		if code, body := readyz(s); code != st.want {
			t.Fatalf("after tick %d (%s): /readyz %d %v, want %d", i+1, st.outcome, code, body, st.want)
		} else if code == 503 && body["failing"].(map[string]any)["elf"] == nil {
			t.Errorf("503 body does not name the failing job: %v", body)
		}
	}
	if ok, _ := s.health(s.ticks["elf"].LastEnd); !ok {
		t.Error("/healthz must not depend on failed ticks: the process is alive")
	}

	s, j = newSched(0)
	for range 5 {
		tick(s, j, job.OutcomeUnavailable)
	}
	if code, body := readyz(s); code != 200 {
		t.Errorf("unready_after 0: /readyz %d %v after 5 failed ticks, want 200", code, body)
	}
}
