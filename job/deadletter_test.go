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
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, sink := receiver(t, simloki.Options{})
	coord := jobtest.New()
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: &job.DeadLetterSource{Path: path}}}, Sink: sink}
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

// A replay opens the dead-letter file while another writer (a backfill, another job group
// sharing sink.loki.dead_letter_path) is appending a dead letter: the file ends in half a
// line. The replay stops before it, neither skipping it as unreadable nor moving its cursor
// past its start, and once the line is complete the next replay ships it.
func TestDeadLetterReplayStopsBeforeALineStillBeingWritten(t *testing.T) {
	own := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Millisecond)
	first, second := deadLetterLine(own, "one")+"\n", deadLetterLine(own.Add(time.Second), "two")+"\n"
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	half := len(second) / 2
	if err := os.WriteFile(path, []byte(first+second[:half]), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, sink := receiver(t, simloki.Options{})
	coord := jobtest.New()
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: &job.DeadLetterSource{Path: path}}}, Sink: sink}
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
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, sink := receiver(t, simloki.Options{})
	rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(),
		Bindings: []job.Binding{{Source: &job.DeadLetterSource{Path: path}}}, Sink: sink}, baseOptions())
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
