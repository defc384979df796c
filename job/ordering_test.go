package job_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// hourly returns a source whose key k yields, for each hour offset in hours[k] in turn, 60
// records one minute apart starting at base + offset hours (a late file for an older hour is
// an offset below one already shipped), with the first shipped[k] hours available.
func hourly(base time.Time, hours map[string][]int, shipped map[string]int) *sourcetest.Numbered {
	totals := map[string]int{}
	for k, hs := range hours {
		totals[k] = 60 * len(hs)
		if n, ok := shipped[k]; ok {
			totals[k] = 60 * n
		}
	}
	return &sourcetest.Numbered{Totals: totals, Stamp: func(k string, n int) time.Time {
		i := n - 1
		return base.Add(time.Duration(hours[k][i/60])*time.Hour + time.Duration(i%60)*time.Minute)
	}}
}

// eventTimes checks that every entry the receiver holds is at its own time, or carries its own
// time in event_time and was moved forward; it returns how many were moved.
func eventTimes(t *testing.T, srv *simloki.Server, stamp func(k string, n int) time.Time) int {
	t.Helper()
	moved := 0
	for _, e := range srv.Entries() {
		k, n, _ := sourcetest.ParseLine(e.Line)
		own := stamp(k, n)
		et := e.MetadataValue(job.EventTimeMetadata)
		switch {
		case et == "" && !e.Timestamp.Equal(own):
			t.Fatalf("%s #%d at %s without event_time, its own time is %s", k, n, e.Timestamp, own)
		case et != "":
			if et != own.UTC().Format(time.RFC3339Nano) || !e.Timestamp.After(own) {
				t.Fatalf("%s #%d at %s with event_time %q, its own time is %s", k, n, e.Timestamp, et, own)
			}
			moved++
		}
	}
	return moved
}

// TestLateHoursAfterNewerOnesReachTheReceiver: hours 0-3 of a stream are shipped, then in a
// later run late files for hours 3, 2 and then 0 (an older hour after a newer one: the
// case a separate "late" stream alone cannot take, since it has its own head). Against Loki's
// default limits every record arrives exactly once and nothing is refused: the late rows more
// than the window behind the stream's head, known from the checkpoint document, are shipped at
// the head with their own time in event_time.
func TestLateHoursAfterNewerOnesReachTheReceiver(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	srv, sink := receiver(t, simloki.Options{})
	coord := jobtest.New()
	src := hourly(base, map[string][]int{"Login": {0, 1, 2, 3, 3, 2, 0}}, map[string]int{"Login": 4})
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	if rep := job.Run(context.Background(), deps, baseOptions()); rep.Outcome != job.OutcomeOK {
		t.Fatalf("live run: %s %s", rep.Outcome, rep.Error)
	}
	heads := headCounters(t, coord)
	stream := `{event_type="Login", job="sf2loki", source="numbered"}`
	if want := base.Add(3*time.Hour + 59*time.Minute).UnixNano(); heads[stream] != want {
		t.Fatalf("document heads %v, want %s at %d", heads, stream, want)
	}

	// The late files appear; the next run (a new process: it knows the head from the
	// document only) ships them.
	src.SetTotal("Login", 420)
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 180 {
		t.Fatalf("late run: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
	}
	if n := srv.RejectedCount(""); n != 0 {
		t.Fatalf("the receiver refused %d entries (%+v)", n, srv.Rejected()[0])
	}
	// The late rows of hour 3 more than 45 minutes behind the head (3:59) move, as do all of
	// hours 2 and 0; 3:14 to 3:59 keep their time.
	moved := eventTimes(t, srv, src.Stamp)
	if rep.Restamped["too_far_behind"] != int64(moved) || moved != 14+60+60 {
		t.Fatalf("restamped %v, %d entries carry event_time; want 134", rep.Restamped, moved)
	}
	assertExactlyOnce(t, delivered(t, srv), map[string]int{"Login": 420})
}

// headCounters returns the stream heads stored in the document, by stream id.
func headCounters(t *testing.T, coord *jobtest.Coordinator) map[string]int64 {
	t.Helper()
	snap, err := coord.Store.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for name, c := range snap.Doc.Counters {
		if id, ok := strings.CutPrefix(name, job.HeadCounterPrefix); ok {
			out[id] = c.Value
		}
	}
	return out
}

// crashedRunHead pushes what a run that crashed before its commit pushed: an entry of the
// numbered source's Login stream (its row 0) at at, which the receiver then holds as a head
// the job does not know.
func crashedRunHead(t *testing.T, srv *simloki.Server, at time.Time) {
	t.Helper()
	other, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	labels := loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}, loki.Label{Name: "source", Value: "numbered"}, loki.Label{Name: "event_type", Value: "Login"})
	if res := other.Push(context.Background(), []loki.Entry{{Timestamp: at, Labels: labels, Line: `{"key":"Login","n":0}`}}); !res.OK() {
		t.Fatal(res.Err)
	}
}

