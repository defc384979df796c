package job_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// labelValues counts the label_value counters of the document, per label and day.
func labelValues(t *testing.T, coord *jobtest.Coordinator) map[string]int {
	t.Helper()
	snap, err := coord.Store.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for name, c := range snap.Doc.Counters {
		if rest, ok := strings.CutPrefix(name, job.LabelValueCounterPrefix); ok {
			label, _, _ := strings.Cut(rest, ":")
			out[label+"@"+c.Window]++
		}
	}
	return out
}

// 10 000 distinct values of a promoted label with a cap of 100 a day: the receiver holds 100
// values of the label plus the overflow value, every record is shipped (the overflowed ones
// with their own value in structured metadata), the report counts the overflow, and a run that
// takes over from one paused between push and commit counts no value twice.
func TestLabelGuardCapsValuesAcrossATakeover(t *testing.T) {
	const total, limit, push = 10_000, 100, 10
	coord := jobtest.New()
	srv := simloki.New(simloki.Options{})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3,
		Labels: loki.LabelOptions{ExtraAllowed: []string{"user_id"}}})
	if err != nil {
		t.Fatal(err)
	}
	src := &sourcetest.Numbered{Totals: map[string]int{"Login": total}, Base: time.Now().Add(-time.Hour),
		Labels: func(_ string, n int) []loki.Label {
			return []loki.Label{{Name: "user_id", Value: fmt.Sprintf("005%06d", n)}}
		}}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	opts := baseOptions()
	opts.PushEntries = push
	opts.MaxRecords = total
	opts.LabelGuard = job.LabelGuardOptions{Labels: []string{"user_id"}, MaxValuesPerDay: limit}
	day := time.Now().UTC().Format(time.DateOnly)

	// A is paused after its third push (two committed, the third not) while B takes over.
	var b *job.Report
	pushes := 0
	a := opts
	a.MaxRecords = 1000
	a.Hook = func(s job.Step) {
		if s == job.StepAfterPush {
			if pushes++; pushes == 3 {
				b = job.Run(context.Background(), deps, opts)
			}
		}
	}
	if rep := job.Run(context.Background(), deps, a); rep.Outcome != job.OutcomeFenced {
		t.Fatalf("A: outcome %s (%s), want fenced", rep.Outcome, rep.Error)
	}
	if b == nil || b.Outcome != job.OutcomeOK || !b.CaughtUp {
		t.Fatalf("B: %+v", b)
	}
	if got := labelValues(t, coord); len(got) != 1 || got["user_id@"+day] != limit {
		t.Errorf("document holds label values %v, want %d for user_id today", got, limit)
	}
	// B saw the 20 values A committed and admitted 80 more: 9 900 entries overflowed.
	if b.LabelOverflow["user_id"] != total-limit {
		t.Errorf("B reports %v overflowed, want user_id %d", b.LabelOverflow, total-limit)
	}

	values := map[string]bool{}
	seen := map[int]bool{}
	for _, e := range srv.Entries() {
		v := e.Label("user_id")
		values[v] = true
		n, err := strconv.Atoi(e.MetadataValue("n"))
		if err != nil {
			t.Fatal(err)
		}
		seen[n] = true
		if v == job.DefaultOverflowValue && e.MetadataValue("user_id"+job.OriginalMetadataSuffix) != fmt.Sprintf("005%06d", n) {
			t.Fatalf("overflowed entry %d keeps %q as its own value", n, e.MetadataValue("user_id"+job.OriginalMetadataSuffix))
		}
	}
	if len(values) != limit+1 || !values[job.DefaultOverflowValue] {
		t.Errorf("the receiver holds %d user_id values, want %d plus the overflow value", len(values), limit)
	}
	if len(seen) != total {
		t.Errorf("%d of %d records shipped", len(seen), total)
	}

	// The same day, new values all overflow: the cap holds across runs.
	src.SetTotal("Login", total+50)
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK || rep.Records != 50 || rep.LabelOverflow["user_id"] != 50 {
		t.Errorf("next run: %s, %d records, overflow %v; want 50 shipped, all overflowed", rep.Outcome, rep.Records, rep.LabelOverflow)
	}
	if got := labelValues(t, coord); got["user_id@"+day] != limit {
		t.Errorf("document holds %v after the next run", got)
	}
}

