package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/sourcetest"
	"github.com/sf2loki/sf2loki/store"
)

func numbered(totals map[string]int) *sourcetest.Numbered {
	return &sourcetest.Numbered{Totals: totals, Base: time.Now().Add(-time.Hour)}
}

func TestRunShipsEverythingAndCommits(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	totals := map[string]int{"a": 2500, "b": 10, "c": 1}
	src := numbered(totals)
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}

	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || !rep.CaughtUp {
		t.Fatalf("outcome %s caught_up %v (%s)", rep.Outcome, rep.CaughtUp, rep.Error)
	}
	if rep.Records != 2511 || rep.Epoch != 1 {
		t.Errorf("records %d epoch %d, want 2511 and 1", rep.Records, rep.Epoch)
	}
	if got := checkpoints(t, coord); got["a"] != 2500 || got["b"] != 10 || got["c"] != 1 {
		t.Errorf("stored cursors %v", got)
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
	if !strings.Contains(strings.Join(rep.Notes, " "), "did not exist") {
		t.Errorf("a first run on an absent document should say sources start from lookback: %v", rep.Notes)
	}

	// Nothing new: ok, one claim, nothing pushed, nothing committed.
	rep = job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 0 || rep.Commits != 0 || rep.Epoch != 2 {
		t.Fatalf("no-op run: %+v", rep)
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
}

func TestBudgetAcrossRunsIsFairAndExactlyOnce(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	totals := map[string]int{"big": 5000, "small-1": 300, "small-2": 300}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(totals)}}, Sink: sink}
	opts := baseOptions()
	opts.MaxRecords, opts.Quantum, opts.PushEntries = 700, 100, 250

	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK || rep.CaughtUp || rep.Records != 700 {
		t.Fatalf("first run: outcome %s caught_up %v records %d", rep.Outcome, rep.CaughtUp, rep.Records)
	}
	// Round-robin: the large key cannot starve the small ones.
	cp := checkpoints(t, coord)
	if cp["small-1"] < 200 || cp["small-2"] < 200 {
		t.Errorf("small keys starved by the large one: %v", cp)
	}
	for i := 0; i < 20 && !rep.CaughtUp; i++ {
		rep = job.Run(context.Background(), deps, opts)
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("run %d: %s %s", i, rep.Outcome, rep.Error)
		}
	}
	if !rep.CaughtUp {
		t.Fatal("never caught up")
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
}

func TestRetryableFailureFreezesKeysAndCommitsThePrefix(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	totals := map[string]int{"a": 1000}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(totals)}}, Sink: sink}
	opts := baseOptions()
	opts.PushEntries = 100

	// The receiver is down for every push after the third.
	hooks := 0
	opts.Hook = func(s job.Step) {
		if s == job.StepAfterPush {
			hooks++
			if hooks == 3 {
				srv.FailNext(1000, 503, "")
			}
		}
	}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomePartial {
		t.Fatalf("outcome %s, want partial (%s)", rep.Outcome, rep.Error)
	}
	if got := checkpoints(t, coord)["a"]; got != 300 {
		t.Errorf("committed cursor %d, want 300 (three successful pushes of 100)", got)
	}
	if len(rep.Frozen) != 1 || rep.Frozen[0].Key != "a" {
		t.Errorf("frozen = %+v", rep.Frozen)
	}
	srv.ClearFaults()
	opts.Hook = nil
	rep = job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("recovery run: %s %s", rep.Outcome, rep.Error)
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
}

func TestReceiverDownShipsNothingAndIsUnavailable(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	srv.FailNext(1000, 500, "")
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 50})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeUnavailable || rep.Records != 0 {
		t.Fatalf("outcome %s records %d, want unavailable and 0", rep.Outcome, rep.Records)
	}
	if cp := checkpoints(t, coord); cp["a"] != 0 {
		t.Errorf("a cursor was committed although nothing was delivered: %v", cp)
	}
}