// TestAnUnknownNewerHeadCostsARequestNotAnEntry: the receiver holds a newer entry than the
// job committed (a push whose commit was lost in a crash, a head forgotten beyond the bound):
// the late rows are refused too_far_behind, pushed again stamped with the clock, and none is
// lost or dropped.
func TestAnUnknownNewerHeadCostsARequestNotAnEntry(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	srv, sink := receiver(t, simloki.Options{})
	crashedRunHead(t, srv, base.Add(4*time.Hour))
	src := hourly(base, map[string][]int{"Login": {0, 1}}, nil)
	totals := src.Totals
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 {
		t.Fatalf("%s %s, dropped %v", rep.Outcome, rep.Error, rep.Dropped)
	}
	// Every refused entry (counted once however often the splits sent it) was pushed again.
	refused := map[string]bool{}
	for _, r := range srv.Rejected() {
		if r.Reason != "too_far_behind" {
			t.Fatalf("refused %+v", r)
		}
		refused[r.Line] = true
	}
	if len(refused) == 0 || rep.Restamped["too_far_behind"] != int64(len(refused)) {
		t.Fatalf("receiver refused %d entries, report restamped %v: want every refusal pushed again", len(refused), rep.Restamped)
	}
	t.Logf("%d entries refused for an unknown head: %d requests in all, %d entries re-sent", len(refused), len(srv.Requests()), rep.Resent)
	got := delivered(t, srv)
	delete(got["Login"], 0)
	assertExactlyOnce(t, got, totals)
	eventTimes(t, srv, func(k string, n int) time.Time {
		if n == 0 {
			return base.Add(4 * time.Hour)
		}
		return src.Stamp(k, n)
	})
}

// TestAnUnknownNewerHeadLosesNothingBesideAnotherStream: as
// TestAnUnknownNewerHeadCostsARequestNotAnEntry, but the push also carries another stream
// (Logout) that sorts after the one whose head the job does not know (Login). Loki's ingester
// answers a request for its last stream only: the Login rows it refuses as too_far_behind are
// answered 204 together with the Logout rows. Every row must still reach the receiver.
func TestAnUnknownNewerHeadLosesNothingBesideAnotherStream(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	srv, sink := receiver(t, simloki.Options{})
	crashedRunHead(t, srv, base.Add(4*time.Hour))
	src := hourly(base, map[string][]int{"Login": {0, 1}, "Logout": {0, 1}}, nil)
	totals := src.Totals
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 {
		t.Fatalf("%s %s, dropped %v", rep.Outcome, rep.Error, rep.Dropped)
	}
	t.Logf("receiver refused %d entries (too_far_behind %d), report restamped %v, %d requests", srv.RejectedCount(""), srv.RejectedCount("too_far_behind"), rep.Restamped, len(srv.Requests()))
	got := delivered(t, srv)
	delete(got["Login"], 0)
	assertExactlyOnce(t, got, totals)
}

// TestAStricterMaxAgeCostsARequestNotAnEntry: the receiver's max age (3 days) is stricter than
// configured (Loki's default, 7 days). A key catching up ships, in one push, rows from 3 d 1 h to
// 3 d − 4 h ago: the receiver refuses the oldest hour as too old and stores the rest, so its
// stream head is now hours above the age cutoff it states. The refused rows are pushed again at
// a stamp inside both the cutoff and the window behind that head (the head itself), and none is
// dropped. (The splits of the first request also send again rows it stored; those refused as too
// far behind the second time are pushed again re-stamped, and the receiver holds them twice: a
// duplicate, never a loss.)
func TestAStricterMaxAgeCostsARequestNotAnEntry(t *testing.T) {
	now := time.Now()
	start := now.Add(-3*24*time.Hour - time.Hour)
	const n = 300 // one a minute: 5 hours
	stamp := func(_ string, i int) time.Time { return start.Add(time.Duration(i-1) * time.Minute) }
	srv, sink := receiver(t, simloki.Options{RejectOldSamplesMaxAge: 3 * 24 * time.Hour})
	src := &sourcetest.Numbered{Totals: map[string]int{"a": n}, Stamp: stamp}
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 {
		t.Fatalf("%s %s, dropped %v (restamped %v): entries lost although the receiver only had a stricter max age",
			rep.Outcome, rep.Error, rep.Dropped, rep.Restamped)
	}
	if rep.Restamped["greater_than_max_sample_age"] == 0 {
		t.Fatalf("restamped %v; want the rows the receiver refused as too old pushed again", rep.Restamped)
	}
	got := delivered(t, srv)["a"]
	head := stamp("a", n)
	for _, e := range srv.Entries() {
		if _, i, _ := sourcetest.ParseLine(e.Line); stamp("a", i).Before(now.Add(-3*24*time.Hour)) && e.Timestamp.Before(head) {
			t.Fatalf("#%d, too old for the receiver, is held at %s, behind the head %s it was pushed again after", i, e.Timestamp, head)
		}
	}
	for i := 1; i <= n; i++ {
		if got[i] == 0 {
			t.Fatalf("#%d never reached the receiver", i)
		}
	}
	eventTimes(t, srv, stamp)
}

