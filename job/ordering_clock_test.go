package job_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// TestHostClockAheadOfLokiKeepsFutureEntries: this host's clock (the job's and the Loki
// client's) runs ahead of Loki's by ahead; three records are dated 20 minutes in Loki's future,
// past its 10-minute creation grace period, so Loki refuses them as they are. The job must
// re-stamp them to a time Loki takes (their own time in event_time), not drop them: with the
// host 5 minutes ahead it does; with the host 15 minutes ahead (more than the grace period)
// its re-stamp target, the host's now, is itself in Loki's refused future and the retry, also
// stamped with the host's now, is refused again.
func TestHostClockAheadOfLokiKeepsFutureEntries(t *testing.T) {
	for _, ahead := range []time.Duration{5 * time.Minute, 15 * time.Minute} {
		t.Run(ahead.String(), func(t *testing.T) {
			srv, sink := receiver(t, simloki.Options{Now: func() time.Time { return time.Now().Add(-ahead) }})
			future := time.Now().Add(-ahead + 20*time.Minute)
			src := &sourcetest.Numbered{Totals: map[string]int{"Login": 3}, Stamp: func(string, int) time.Time { return future }}
			rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
			if n := len(srv.Entries()); n != 3 {
				t.Fatalf("host clock %s ahead of Loki: %d of 3 records dated 20m in Loki's future reached it (outcome %s %s, restamped %v, dropped %v, refused by Loki %d: %+v)",
					ahead, n, rep.Outcome, rep.Error, rep.Restamped, rep.Dropped, srv.RejectedCount(""), srv.Rejected())
			}
		})
	}
}

// skewedReceiver starts a strict simulated Loki whose clock runs ahead of this host's by ahead
// (negative: behind) with a maximum age of maxAge (0: Loki's default), and returns it with a
// client pushing to it whose limits match. noDate removes the Date header from its answers.
func skewedReceiver(t *testing.T, ahead, maxAge time.Duration, noDate bool) (*simloki.Server, *loki.Client) {
	t.Helper()
	srv := simloki.New(simloki.Options{Now: func() time.Time { return time.Now().Add(ahead) }, RejectOldSamplesMaxAge: maxAge})
	rt := srv.Transport()
	if noDate {
		rt = withoutDate{rt}
	}
	c, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: rt,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3, Limits: loki.Limits{MaxAge: maxAge}})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// withoutDate removes the Date header from every answer.
type withoutDate struct{ rt http.RoundTripper }

func (w withoutDate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.rt.RoundTrip(req)
	if resp != nil {
		resp.Header.Del("Date")
	}
	return resp, err
}

// TestHostClockBehindLokiKeepsOldEntries: this host's clock runs 15 minutes behind Loki's, and
// Loki keeps 10 minutes (reject_old_samples_max_age: 10m, configured alike). Records 30 minutes
// old in Loki's time are moved by the job, and records 12 minutes old (3 minutes in this host's
// future) are not; Loki refuses both as too old. The job must push them again at a time Loki
// takes, not at this host's now (15 minutes old for Loki, refused again) nor drop them. Records
// 20 minutes in Loki's future are moved to Loki's now once its clock is known (later pushes), a
// time 15 minutes in this host's future: the client must not refuse them as too new itself.
func TestHostClockBehindLokiKeepsOldEntries(t *testing.T) {
	const behind = 15 * time.Minute
	srv, sink := skewedReceiver(t, behind, 10*time.Minute, false)
	lokiNow := time.Now().Add(behind)
	stamp := func(k string, _ int) time.Time {
		switch k {
		case "Login":
			return lokiNow.Add(-30 * time.Minute)
		case "Logout":
			return lokiNow.Add(-12 * time.Minute)
		}
		return lokiNow.Add(20 * time.Minute)
	}
	src := &sourcetest.Numbered{Totals: map[string]int{"Login": 3, "Logout": 3, "Future": 6}, Stamp: stamp}
	opts := baseOptions()
	opts.Ordering.Limits.MaxAge = 10 * time.Minute
	opts.PushEntries = 4 // several pushes: the later ones know Loki's clock
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 {
		t.Fatalf("host clock %s behind Loki: %s %s, dropped %v (restamped %v, refused by Loki %d)", behind, rep.Outcome, rep.Error, rep.Dropped, rep.Restamped, srv.RejectedCount(""))
	}
	assertExactlyOnce(t, delivered(t, srv), src.Totals)
	ownTimesKept(t, srv, stamp)
}

// ownTimesKept checks that every entry the receiver holds is at its own time or carries it in
// event_time (moved either way).
func ownTimesKept(t *testing.T, srv *simloki.Server, stamp func(k string, n int) time.Time) {
	t.Helper()
	for _, e := range srv.Entries() {
		k, n, _ := sourcetest.ParseLine(e.Line)
		own := stamp(k, n)
		if et := e.MetadataValue(job.EventTimeMetadata); et != "" && et != own.UTC().Format(time.RFC3339Nano) || et == "" && !e.Timestamp.Equal(own) {
			t.Fatalf("%s #%d at %s with event_time %q, its own time is %s", k, n, e.Timestamp, et, own)
		}
	}
}