func TestPermanentRejectDropAdvancesAndDeadLetters(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.MetadataValue("n") == "5" }, "entry too old")
	totals := map[string]int{"a": 10, "b": 10}
	var dlq bytes.Buffer
	opts := baseOptions()
	opts.DeadLetter = &dlq
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(totals)}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Error)
	}
	if rep.Dropped["bad_request"] != 2 {
		t.Errorf("dropped = %v, want 2 bad_request", rep.Dropped)
	}
	if cp := checkpoints(t, coord); cp["a"] != 10 || cp["b"] != 10 {
		t.Errorf("cursors %v, want both keys past the dropped entry", cp)
	}
	lines := strings.Split(strings.TrimSpace(dlq.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("dead letter has %d lines, want 2:\n%s", len(lines), dlq.String())
	}
	var dl map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &dl); err != nil || dl["reason"] != "bad_request" || !strings.Contains(dl["line"].(string), `"n":5`) {
		t.Errorf("dead letter line %s (%v)", lines[0], err)
	}
	got := delivered(t, srv)
	if got["a"][5] != 0 || got["a"][6] != 1 || len(got["a"]) != 9 {
		t.Errorf("delivered for a: %v", got["a"])
	}
}

func TestPermanentRejectFreezeStopsTheKeyAndNamesTheRecord(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.Label("event_type") == "a" && e.MetadataValue("n") == "5" }, "entry too old")
	opts := baseOptions()
	opts.OnPermanentReject = job.RejectFreeze
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10, "b": 10})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomePartial {
		t.Fatalf("outcome %s, want partial", rep.Outcome)
	}
	if cp := checkpoints(t, coord); cp["a"] != 4 || cp["b"] != 10 {
		t.Errorf("cursors %v, want a stopped at 4 and b at 10", cp)
	}
	if len(rep.Frozen) != 1 || rep.Frozen[0].Key != "a" || !strings.Contains(rep.Frozen[0].Line, `"n":5`) || !strings.Contains(rep.Frozen[0].Reason, "rejected") {
		t.Errorf("frozen = %+v", rep.Frozen)
	}
}

func TestSourceErrorStopsOnlyItsKey(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 100, "b": 100})
	src.FailAt = map[string]int{"a": 41}
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomePartial || len(rep.Errors) != 1 {
		t.Fatalf("outcome %s errors %v, want partial with one error", rep.Outcome, rep.Errors)
	}
	if cp := checkpoints(t, coord); cp["a"] != 40 || cp["b"] != 100 {
		t.Errorf("cursors %v, want a at 40 and b complete", cp)
	}
}

func TestFencedCommitStopsAndLeavesTheNewerClaimIntact(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 1000})}}, Sink: sink}
	opts := baseOptions()
	opts.PushEntries = 100
	claimed := false
	opts.Hook = func(s job.Step) {
		if s == job.StepAfterPush && !claimed {
			claimed = true
			// Another invocation claims the document with a higher epoch.
			sess, err := coord.Begin(context.Background(), "newer")
			if err != nil {
				t.Errorf("newer claim: %v", err)
				return
			}
			if err := sess.Commit(context.Background(), store.Change{Set: map[string]json.RawMessage{"other": sourcetest.EncodeCursor(7)}}); err != nil {
				t.Errorf("newer commit: %v", err)
			}
		}
	}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeFenced {
		t.Fatalf("outcome %s, want fenced (%s)", rep.Outcome, rep.Error)
	}
	cp := checkpoints(t, coord)
	if cp["a"] != 0 || cp["other"] != 7 {
		t.Errorf("stored cursors %v: the fenced run must not have written, the newer one must survive", cp)
	}
}

func TestSignalEndsPartialWithThePushedPrefixCommitted(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 100000})
	src.Delay = 50 * time.Microsecond
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	opts := baseOptions()
	opts.PushEntries = 200
	ctx, cancel := context.WithCancel(context.Background())
	pushes := 0
	opts.Hook = func(s job.Step) {
		if s == job.StepAfterCommit {
			pushes++
			if pushes == 2 {
				cancel() // SIGTERM
			}
		}
	}
	rep := job.Run(ctx, deps, opts)
	if rep.Outcome != job.OutcomePartial {
		t.Fatalf("outcome %s, want partial", rep.Outcome)
	}
	committed := checkpoints(t, coord)["a"]
	if committed < 400 {
		t.Errorf("committed %d, want at least the two pushes before the signal", committed)
	}
	got := delivered(t, srv)
	for n := 1; n <= committed; n++ {
		if got["a"][n] != 1 {
			t.Fatalf("committed record %d delivered %d times", n, got["a"][n])
		}
	}
}