// TestAHeadCoversOnlyWhatTheReceiverMayHold: a stream's head is the newest entry pushed that
// the receiver may have stored, accepted or sent without an answer. Destination b fails every
// push of a run while destination a accepts, and a's cursors are committed with the heads. When
// b answers (a 401: a rotated credential) it stored nothing, and no head of b's is committed:
// the next run ships b's rows at their own time, none moved onto a stream that holds nothing.
// When b's answers are lost, it may hold the rows, and b's head is their newest.
func TestAHeadCoversOnlyWhatTheReceiverMayHold(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-4 * time.Hour)
	stamp := func(_ string, i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	for _, tc := range []struct {
		name     string
		fail     func(*simloki.Running)
		wantHead bool
	}{
		{"answered 401", func(srv *simloki.Running) { srv.FailNext(1000, http.StatusUnauthorized, "") }, false},
		{"answer lost", func(srv *simloki.Running) { srv.DropResponses(1000) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sinkA := receiver(t, simloki.Options{})
			srvB := simloki.Start(t, simloki.Options{})
			sinkB, err := loki.New(loki.Options{URL: srvB.PushURL(), MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			tc.fail(srvB)
			srcA := &sourcetest.Numbered{SourceName: "a", Totals: map[string]int{"a": 10}, Stamp: stamp}
			srcB := &sourcetest.Numbered{SourceName: "b", Totals: map[string]int{"b": 120}, Stamp: stamp}
			coord := jobtest.New()
			deps := job.Deps{Coordinator: coord, Sink: sinkA,
				Bindings: []job.Binding{{Source: srcA}, {Source: srcB, Destination: &job.Destination{Name: "tenant-b", Sink: sinkB}}}}
			if rep := job.Run(context.Background(), deps, baseOptions()); len(rep.Frozen) != 1 || checkpoints(t, coord)["a"] != 10 {
				t.Fatalf("setup: %s (%s), frozen %v, cursors %v; want b frozen and a committed", rep.Outcome, rep.Error, rep.Frozen, checkpoints(t, coord))
			}
			stream := `tenant-b|{event_type="b", job="sf2loki", source="b"}`
			head, ok := headCounters(t, coord)[stream]
			if tc.wantHead != ok || (ok && head != stamp("b", 120).UnixNano()) {
				t.Fatalf("b's head committed %v at %s; want committed %v at its newest row, %s",
					ok, time.Unix(0, head).UTC(), tc.wantHead, stamp("b", 120).UTC())
			}
			if tc.wantHead {
				return
			}
			srvB.ClearFaults() // the credential is fixed
			rep := job.Run(context.Background(), deps, baseOptions())
			if rep.Outcome != job.OutcomeOK || len(rep.Restamped) != 0 || srvB.Count() != 120 {
				t.Fatalf("second run: %s %s, restamped %v, b holds %d; want b's 120 rows at their own time",
					rep.Outcome, rep.Error, rep.Restamped, srvB.Count())
			}
		})
	}
}

// sameLines is a source whose rows all have the same line (shaping kept none of the columns
// that tell them apart); the structured metadata field n still numbers them.
type sameLines struct{ *sourcetest.Numbered }

func (s sameLines) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	ss, err := s.Numbered.Open(ctx, req)
	for i := range ss {
		ss[i] = sameLinesStream{ss[i]}
	}
	return ss, err
}

type sameLinesStream struct{ source.Stream }

func (s sameLinesStream) Next(ctx context.Context, rec *source.Record) error {
	err := s.Stream.Next(ctx, rec)
	if err == nil && !rec.Skip {
		rec.Entry.Line = sameLine
	}
	return err
}

const sameLine = `{"event_type":"Login"}`

// TestMovedRowsWithTheSameLineAllReachTheReceiver: Loki keeps one of two entries of a stream
// with the same timestamp and line, whatever their structured metadata. Rows whose lines are
// alike, moved to one timestamp, would be one entry at the receiver, or none when the entry at
// the stream's head has that line too. Every entry the job moves takes a timestamp of its own in
// its stream, whether it moves before the push (behind the head) or when it is pushed again
// after a refusal the heads did not predict (a newer entry the job did not commit).
func TestMovedRowsWithTheSameLineAllReachTheReceiver(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	labels := loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}, loki.Label{Name: "source", Value: "numbered"}, loki.Label{Name: "event_type", Value: "Login"})
	cases := []struct {
		name  string
		hours []int
		setup func(t *testing.T, srv *simloki.Server, deps job.Deps, src *sourcetest.Numbered) // before the run that moves
		moved int
	}{
		{"behind the head", []int{3, 0}, func(t *testing.T, _ *simloki.Server, deps job.Deps, src *sourcetest.Numbered) {
			src.SetTotal("Login", 60) // hour 3 is shipped first: its last row, at the head, has the same line
			if rep := job.Run(context.Background(), deps, baseOptions()); rep.Outcome != job.OutcomeOK {
				t.Fatalf("first run: %s %s", rep.Outcome, rep.Error)
			}
			src.SetTotal("Login", 120)
		}, 60},
		{"pushed again", []int{0, 1}, func(t *testing.T, srv *simloki.Server, _ job.Deps, _ *sourcetest.Numbered) {
			other, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport()})
			if err != nil {
				t.Fatal(err)
			}
			e := loki.Entry{Timestamp: base.Add(4 * time.Hour), Labels: labels, Line: sameLine, Metadata: []loki.Label{{Name: "n", Value: "0"}}}
			if res := other.Push(context.Background(), []loki.Entry{e}); !res.OK() {
				t.Fatal(res.Err)
			}
		}, 120},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, sink := receiver(t, simloki.Options{})
			src := hourly(base, map[string][]int{"Login": tc.hours}, nil)
			deps := job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: sameLines{src}}}, Sink: sink}
			tc.setup(t, srv, deps, src)
			rep := job.Run(context.Background(), deps, baseOptions())
			if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 || rep.Restamped["too_far_behind"] != int64(tc.moved) {
				t.Fatalf("%s %s, dropped %v, restamped %v; want %d moved", rep.Outcome, rep.Error, rep.Dropped, rep.Restamped, tc.moved)
			}
			rows := map[string]int{}
			for _, e := range srv.Entries() {
				rows[e.MetadataValue("n")]++
			}
			for n := 1; n <= 120; n++ {
				if c := rows[strconv.Itoa(n)]; c != 1 {
					t.Fatalf("row %d is held %d times, want once (the receiver skipped %d entries as duplicates of one with the same timestamp and line)",
						n, c, len(srv.Duplicates()))
				}
			}
		})
	}
}

