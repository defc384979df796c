package job_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// TestDeadLetterSourceReplaysAFile: two dead letters and a damaged line. The damaged line is
// skipped (counted), the entry re-stamped before it was dropped goes out at its own time again
// (the job decides anew), and a second replay of the same file ships nothing.
func TestDeadLetterSourceReplaysAFile(t *testing.T) {
	own := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond)
	lines := []string{
		`{"time":"2026-06-30T12:00:00Z","key":"eventlogfile:Login","reason":"line_too_long","status":400,"timestamp":"` + own.Format(time.RFC3339Nano) + `","labels":"{event_type=\"Login\", job=\"sf2loki\"}","metadata":{"user_id":"005"},"line":"one"}`,
		`not a dead letter`,
		`{"time":"2026-06-30T12:00:00Z","key":"eventlogfile:Login","reason":"disallowed_structured_metadata","status":400,"timestamp":"` + own.Add(time.Hour).Format(time.RFC3339Nano) + `","labels":"{event_type=\"Login\", job=\"sf2loki\"}","metadata":{"event_time":"` + own.Add(time.Second).Format(time.RFC3339Nano) + `"},"line":"two"}`,
	}
	_, srv, deps := deadLetterReplay(t, []byte(strings.Join(lines, "\n")+"\n"))
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 2 || rep.Events["deadletter.unreadable_dead_letter"] != 1 {
		t.Fatalf("%s %s: %d records, events %v", rep.Outcome, rep.Error, rep.Records, rep.Events)
	}
	es := srv.Entries()
	if len(es) != 2 || !es[0].Timestamp.Equal(own) || es[0].MetadataValue("user_id") != "005" ||
		!es[1].Timestamp.Equal(own.Add(time.Second)) || es[1].MetadataValue(job.EventTimeMetadata) != "" {
		t.Fatalf("replayed %+v", es)
	}
	if rep := job.Run(context.Background(), deps, baseOptions()); rep.Outcome != job.OutcomeOK || rep.Records != 0 || srv.Count() != 2 {
		t.Fatalf("second replay: %s, %d records", rep.Outcome, rep.Records)
	}
}

// A replay binds the default destination's source first, then one per other destination, each
// knowing every destination replayed at once.
func TestReplayBindingsOnePerDestination(t *testing.T) {
	a, b := &job.Destination{Name: "a"}, &job.Destination{Name: "b"}
	got := job.ReplayBindings("dl.jsonl", "default", []*job.Destination{nil, a, b, a, nil})
	var names []string
	for i, bind := range got {
		s := bind.Source.(*job.DeadLetterSource)
		names = append(names, s.Destination)
		if s.Path != "dl.jsonl" || s.Default != (i == 0) || !slices.Equal(s.Known, []string{"default", "a", "b"}) {
			t.Errorf("binding %d: %+v; want path dl.jsonl, Default only first, Known [default a b]", i, s)
		}
		if want := map[int]*job.Destination{0: nil, 1: a, 2: b}[i]; bind.Destination != want {
			t.Errorf("binding %d pushes to %v, want %v", i, bind.Destination, want)
		}
	}
	if !slices.Equal(names, []string{"default", "a", "b"}) {
		t.Fatalf("sources replay %v; want [default a b]", names)
	}
}

// deadLetterLine is a dead letter of an entry at own with line.
func deadLetterLine(own time.Time, line string) string {
	return `{"time":"2026-06-30T12:00:00Z","key":"eventlogfile:Login","reason":"line_too_long","status":400,"timestamp":"` +
		own.Format(time.RFC3339Nano) + `","labels":"{event_type=\"Login\", job=\"sf2loki\"}","line":"` + line + `"}`
}

// deadLetterReplay writes data to a dead-letter file and returns a job that replays it to a new
// receiver, and the file's path.
func deadLetterReplay(t *testing.T, data []byte) (string, *simloki.Server, job.Deps) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, sink := receiver(t, simloki.Options{})
	return path, srv, job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: &job.DeadLetterSource{Path: path}}}, Sink: sink}
}

