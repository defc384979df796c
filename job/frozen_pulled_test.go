package job_test

import (
	"context"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// signalingSource is a Numbered source whose streams close pulled once key's record n has been
// handed out.
type signalingSource struct {
	*sourcetest.Numbered
	key    string
	n      int
	pulled chan struct{}
}

func (s *signalingSource) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	ss, err := s.Numbered.Open(ctx, req)
	for i := range ss {
		ss[i] = &signalingStream{Stream: ss[i], src: s}
	}
	return ss, err
}

type signalingStream struct {
	source.Stream
	src *signalingSource
}

func (s *signalingStream) Next(ctx context.Context, rec *source.Record) error {
	if err := s.Stream.Next(ctx, rec); err != nil {
		return err
	}
	if k, n, ok := sourcetest.ParseLine(rec.Entry.Line); ok && k == s.src.key && n == s.src.n {
		close(s.src.pulled)
	}
	return nil
}

// holdingPusher holds the push that carries the given entry until pulled is closed.
type holdingPusher struct {
	job.Pusher
	key    string
	n      int
	pulled <-chan struct{}
}

func (h *holdingPusher) Push(ctx context.Context, entries []loki.Entry) loki.Result {
	for _, e := range entries {
		if k, n, ok := sourcetest.ParseLine(e.Line); ok && k == h.key && n == h.n {
			select {
			case <-h.pulled:
			case <-time.After(10 * time.Second): // the test then fails on what was pulled
			}
			break
		}
	}
	return h.Pusher.Push(ctx, entries)
}

// TestItemsPulledBeforeTheirKeyFrozeAreLeftOutAndTheRestShipped: the puller builds the next
// batch while the pusher pushes the one before. Here a's 5th record is refused for good
// (freeze policy) and its push is held until the puller has handed out a's 7th, so the next
// batch holds a's 7th and 8th, pulled before a froze, between b's records. That batch must
// leave a's records out (never pushed: a stays at 4, and they come again next run) and ship
// every one of b's: b is delivered 1 to 10 exactly once and committed at 10.
func TestItemsPulledBeforeTheirKeyFrozeAreLeftOutAndTheRestShipped(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.Label("event_type") == "a" && e.MetadataValue("n") == "5" }, "entry too old")
	pulled := make(chan struct{})
	src := &signalingSource{Numbered: numbered(map[string]int{"a": 10, "b": 10}), key: "a", n: 7, pulled: pulled}
	opts := baseOptions()
	opts.OnPermanentReject = job.RejectFreeze
	opts.PushEntries, opts.Quantum = 4, 2 // batches of a, a, b, b
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}},
		Sink: &holdingPusher{Pusher: sink, key: "a", n: 5, pulled: pulled}}
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomePartial {
		t.Fatalf("outcome %s, want partial (%s)", rep.Outcome, rep.Error)
	}
	select {
	case <-pulled:
	default:
		t.Fatal("a's 7th record was never pulled: the test did not set up the batch it is about")
	}
	if cp := checkpoints(t, coord); cp["a"] != 4 || cp["b"] != 10 {
		t.Errorf("cursors %v, want a stopped at 4 and b at 10", cp)
	}
	got := delivered(t, srv)
	for n := 7; n <= 10; n++ {
		if got["a"][n] != 0 {
			t.Errorf("a's record %d was delivered after a froze: %v", n, got["a"])
		}
	}
	for n := 1; n <= 10; n++ {
		if got["b"][n] != 1 {
			t.Errorf("b's record %d delivered %d times, want once: %v", n, got["b"][n], got["b"])
		}
	}
}