// TestStreamHeadsAreBounded: the document keeps at most MaxStreamHeads heads, the newest.
func TestStreamHeadsAreBounded(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	_, sink := receiver(t, simloki.Options{})
	coord := jobtest.New()
	src := hourly(base, map[string][]int{"a": {0}, "b": {1}, "c": {2}, "d": {3}, "e": {4}}, nil)
	opts := baseOptions()
	opts.Ordering.MaxStreamHeads = 3
	if rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts); rep.Outcome != job.OutcomeOK {
		t.Fatalf("%s %s", rep.Outcome, rep.Error)
	}
	heads := headCounters(t, coord)
	if len(heads) != 3 {
		t.Fatalf("%d heads stored, want 3: %v", len(heads), heads)
	}
	for id := range heads {
		if !strings.Contains(id, `"c"`) && !strings.Contains(id, `"d"`) && !strings.Contains(id, `"e"`) {
			t.Fatalf("kept %s; want the three newest heads", id)
		}
	}
}

// TestRejectLateDropsUnderLokisReason: with the RejectLate policy, the late rows never reach
// the receiver: they are dropped under too_far_behind, counted, and written to the dead letter.
func TestRejectLateDropsUnderLokisReason(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	srv, sink := receiver(t, simloki.Options{})
	src := hourly(base, map[string][]int{"Login": {3, 0}}, nil)
	var dl bytes.Buffer
	opts := baseOptions()
	opts.Ordering.Policy, opts.DeadLetter, opts.PushEntries = job.RejectLate, &dl, 60
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomeOK || rep.Dropped["too_far_behind"] != 60 || len(rep.Restamped) != 0 {
		t.Fatalf("%s %s, dropped %v, restamped %v", rep.Outcome, rep.Error, rep.Dropped, rep.Restamped)
	}
	if srv.Count() != 60 || srv.RejectedCount("") != 0 {
		t.Fatalf("receiver holds %d and refused %d; want hour 3's 60 and no refusal", srv.Count(), srv.RejectedCount(""))
	}
	lines := 0
	for sc := bufio.NewScanner(&dl); sc.Scan(); lines++ {
		var v struct{ Reason string }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil || v.Reason != "too_far_behind" {
			t.Fatalf("dead letter %s (%v)", sc.Text(), err)
		}
	}
	if lines != 60 {
		t.Fatalf("%d dead letters, want 60", lines)
	}
}