// A replay opens the dead-letter file while another writer (a backfill, another job group
// sharing sink.loki.dead_letter_path) is appending a dead letter: the file ends in half a
// line. The replay stops before it, neither skipping it as unreadable nor moving its cursor
// past its start, and once the line is complete the next replay ships it.
func TestDeadLetterReplayStopsBeforeALineStillBeingWritten(t *testing.T) {
	own := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond)
	first, second := deadLetterLine(own, "one")+"\n", deadLetterLine(own.Add(time.Second), "two")+"\n"
	half := len(second) / 2
	path, srv, deps := deadLetterReplay(t, []byte(first+second[:half]))
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 1 || rep.Events["deadletter.unreadable_dead_letter"] != 0 {
		t.Fatalf("first replay: %s %s, %d records, events %v; want ok, one record, nothing unreadable",
			rep.Outcome, rep.Error, rep.Records, rep.Events)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(second[half:]); err != nil { // the writer completes its line
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rep = job.Run(context.Background(), deps, baseOptions())
	var lines []string
	for _, e := range srv.Entries() {
		lines = append(lines, e.Line)
	}
	if rep.Outcome != job.OutcomeOK || rep.Records != 1 || !slices.Equal(lines, []string{"one", "two"}) {
		t.Fatalf("second replay: %s, %d records, events %v; the receiver holds %q, want one and two",
			rep.Outcome, rep.Records, rep.Events, lines)
	}
}

// fullOnceWriter is a dead-letter file on a full disk for its first write (a short write, as
// os.File returns with ENOSPC), with space again afterwards.
type fullOnceWriter struct {
	buf   bytes.Buffer
	wrote bool
}

func (w *fullOnceWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		n := len(p) / 2
		w.buf.Write(p[:n])
		return n, syscall.ENOSPC
	}
	return w.buf.Write(p)
}

// replayDeadLetters replays the dead letters in data to a new receiver and returns how often
// it holds each numbered record, and the replay's report.
func replayDeadLetters(t *testing.T, data []byte) (map[string]map[int]int, *job.Report) {
	t.Helper()
	_, srv, deps := deadLetterReplay(t, data)
	rep := job.Run(context.Background(), deps, baseOptions())
	return delivered(t, srv), rep
}

// The first dead letter of a run is written only in part (a full disk): its key is frozen.
// The next one, of the other key, is written whole and its key advances past its entry, so it
// must begin a line of its own: the replay skips the fragment and ships that entry.
func TestDeadLetterAfterAShortWriteBeginsANewLine(t *testing.T) {
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.MetadataValue("n") == "5" }, "entry too old")
	coord := jobtest.New()
	w := &fullOnceWriter{}
	opts := baseOptions()
	opts.DeadLetter = w
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10, "b": 10})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	cp := checkpoints(t, coord)
	if rep.Dropped["bad_request"] != 1 || len(rep.Frozen) != 1 || cp["b"]+cp["a"] != 14 {
		t.Fatalf("setup: dropped %v, frozen %+v, cursors %v", rep.Dropped, rep.Frozen, cp)
	}
	dropped := "b"
	if cp["a"] == 10 {
		dropped = "a"
	}
	got, rrep := replayDeadLetters(t, w.buf.Bytes())
	if got[dropped][5] != 1 || rrep.Events["deadletter.unreadable_dead_letter"] != 1 {
		t.Fatalf("%s #5 was dropped with its cursor committed past it; replaying the dead letter ships it %d times "+
			"(replay %s, events %v); want once, the fragment skipped. Dead letter:\n%s",
			dropped, got[dropped][5], rrep.Outcome, rrep.Events, w.buf.String())
	}
}

