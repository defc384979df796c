package job_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
)

// TestLimitsPollerSamplesAtMostOncePerIntervalAcrossRuns: runs of one job share the sample time
// through the checkpoint document: the first run calls /limits, runs within the interval do not
// (the simulated org's call counter says so), the first run after it does again. A failed call
// still spends the interval (no second call within it), and each sample is shipped as one entry.
func TestLimitsPollerSamplesAtMostOncePerIntervalAcrossRuns(t *testing.T) {
	clk := sftest.NewClock(time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Second))
	org := sftest.Start(t, simsf.Options{Now: clk.Now})
	client := org.Client(t, func(o *salesforce.Options) { o.MaxAttempts = 1 })
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	poll := job.LimitsPoll{Org: "prod", Interval: time.Hour, Client: client,
		Entry: func(_ context.Context, at time.Time, l map[string]salesforce.Limit) (loki.Entry, error) {
			return loki.Entry{Labels: loki.NewLabels(loki.Label{Name: "source", Value: "limits"}), Timestamp: at,
				Line: "DailyApiRequests remaining " + strconv.FormatInt(l["DailyApiRequests"].Remaining, 10)}, nil
		}}
	run := func() *job.Report {
		t.Helper()
		opts := baseOptions()
		opts.Now = clk.Now
		rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Sink: sink, Limits: []job.LimitsPoll{poll},
			Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 1})}}}, opts)
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("run: %s: %s", rep.Outcome, rep.Error)
		}
		return rep
	}
	calls := func() int { return org.CallCount(simsf.KindLimits) }

	rep := run()
	if calls() != 1 || len(rep.Limits) != 1 || rep.Limits[0].Org != "prod" || !rep.Limits[0].Shipped ||
		rep.Limits[0].Limits["DailyApiRequests"].Max == 0 {
		t.Fatalf("first run: %d calls, report %+v; want one shipped sample", calls(), rep.Limits)
	}
	snap, err := coord.Store.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := snap.Doc.Counters[job.LimitsCounter+":prod"]; c.Value != clk.Now().Unix() {
		t.Errorf("stored sample time %d, want %d", c.Value, clk.Now().Unix())
	}

	clk.Advance(59 * time.Minute)
	if rep := run(); calls() != 1 || len(rep.Limits) != 0 {
		t.Fatalf("within the interval: %d calls in total, report %+v; want no second call", calls(), rep.Limits)
	}

	clk.Advance(time.Minute)
	org.FailNext(simsf.KindLimits, 1, http.StatusForbidden)
	if rep := run(); calls() != 2 || len(rep.Limits) != 1 || rep.Limits[0].Error == "" || rep.Limits[0].Shipped {
		t.Fatalf("after the interval, failing: %d calls, report %+v; want one failed call", calls(), rep.Limits)
	}
	clk.Advance(30 * time.Minute)
	if run(); calls() != 2 {
		t.Fatalf("a failed sample must still spend its interval: %d calls", calls())
	}
	clk.Advance(31 * time.Minute)
	if rep := run(); calls() != 3 || !rep.Limits[0].Shipped {
		t.Fatalf("next interval: %d calls, report %+v", calls(), rep.Limits)
	}
	n := 0
	for _, e := range srv.Entries() {
		if strings.HasPrefix(e.Line, "DailyApiRequests") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d limits entries at the receiver, want the 2 successful samples", n)
	}
}

// TestLimitsSamplesGoToTheOrgsDestination: with two orgs, one bound to its own receiver and one
// on the default one, each org's limits sample lands at its org's receiver, once, and not at
// the other; both are reported shipped.
func TestLimitsSamplesGoToTheOrgsDestination(t *testing.T) {
	org := sftest.Start(t, simsf.Options{})
	client := org.Client(t, func(o *salesforce.Options) { o.MaxAttempts = 1 })
	defSrv, defSink := receiver(t, simloki.Options{})
	euSrv, euSink := receiver(t, simloki.Options{})
	eu := &job.Destination{Name: "eu", Sink: euSink}
	poll := func(name string) job.LimitsPoll {
		return job.LimitsPoll{Org: name, Interval: time.Hour, Client: client,
			Entry: func(_ context.Context, at time.Time, _ map[string]salesforce.Limit) (loki.Entry, error) {
				return loki.Entry{Labels: loki.NewLabels(loki.Label{Name: "source", Value: job.LimitsSource}, loki.Label{Name: "org", Value: name}),
					Timestamp: at, Line: "limits of " + name}, nil
			}}
	}
	deps := job.Deps{Coordinator: jobtest.New(), Sink: defSink, Limits: []job.LimitsPoll{poll("us"), poll("eu")},
		Bindings: []job.Binding{
			{Org: "us", Source: numbered(map[string]int{"a": 3})},
			{Org: "eu", Source: numbered(map[string]int{"b": 2}), Destination: eu},
		}}
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("run: %s: %s", rep.Outcome, rep.Error)
	}
	if len(rep.Limits) != 2 || !rep.Limits[0].Shipped || !rep.Limits[1].Shipped {
		t.Fatalf("report %+v; want both samples shipped", rep.Limits)
	}
	limitsAt := func(srv *simloki.Server) map[string]int {
		out := map[string]int{}
		for _, e := range srv.Entries() {
			if org, ok := strings.CutPrefix(e.Line, "limits of "); ok {
				out[org]++
			}
		}
		return out
	}
	if got := limitsAt(euSrv); len(got) != 1 || got["eu"] != 1 {
		t.Errorf("limits samples at the eu org's receiver: %v, want eu's only, once", got)
	}
	if got := limitsAt(defSrv); len(got) != 1 || got["us"] != 1 {
		t.Errorf("limits samples at the default receiver: %v, want us's only, once", got)
	}
}