// TestOneEntryOlderThanMaxAge: one entry among 2 000 is older than the receiver's max age.
// Loki never sees it as it is: by default it is shipped re-stamped with its own time in
// event_time; on a receiver without structured metadata it is dropped under
// greater_than_max_sample_age. Either way the push takes no extra request and makes no
// duplicate.
func TestOneEntryOlderThanMaxAge(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	const n, old = 2000, 777
	stamp := func(_ string, i int) time.Time {
		if i == old {
			return base.Add(-8 * 24 * time.Hour)
		}
		return base.Add(time.Duration(i) * time.Millisecond)
	}
	run := func(t *testing.T, stamp func(string, int) time.Time, noMetadata bool) (*simloki.Server, *job.Report) {
		srv := simloki.New(simloki.Options{DisallowStructuredMetadata: noMetadata})
		lim := loki.Limits{DisallowStructuredMetadata: noMetadata}
		sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(), Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		src := &sourcetest.Numbered{Totals: map[string]int{"a": n}, Stamp: stamp, NoMetadata: noMetadata}
		opts := baseOptions()
		opts.Ordering.Limits = lim
		deps := job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}
		rep := job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("%s %s", rep.Outcome, rep.Error)
		}
		return srv, rep
	}
	young := func(_ string, i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
	for _, noMetadata := range []bool{false, true} {
		name := map[bool]string{false: "restamped", true: "dropped without structured metadata"}[noMetadata]
		t.Run(name, func(t *testing.T) {
			baseline, _ := run(t, young, noMetadata)
			srv, rep := run(t, stamp, noMetadata)
			if got, want := len(srv.Requests()), len(baseline.Requests()); got != want {
				t.Fatalf("%d requests, %d for %d entries without the old one", got, want, n)
			}
			if srv.RejectedCount("") != 0 || len(srv.Duplicates()) != 0 || rep.Resent != 0 {
				t.Fatalf("receiver refused %d, saw %d duplicates; %d re-sent", srv.RejectedCount(""), len(srv.Duplicates()), rep.Resent)
			}
			got := delivered(t, srv)
			if noMetadata {
				if rep.Dropped["greater_than_max_sample_age"] != 1 || srv.Count() != n-1 || got["a"][old] != 0 {
					t.Fatalf("dropped %v, receiver holds %d", rep.Dropped, srv.Count())
				}
				return
			}
			assertExactlyOnce(t, got, map[string]int{"a": n})
			if rep.Restamped["greater_than_max_sample_age"] != 1 || eventTimes(t, srv, stamp) != 1 {
				t.Fatalf("restamped %v", rep.Restamped)
			}
		})
	}
}

// TestACutLinePushedAgainCountsOnce: a line cut by the line cap whose entry the receiver refuses
// for its timestamp (it holds a newer entry the job never committed) is pushed again,
// re-stamped: the run report counts the cut once per line, not once per push that carried it.
func TestACutLinePushedAgainCountsOnce(t *testing.T) {
	base := time.Now().Truncate(time.Hour).Add(-6 * time.Hour)
	srv := simloki.New(simloki.Options{})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3, MaxLineBytes: 12})
	if err != nil {
		t.Fatal(err)
	}
	crashedRunHead(t, srv, base.Add(4*time.Hour))
	src := hourly(base, map[string][]int{"Login": {0, 1}}, nil)
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomeOK || len(rep.Dropped) != 0 || rep.Restamped["too_far_behind"] == 0 {
		t.Fatalf("%s %s, dropped %v, restamped %v; want entries refused for their timestamp pushed again", rep.Outcome, rep.Error, rep.Dropped, rep.Restamped)
	}
	if rep.Truncated != rep.Records {
		t.Fatalf("report: %d lines truncated, %d records shipped (every line is cut, %d of them pushed twice); want each cut line counted once",
			rep.Truncated, rep.Records, rep.Restamped["too_far_behind"])
	}
}