func TestLeaseLossStopsIntakeAndStillCommits(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	src := numbered(map[string]int{"a": 100000})
	src.Delay = 20 * time.Microsecond
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	opts := baseOptions()
	opts.PushEntries = 100
	opts.Hook = func(s job.Step) {
		if s == job.StepAfterCommit {
			loseLease(coord, lease.ErrLost)
		}
	}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomePartial || rep.Error == "" {
		t.Fatalf("outcome %s (%s), want partial after losing the lease", rep.Outcome, rep.Error)
	}
	if checkpoints(t, coord)["a"] < 100 {
		t.Error("the first push was not committed")
	}
}

func TestStoreErrorsMapToOutcomes(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 1})}}, Sink: sink}
	coord.Memory.Put([]byte("{not json"))
	if rep := job.Run(context.Background(), deps, baseOptions()); rep.Outcome != job.OutcomeIntegrity || !strings.Contains(rep.Error, "corrupt") {
		t.Errorf("corrupt document: outcome %s (%s), want integrity", rep.Outcome, rep.Error)
	}
}

func TestDryRunWritesEntriesAndCommitsNothing(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	var out bytes.Buffer
	opts := baseOptions()
	opts.DryRun, opts.DryRunOut, opts.MaxRecords = true, &out, 5
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 100})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeDryRun || rep.Records != 5 {
		t.Fatalf("outcome %s records %d", rep.Outcome, rep.Records)
	}
	if n := strings.Count(out.String(), "\n"); n != 5 {
		t.Errorf("dry run printed %d lines, want 5", n)
	}
	if srv.Count() != 0 || len(checkpoints(t, coord)) != 0 {
		t.Error("dry run pushed or committed")
	}
}

func TestNeedsHumanSourceErrorIsIntegrity(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	src := &failingOpen{err: fmt.Errorf("replay id expired: %w", source.ErrNeedsHuman)}
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, baseOptions())
	if rep.Outcome != job.OutcomeIntegrity || !strings.Contains(rep.Error, "replay id expired") {
		t.Fatalf("outcome %s (%s), want integrity naming the cause", rep.Outcome, rep.Error)
	}
}

type failingOpen struct{ err error }

func (f *failingOpen) Name() string            { return "failing" }
func (f *failingOpen) Calls() map[string]int64 { return nil }
func (f *failingOpen) CursorTime(string, json.RawMessage) (time.Time, error) {
	return time.Time{}, nil
}
func (f *failingOpen) Open(context.Context, source.OpenRequest) ([]source.Stream, error) {
	return nil, f.err
}

func TestLeaseLossBeforeShippingNamesTheCause(t *testing.T) {
	cases := []struct {
		name  string
		cause error
		want  job.Outcome
	}{
		{"taken over", fmt.Errorf("%w: another holder has it", lease.ErrLost), job.OutcomeFenced},
		{"renewals failing", fmt.Errorf("%w: %w: epoch 3", lease.ErrLost, lease.ErrExpired), job.OutcomeUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			coord := jobtest.New()
			_, sink := receiver(t, simloki.Options{})
			src := numbered(map[string]int{"a": 100})
			opts := baseOptions()
			opts.Hook = func(s job.Step) {
				if s == job.StepAfterClaim {
					loseLease(coord, tc.cause)
				}
			}
			rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
			if rep.Records != 0 {
				t.Errorf("the run shipped %d records after its lease was lost", rep.Records)
			}
			if rep.Outcome != tc.want || !strings.Contains(rep.Error, "lease lost") {
				t.Errorf("outcome %s (%s), want %s", rep.Outcome, rep.Error, tc.want)
			}
		})
	}
}
