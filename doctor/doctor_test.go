package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func static(id string, r Result, needs ...string) Check {
	return Check{ID: id, Title: "title of " + id, Needs: needs, Run: func(context.Context) Result { return r }}
}

func ids(rep *Report) string {
	var out []string
	for _, r := range rep.Results {
		out = append(out, r.ID+"="+string(r.Status))
	}
	return strings.Join(out, " ")
}

func TestRunOrdersByDependencyAndSkipsAfterFailure(t *testing.T) {
	checks := []Check{
		static("b", Pass("b ok"), "a"), // listed before what it needs
		static("a", Fail("fix a", "a broke")),
		static("c", Pass("c ok")),
		static("d", Pass("d ok"), "b"), // transitively blocked: b is skipped
		static("e", Warn("fix e", "e meh")),
		static("f", Pass("f ok"), "e", "c"), // WARN and PASS let it run
		static("g", Info("g fyi")),
		static("h", Pass("h ok"), "g"),
	}
	rep, err := Run(t.Context(), checks, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(rep), "a=FAIL b=SKIP c=PASS d=SKIP e=WARN f=PASS g=INFO h=PASS"; got != want {
		t.Fatalf("order and statuses\n got %s\nwant %s", got, want)
	}
	if b, _ := rep.Result("b"); !strings.Contains(b.Message, "needs a") {
		t.Errorf("skip reason %q does not name the failed prerequisite", b.Message)
	}
	if !rep.Failed() || rep.Count(StatusSkip) != 2 {
		t.Errorf("failed %v skips %d", rep.Failed(), rep.Count(StatusSkip))
	}
}

func TestRunRejectsBadGraphs(t *testing.T) {
	for name, checks := range map[string][]Check{
		"unknown need": {static("a", Pass(""), "nope")},
		"duplicate id": {static("a", Pass("")), static("a", Pass(""))},
		"cycle":        {static("a", Pass(""), "b"), static("b", Pass(""), "a")},
		"empty id":     {static("", Pass(""))},
	} {
		if _, err := Run(t.Context(), checks, Options{}); !errors.Is(err, ErrGraph) {
			t.Errorf("%s: err %v, want ErrGraph", name, err)
		}
	}
}

func TestRunRecoversPanicsAndTimesOut(t *testing.T) {
	checks := []Check{
		{ID: "boom", Title: "panics", Run: func(context.Context) Result { panic("kaboom") }},
		{ID: "slow", Title: "slow", Run: func(ctx context.Context) Result {
			<-ctx.Done()
			return Fail("", "gave up: %v", ctx.Err())
		}},
		{ID: "after", Title: "still runs", Run: func(context.Context) Result { return Pass("fine") }},
	}
	rep, err := Run(t.Context(), checks, Options{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	boom, _ := rep.Result("boom")
	if boom.Status != StatusFail || !strings.Contains(boom.Message, "kaboom") {
		t.Errorf("panic: %+v", boom)
	}
	slow, _ := rep.Result("slow")
	if slow.Status != StatusFail || !strings.Contains(slow.Fix, "did not finish within") {
		t.Errorf("timeout: %+v", slow)
	}
	if after, _ := rep.Result("after"); after.Status != StatusPass {
		t.Errorf("a check after a panic: %+v", after)
	}
}

func TestReportOutputs(t *testing.T) {
	rep, err := Run(t.Context(), []Check{
		static("x", Pass("all good").With("detail one")),
		static("y", Fail("do this", "broken\nacross lines")),
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PASS   x", "detail one", "FAIL   y", "broken across lines", "fix: do this", "2 checks: 1 PASS, 0 INFO, 0 WARN, 1 FAIL, 0 SKIP"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got jsonReport
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.OK || got.Summary["fail"] != 1 || got.Summary["pass"] != 1 || len(got.Results) != 2 || got.Results[1].Fix != "do this" {
		t.Errorf("json %+v", got)
	}
}

func TestPrefixed(t *testing.T) {
	p := Prefixed("job[a].", []Check{static("x", Pass("")), static("y", Pass(""), "x", "outside")})
	if p[0].ID != "job[a].x" || p[1].ID != "job[a].y" || p[1].Needs[0] != "job[a].x" || p[1].Needs[1] != "outside" {
		t.Fatalf("%+v", p)
	}
}

func TestBudgetWarnsAndListsWhatItCannotCheck(t *testing.T) {
	b := TimeBudget{MaxDuration: 3 * time.Minute, Push: 30 * time.Second, Commit: 15 * time.Second, Release: 2 * time.Second,
		Startup: 10 * time.Second, Margin: 5 * time.Second, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second,
		ClockSkew: 5 * time.Second}
	r := Budget(b).Run(t.Context())
	if r.Status != StatusPass || !strings.Contains(strings.Join(r.Details, "\n"), "not checked: the schedule period") {
		t.Fatalf("%+v", r)
	}
	b.SchedulePeriod = 2 * time.Minute
	if r := Budget(b).Run(t.Context()); r.Status != StatusWarn || !strings.Contains(r.Message, "max_duration") {
		t.Fatalf("max_duration above the period: %+v", r)
	}
}

func TestClockThresholds(t *testing.T) {
	src := func(off time.Duration) []ClockSource {
		return []ClockSource{{Name: "srv", Offset: func(context.Context) (time.Duration, bool, error) { return off, true, nil }},
			{Name: "mute", Offset: func(context.Context) (time.Duration, bool, error) { return 0, false, nil }}}
	}
	for _, c := range []struct {
		off  time.Duration
		want Status
	}{{2 * time.Second, StatusPass}, {-5 * time.Second, StatusWarn}, {7 * time.Second, StatusFail}} {
		if r := Clock(src(c.off), 5*time.Second).Run(t.Context()); r.Status != c.want {
			t.Errorf("offset %s: %s %q, want %s", c.off, r.Status, r.Message, c.want)
		}
	}
	if r := Clock(nil, time.Second).Run(t.Context()); r.Status != StatusSkip {
		t.Errorf("no sources: %+v", r)
	}
}