// An earlier run left the dead-letter file ending in part of a line (its write stopped part
// way, and its key froze). This run's dead letter begins a line of its own, so the replay
// ships its entry.
func TestDeadLetterIntoAFileEndingInAFragmentBeginsANewLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	whole := deadLetterLine(time.Now().Add(-10*time.Minute).UTC(), "earlier") + "\n"
	if err := os.WriteFile(path, []byte(whole[:len(whole)/2]), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) // as the CLI opens it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.MetadataValue("n") == "5" }, "entry too old")
	coord := jobtest.New()
	opts := baseOptions()
	opts.DeadLetter = f
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10})}}, Sink: sink}
	if rep := job.Run(context.Background(), deps, opts); rep.Dropped["bad_request"] != 1 || checkpoints(t, coord)["a"] != 10 {
		t.Fatalf("setup: %s, dropped %v, cursors %v", rep.Outcome, rep.Dropped, checkpoints(t, coord))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, rrep := replayDeadLetters(t, data)
	if got["a"][5] != 1 || rrep.Events["deadletter.unreadable_dead_letter"] != 1 {
		t.Fatalf("replaying the dead letter ships a #5 %d times (replay %s, events %v); want once, the fragment skipped. "+
			"Dead letter:\n%s", got["a"][5], rrep.Outcome, rrep.Events, data)
	}
}

// syncingWriter is a dead-letter file that counts its syncs and the writes not synced yet;
// with fail set, every sync fails.
type syncingWriter struct {
	buf             bytes.Buffer
	syncs, unsynced int
	fail            error
}

func (w *syncingWriter) Write(p []byte) (int, error) {
	w.unsynced++
	return w.buf.Write(p)
}

func (w *syncingWriter) Sync() error {
	w.syncs++
	if w.fail != nil {
		return w.fail
	}
	w.unsynced = 0
	return nil
}

// rejectNumbers makes srv refuse for good the numbered entries ns[key] of each key.
func rejectNumbers(srv *simloki.Server, ns map[string][]int) {
	srv.RejectEntries(func(e simloki.Entry) bool {
		k, n, ok := sourcetest.ParseLine(e.Line)
		return ok && slices.Contains(ns[k], n)
	}, "entry too old")
}

// The checkpoint store's commits are durable, so the dead letters of the entries a commit
// moves past must be durable before it: a power loss would otherwise lose them with their
// cursors committed. The file is synced once before each commit that follows dead letters
// (three batches, the first two with dead letters: two syncs for three dead letters), never
// with a dead letter not synced yet.
func TestDeadLettersAreSyncedBeforeTheCommitThatPassesThem(t *testing.T) {
	srv, sink := receiver(t, simloki.Options{})
	rejectNumbers(srv, map[string][]int{"a": {5, 7}, "b": {5}})
	coord := jobtest.New()
	w := &syncingWriter{}
	opts := baseOptions()
	opts.DeadLetter, opts.PushEntries = w, 10 // a batch per key
	opts.Hook = func(s job.Step) {
		if s == job.StepBeforeCommit && w.unsynced > 0 {
			t.Errorf("a commit with %d dead letters not synced", w.unsynced)
		}
	}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10, "b": 10, "c": 10})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK || rep.Commits != 3 || rep.Dropped["bad_request"] != 3 {
		t.Fatalf("setup: outcome %s, %d commits, dropped %v (%s)", rep.Outcome, rep.Commits, rep.Dropped, rep.Error)
	}
	if w.syncs != 2 {
		t.Errorf("%d syncs; want 2, one before each commit that follows dead letters", w.syncs)
	}
	if cp := checkpoints(t, coord); cp["a"] != 10 || cp["b"] != 10 || cp["c"] != 10 {
		t.Errorf("stored cursors %v; want every key at 10", cp)
	}
}