// userIDLogins is a job over 30 Login rows whose user_id label is userID(n), pushing to a
// receiver that takes user_id as a label.
func userIDLogins(t *testing.T, userID func(n int) string) (*jobtest.Coordinator, *sourcetest.Numbered, job.Deps) {
	t.Helper()
	coord := jobtest.New()
	srv := simloki.New(simloki.Options{})
	sink, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
		Labels: loki.LabelOptions{ExtraAllowed: []string{"user_id"}}})
	if err != nil {
		t.Fatal(err)
	}
	src := &sourcetest.Numbered{Totals: map[string]int{"Login": 30}, Base: time.Now().Add(-time.Hour),
		Labels: func(_ string, n int) []loki.Label { return []loki.Label{{Name: "user_id", Value: userID(n)}} }}
	return coord, src, job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
}

// The cap is per UTC day: the next day every value counts again, and the previous day's
// values leave the document.
func TestLabelGuardStartsOverEachDay(t *testing.T) {
	coord, src, deps := userIDLogins(t, strconv.Itoa)
	now := time.Now().UTC()
	opts := baseOptions()
	opts.Now = func() time.Time { return now }
	opts.LabelGuard = job.LabelGuardOptions{Labels: []string{"user_id"}, MaxValuesPerDay: 10, Overflow: "other"}
	if rep := job.Run(context.Background(), deps, opts); rep.LabelOverflow["user_id"] != 20 {
		t.Fatalf("first day: overflow %v, want 20", rep.LabelOverflow)
	}
	now = now.Add(24 * time.Hour)
	src.SetTotal("Login", 45)
	if rep := job.Run(context.Background(), deps, opts); rep.Records != 15 || rep.LabelOverflow["user_id"] != 5 {
		t.Fatalf("next day: %d records, overflow %v; want 15 records, 10 new values admitted and 5 overflowed", rep.Records, rep.LabelOverflow)
	}
	if got := labelValues(t, coord); len(got) != 1 || got["user_id@"+now.Format(time.DateOnly)] != 10 {
		t.Errorf("document holds %v, want only the new day's 10 values", got)
	}
}

// A guarded label mostly takes the same values every day (the same users, the same event
// types). The next UTC day, a value seen yesterday is admitted again under the same counter
// name: the commit sets that counter with today's window instead of also deleting it, so the
// day's commits land and the cursor advances.
func TestLabelGuardAdmitsYesterdaysValuesAgain(t *testing.T) {
	coord, src, deps := userIDLogins(t, func(n int) string { return strconv.Itoa(n % 3) })
	now := time.Now().UTC()
	opts := baseOptions()
	opts.Now = func() time.Time { return now }
	opts.LabelGuard = job.LabelGuardOptions{Labels: []string{"user_id"}, MaxValuesPerDay: 10}
	if rep := job.Run(context.Background(), deps, opts); rep.Outcome != job.OutcomeOK || rep.Records != 30 {
		t.Fatalf("first day: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
	}
	now = now.Add(24 * time.Hour)
	for i, total := range []int{45, 60} { // the run that sees the new day, then one that reads its counters
		src.SetTotal("Login", total)
		rep := job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeOK || rep.Records != 15 || rep.Commits == 0 {
			t.Fatalf("next day, run %d: outcome %s, %d records, %d commits, error %q; want ok with 15 records committed",
				i+1, rep.Outcome, rep.Records, rep.Commits, rep.Error)
		}
	}
	if cp := checkpoints(t, coord); cp["Login"] != 60 {
		t.Errorf("stored cursor %d, want 60", cp["Login"])
	}
	if got := labelValues(t, coord); len(got) != 1 || got["user_id@"+now.Format(time.DateOnly)] != 3 {
		t.Errorf("document holds label values %v, want the 3 values under today's day only", got)
	}
}