// TestNoDateHeaderKeepsTheHostClock: a receiver whose answers carry no Date header gives no
// estimate of its clock; the job decides on this host's clock, as it always did: with the
// clocks in step nothing is moved, and with this host 5 minutes ahead (inside the creation
// grace period) records dated 20 minutes in Loki's future still all reach it.
func TestNoDateHeaderKeepsTheHostClock(t *testing.T) {
	t.Run("in step", func(t *testing.T) {
		srv, sink := skewedReceiver(t, 0, 0, true)
		src := &sourcetest.Numbered{Totals: map[string]int{"Login": 3}, Base: time.Now().Add(-time.Minute)}
		rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
		if rep.Outcome != job.OutcomeOK || len(rep.Restamped) != 0 || len(rep.Dropped) != 0 {
			t.Fatalf("%s %s, restamped %v, dropped %v", rep.Outcome, rep.Error, rep.Restamped, rep.Dropped)
		}
		assertExactlyOnce(t, delivered(t, srv), src.Totals)
	})
	t.Run("host 5m ahead", func(t *testing.T) {
		const ahead = 5 * time.Minute
		srv, sink := skewedReceiver(t, -ahead, 0, true)
		future := time.Now().Add(-ahead + 20*time.Minute)
		src := &sourcetest.Numbered{Totals: map[string]int{"Login": 3}, Stamp: func(string, int) time.Time { return future }}
		rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
		if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 {
			t.Fatalf("%s %s, restamped %v, dropped %v", rep.Outcome, rep.Error, rep.Restamped, rep.Dropped)
		}
		assertExactlyOnce(t, delivered(t, srv), src.Totals)
	})
}

// TestClockSkewIsWarnedOncePerRun: when the receiver's clock is more than half the creation
// grace period away from this host's, the run says so once, however many pushes told it,
// naming sink.loki.creation_grace_period and the cure (synchronize this host's clock); with
// the clocks closer, it says nothing.
func TestClockSkewIsWarnedOncePerRun(t *testing.T) {
	for _, tc := range []struct {
		ahead time.Duration // the receiver's clock, from this host's
		warns int
	}{{-15 * time.Minute, 1}, {15 * time.Minute, 1}, {-6 * time.Minute, 1}, {-4 * time.Minute, 0}, {0, 0}} {
		t.Run(tc.ahead.String(), func(t *testing.T) {
			_, sink := skewedReceiver(t, tc.ahead, 0, false)
			var logs testenv.LockedBuffer
			opts := baseOptions()
			opts.Log = slog.New(slog.NewTextHandler(&logs, nil))
			opts.PushEntries = 2 // several pushes, each answered with the receiver's time
			src := &sourcetest.Numbered{Totals: map[string]int{"Login": 10}, Base: time.Now().Add(tc.ahead - time.Hour)}
			rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
			if rep.Outcome != job.OutcomeOK || rep.Pushes < 2 {
				t.Fatalf("%s %s after %d pushes", rep.Outcome, rep.Error, rep.Pushes)
			}
			warned := strings.Count(logs.String(), "sink.loki.creation_grace_period")
			if warned != tc.warns || (warned > 0 && !strings.Contains(logs.String(), "NTP")) {
				t.Fatalf("%d warnings naming sink.loki.creation_grace_period, want %d:\n%s", warned, tc.warns, logs.String())
			}
		})
	}
}

// shiftedDate moves the Date header of every answer by shift: a proxy in front of the receiver
// that stamps its own, wrong clock, or a stale answer.
type shiftedDate struct {
	rt    http.RoundTripper
	shift time.Duration
	first bool // only the first answer's
	n     int
}

func (s *shiftedDate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(req)
	s.n++
	if resp != nil && (!s.first || s.n == 1) {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			resp.Header.Set("Date", t.Add(s.shift).UTC().Format(http.TimeFormat))
		}
	}
	return resp, err
}

// TestAWrongDateHeaderLosesNothing: Loki and this host agree, but the Date header of the answers
// is 15 minutes behind (a proxy stamping its own clock), every answer's or only the first's.
// Taken as Loki's clock, it would make the records of a minute ago look 14 minutes in Loki's
// future and the job move them, or the client refuse them, although Loki accepts them as they
// are. Loki's acceptance of entries beyond that clock's grace period contradicts the header: no
// record may be dropped, and none moved.
func TestAWrongDateHeaderLosesNothing(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("first answer only %v", first), func(t *testing.T) {
			srv := simloki.New(simloki.Options{})
			sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: &shiftedDate{rt: srv.Transport(), shift: -15 * time.Minute, first: first},
				MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(-time.Minute)
			src := &sourcetest.Numbered{Totals: map[string]int{"Login": 10}, Stamp: func(string, int) time.Time { return at }}
			opts := baseOptions()
			opts.PushEntries = 2
			rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
			if n := len(srv.Entries()); n != 10 || len(rep.Dropped) != 0 || len(rep.Restamped) != 0 {
				t.Fatalf("%d of 10 records reached the receiver (outcome %s %s, restamped %v, dropped %v)", n, rep.Outcome, rep.Error, rep.Restamped, rep.Dropped)
			}
		})
	}
}
