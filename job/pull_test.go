package job_test

import (
	"context"
	"strings"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// panickingSource wraps a source: the stream of key panics when asked for its record number at
// (hostile input a parser trips over), after yielding the ones before it.
type panickingSource struct {
	*sourcetest.Numbered
	key string
	at  int
}

func (p *panickingSource) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	streams, err := p.Numbered.Open(ctx, req)
	for i, s := range streams {
		if s.Key() == p.key {
			next := 0
			if n, err := sourcetest.DecodeCursor(req.Cursors[p.key]); err == nil {
				next = n
			}
			streams[i] = &panickingStream{Stream: s, next: next, at: p.at}
		}
	}
	return streams, err
}

type panickingStream struct {
	source.Stream
	next, at int
}

func (s *panickingStream) Next(ctx context.Context, rec *source.Record) error {
	if s.next+1 == s.at {
		panic("hostile row")
	}
	err := s.Stream.Next(ctx, rec)
	if err == nil {
		s.next++
	}
	return err
}

// A source panics on record 5 of key a, keys a and b served two records a turn: the records
// pulled before the panic (a and b 1..4) are shipped and committed, and the record the panic
// left half read is no part of the batch (pushed, it would be dropped as missing labels and
// its empty cursor would make the commit fail, so every run would ship the batch again).
func TestSourcePanicShipsAndCommitsWhatWasPulledBefore(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := &panickingSource{Numbered: numbered(map[string]int{"a": 10, "b": 10}), key: "a", at: 5}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	opts := baseOptions()
	opts.Quantum = 2
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomePartial || rep.Records != 8 || len(rep.Dropped) != 0 ||
		len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "hostile row") {
		t.Fatalf("outcome %s, %d records, dropped %v, errors %q (%s); want partial, 8 records, nothing dropped, the panic reported",
			rep.Outcome, rep.Records, rep.Dropped, rep.Errors, rep.Error)
	}
	if cp := checkpoints(t, coord); cp["a"] != 4 || cp["b"] != 4 {
		t.Fatalf("stored cursors %v; want a and b at 4", cp)
	}
	// The next runs panic at once, on a's record 5: they ship nothing again.
	for range 2 {
		job.Run(context.Background(), deps, opts)
	}
	assertExactlyOnce(t, delivered(t, srv), map[string]int{"a": 4, "b": 4})
}
