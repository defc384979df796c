package job_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
)

// TestSettledLinesAreReusedIntact: the job releases a push's line memory once the push is
// settled and the next rows are shaped into it; every record still reaches the strict receiver
// exactly once, with the line and metadata it was shaped with, across dozens of pushes.
func TestSettledLinesAreReusedIntact(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	totals := map[string]int{"a": 12000, "b": 12000}
	src := numbered(totals)
	src.Shaped, src.LineBytes = true, 300
	opts := baseOptions()
	opts.PushEntries = 500
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomeOK || rep.Records != 24000 {
		t.Fatalf("outcome %s with %d records (%s), want ok with 24000", rep.Outcome, rep.Records, rep.Error)
	}
	if src.ChunksReused() == 0 {
		t.Fatal("no line memory was reused: the job did not release settled entries")
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
	for _, e := range srv.Entries() {
		want := fmt.Sprintf(`{"key":%q,"n":%s,"pad":"`, e.Label("event_type"), e.MetadataValue("n"))
		if len(e.Line) != 300 || e.Line[:len(want)] != want {
			t.Fatalf("entry changed after it was shaped: %.60q… (metadata n=%s)", e.Line, e.MetadataValue("n"))
		}
	}
	t.Logf("%d chunks of line memory reused", src.ChunksReused())
}

// TestFrozenLineKeptWhenItsMemoryIsReused: the report names a frozen key's record with its line,
// and keeps it as it was while the record's line memory is reused by the pushes after it. (The
// frozen record lies in a full chunk of its key's lines, every one of them pushed and settled by
// the time the pushes after it run.)
func TestFrozenLineKeptWhenItsMemoryIsReused(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.Label("event_type") == "a" && e.MetadataValue("n") == "1000" }, "entry too old")
	src := numbered(map[string]int{"a": 3000, "b": 20000})
	src.Shaped, src.LineBytes = true, 150
	opts := baseOptions()
	opts.OnPermanentReject = job.RejectFreeze
	opts.PushEntries = 200
	rep := job.Run(context.Background(), job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}, opts)
	if rep.Outcome != job.OutcomePartial || len(rep.Frozen) != 1 {
		t.Fatalf("outcome %s, frozen %+v: want partial with key a frozen", rep.Outcome, rep.Frozen)
	}
	if src.ChunksReused() == 0 {
		t.Fatal("no line memory was reused after the freeze: the test shows nothing")
	}
	prefix := `{"key":"a","n":1000,"pad":"`
	if want := prefix + strings.Repeat("x", 150-len(prefix)-2) + `"}`; rep.Frozen[0].Line != want {
		t.Fatalf("the frozen record's line reads %q, want %q", rep.Frozen[0].Line, want)
	}
	if cp := checkpoints(t, coord); cp["a"] != 999 || cp["b"] != 20000 {
		t.Errorf("cursors %v, want a stopped at 999 and b at 20000", cp)
	}
}
