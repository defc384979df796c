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

// panickingSource wraps a source: the stream of key panics reading its record number at
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

// Next reads record at into rec, as a parser would, and panics before it is whole.
func (s *panickingStream) Next(ctx context.Context, rec *source.Record) error {
	err := s.Stream.Next(ctx, rec)
	if err == nil {
		s.next++
		if s.next == s.at {
			panic("hostile row")
		}
	}
	return err
}

// A source panics reading record 5 of key a (it has filled the record in part), keys a and b
// served two records a turn and ten a run. Only a stops, like a key whose source fails: the
// records pulled before the panic (a 1..4) are shipped and committed, the record the panic left
// half read is no part of the batch (its cursor would move a past it), and b goes on. In the
// next runs a panics on its first record, and b still advances ten records a run.
func TestSourcePanicStopsOnlyItsKey(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	src := &panickingSource{Numbered: numbered(map[string]int{"a": 10, "b": 30}), key: "a", at: 5}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: src}}, Sink: sink}
	opts := baseOptions()
	opts.Quantum, opts.MaxRecords = 2, 10
	for run, b := range []int{6, 16, 26, 30} {
		rep := job.Run(context.Background(), deps, opts)
		want := int64(b - []int{0, 6, 16, 26}[run])
		if run == 0 {
			want += 4 // a 1..4
		}
		if rep.Outcome != job.OutcomePartial || rep.Records != want || len(rep.Dropped) != 0 || len(rep.Errors) != 1 ||
			!strings.Contains(rep.Errors[0], "hostile row") || !strings.Contains(rep.Errors[0], "a:") {
			t.Fatalf("run %d: outcome %s, %d records, dropped %v, errors %q (%s); want partial, %d records, nothing dropped, "+
				"the panic of a reported", run+1, rep.Outcome, rep.Records, rep.Dropped, rep.Errors, rep.Error, want)
		}
		if cp := checkpoints(t, coord); cp["a"] != 4 || cp["b"] != b {
			t.Fatalf("run %d: stored cursors %v; want a at 4, b at %d", run+1, cp, b)
		}
	}
	assertExactlyOnce(t, delivered(t, srv), map[string]int{"a": 4, "b": 30})
}
