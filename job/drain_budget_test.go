package job_test

import (
	"context"
	"io"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/source"
)

// budgeted is a source that, like soql and apexlog, sizes its reads by Budget.MaxRecords and
// ends its streams when that many records are out.
type budgeted struct{ source.Source }

func (b budgeted) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	ss, err := b.Source.Open(ctx, req)
	for i, s := range ss {
		ss[i] = &budgetedStream{Stream: s, left: req.Budget.MaxRecords}
	}
	return ss, err
}

type budgetedStream struct {
	source.Stream
	left int // 0: no bound
}

func (s *budgetedStream) Next(ctx context.Context, rec *source.Record) error {
	if s.left < 0 {
		return io.EOF
	}
	err := s.Stream.Next(ctx, rec)
	if err == nil && s.left > 0 {
		if s.left--; s.left == 0 {
			s.left = -1
		}
	}
	return err
}

// TestDrainIgnoresTheBatchBoundInTheSources: with Drain the batch bounds are ignored, so the
// sources must not be told to stop at them either; otherwise a source that honours its budget
// ends its stream after batch.max_records and the run reports caught_up although records are
// left.
func TestDrainIgnoresTheBatchBoundInTheSources(t *testing.T) {
	coord := jobtest.New()
	srv, sink := receiver(t, simloki.Options{})
	totals := map[string]int{"a": 30}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: budgeted{numbered(totals)}}}, Sink: sink}
	opts := baseOptions()
	opts.MaxRecords, opts.PushEntries, opts.Drain = 5, 5, true
	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK || !rep.CaughtUp || rep.Records != 30 {
		t.Fatalf("drain: outcome %s caught_up %v records %d, want ok, caught up, 30", rep.Outcome, rep.CaughtUp, rep.Records)
	}
	assertExactlyOnce(t, delivered(t, srv), totals)
}