// A sync of the dead-letter file fails: the dead letters written since the last one may be
// lost, so no cursor is committed past their entries. Their key is frozen at its first such
// entry, as when a dead letter cannot be written (its entries before it committed, the rest
// shipped again by the next run, which dead-letters the entry anew); the other key commits.
func TestFailedDeadLetterSyncHoldsTheCommitOfItsKeys(t *testing.T) {
	srv, sink := receiver(t, simloki.Options{})
	rejectNumbers(srv, map[string][]int{"a": {5, 7}})
	coord := jobtest.New()
	w := &syncingWriter{fail: syscall.EIO}
	opts := baseOptions()
	opts.DeadLetter = w
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10, "b": 10})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomePartial || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "dead letter") ||
		!strings.Contains(rep.Errors[0], syscall.EIO.Error()) {
		t.Fatalf("outcome %s, errors %q (%s); want partial naming the failed sync", rep.Outcome, rep.Errors, rep.Error)
	}
	if cp := checkpoints(t, coord); cp["a"] != 4 || cp["b"] != 10 {
		t.Fatalf("stored cursors %v; want a held at 4 (before its dead letters), b at 10", cp)
	}
	if len(rep.Frozen) != 1 || rep.Frozen[0].Key != "a" || !strings.Contains(rep.Frozen[0].Reason, "dead letter") {
		t.Errorf("frozen %+v; want a, naming the dead letter", rep.Frozen)
	} else if _, n, _ := sourcetest.ParseLine(rep.Frozen[0].Line); n != 5 {
		t.Errorf("a is frozen at #%d; want #5, its first dead letter", n)
	}
	if len(rep.Dropped) != 0 || rep.Uncommitted != 4 { // a 6, 8, 9, 10
		t.Errorf("dropped %v, uncommitted %d; want nothing dropped for good, 4 entries to ship again", rep.Dropped, rep.Uncommitted)
	}
	w.fail = nil
	rep = job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK || rep.Dropped["bad_request"] != 2 || checkpoints(t, coord)["a"] != 10 {
		t.Fatalf("next run: outcome %s, dropped %v, stored cursors %v (%s); want ok, a #5 and #7 dropped, a at 10",
			rep.Outcome, rep.Dropped, checkpoints(t, coord), rep.Error)
	}
}

// A dead letter written to a pipe (dead_letter_path: /dev/stdout under a log collector) has
// nothing on disk to sync: its sync failing for that is no failure, and the key advances.
func TestDeadLetterToAPipeNeedsNoSync(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	var got bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = got.ReadFrom(pr)
	}()
	srv, sink := receiver(t, simloki.Options{})
	rejectNumbers(srv, map[string][]int{"a": {5}})
	coord := jobtest.New()
	opts := baseOptions()
	opts.DeadLetter = pw
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10})}}, Sink: sink}
	rep := job.Run(context.Background(), deps, opts)
	pw.Close()
	<-read
	if rep.Outcome != job.OutcomeOK || rep.Dropped["bad_request"] != 1 || checkpoints(t, coord)["a"] != 10 {
		t.Fatalf("outcome %s, dropped %v, stored cursors %v (%s); want ok, #5 dropped, a at 10",
			rep.Outcome, rep.Dropped, checkpoints(t, coord), rep.Error)
	}
	if n := strings.Count(got.String(), "\n"); n != 1 {
		t.Errorf("the pipe got %d dead letters, want 1:\n%s", n, got.String())
	}
}

// An empty line in the dead-letter file (a run that could not read the file's last byte
// begins its dead letter with a line break, in case the file ended in part of a line) carries
// nothing: the replay passes it without a warning, and still counts a line that is not a dead
// letter as unreadable.
func TestDeadLetterReplayPassesEmptyLinesSilently(t *testing.T) {
	own := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond)
	data := "\n" + deadLetterLine(own, "one") + "\n\n\n \r\nnot a dead letter\n" + deadLetterLine(own.Add(time.Second), "two") + "\n\n"
	_, srv, deps := deadLetterReplay(t, []byte(data))
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 2 || rep.Events["deadletter.unreadable_dead_letter"] != 1 {
		t.Fatalf("%s %s: %d records, events %v; want ok, 2 records, the one line that is not a dead letter unreadable",
			rep.Outcome, rep.Error, rep.Records, rep.Events)
	}
	if rep := job.Run(context.Background(), deps, baseOptions()); rep.Outcome != job.OutcomeOK || rep.Records != 0 ||
		len(rep.Events) != 0 || srv.Count() != 2 {
		t.Fatalf("second replay: %s, %d records, events %v", rep.Outcome, rep.Records, rep.Events)
	}
}
