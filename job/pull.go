package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// keyStream is an open stream and its key's state.
type keyStream struct {
	ks     *keyState
	stream source.Stream
	closed bool
}

// next reads the stream's next record into rec. A panic of the source (a parser tripping over
// hostile input) is returned as a *sourcePanic: like an error, it stops this key only.
func (k *keyStream) next(ctx context.Context, rec *source.Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &sourcePanic{value: p, stack: debug.Stack()}
		}
	}()
	return k.stream.Next(ctx, rec)
}

// sourcePanic is a panic of a stream's Next.
type sourcePanic struct {
	value any
	stack []byte
}

func (p *sourcePanic) Error() string { return fmt.Sprint("internal error in a source: ", p.value) }

func (k *keyStream) close() {
	if !k.closed {
		k.closed = true
		_ = k.stream.Close()
	}
}

// bindingCursors returns the stored cursors a binding's source sees: its org's keys with the
// prefix removed and, for the legacy fallback, unprefixed keys where no prefixed one exists.
func bindingCursors(b Binding, all map[string]json.RawMessage) map[string]json.RawMessage {
	prefixed := b.KeyPrefix() != ""
	out := map[string]json.RawMessage{}
	for k, v := range all {
		rest, ok := b.Reads(k)
		if !ok {
			continue
		}
		if _, has := out[rest]; has && prefixed && rest == k {
			continue // an unprefixed legacy cursor never hides the org's own
		}
		out[rest] = v
	}
	return out
}

// open opens every binding's streams. A source that cannot open is reported; the others run.
func (r *run) open(ctx context.Context, checkpoints map[string]json.RawMessage) []*keyStream {
	var out []*keyStream
	budget := source.Budget{MaxRecords: r.opts.MaxRecords, MaxBytes: r.opts.MaxBytes, Deadline: r.deadline}
	if r.opts.Drain {
		// The batch bounds do not apply to a drain: a source that sizes its reads by them
		// would end its streams early and the run would look caught up.
		budget.MaxRecords, budget.MaxBytes = 0, 0
	}
	for i, b := range r.deps.Bindings {
		name := b.ReportName()
		r.sourceReportByBinding(i)
		cursors := bindingCursors(b, checkpoints)
		streams, err := b.Source.Open(ctx, source.OpenRequest{
			Cursors: cursors,
			Budget:  budget,
			Log:     r.log.With("source", name),
			Count:   func(event string, n int64) { r.count(i, event, n) },
			Note:    func(s string) { r.noteSafe(name + ": " + s) },
		})
		if err != nil {
			if ctx.Err() == nil {
				r.addErr(fmt.Errorf("%s: %w", name, err))
				r.log.Error("source failed to open", "source", name, "err", err)
			}
			continue
		}
		for _, s := range streams {
			key := b.KeyPrefix() + s.Key()
			if _, dup := r.keys[key]; dup {
				r.addErr(fmt.Errorf("%s: key %s is also produced by another source; it is skipped", name, key))
				_ = s.Close()
				continue
			}
			ks := &keyState{key: key, binding: i, dest: r.bindingDest[i], before: cursors[s.Key()]}
			r.keys[key] = ks
			r.keysInOrder = append(r.keysInOrder, ks)
			r.sourceReportByBinding(i).Keys++
			out = append(out, &keyStream{ks: ks, stream: s})
		}
	}
	return out
}

// pull serves the streams round-robin, Quantum records per turn, and sends batches until the
// budget is spent, every stream is caught up, or intake stops. It closes out when done.
func (r *run) pull(ctx context.Context, streams []*keyStream, out chan<- *batch) {
	defer close(out)
	defer func() {
		for _, s := range streams {
			s.close()
		}
	}()
	cur := &batch{}
	// send hands the batch to the pusher; once intake is canceled the batch is dropped (its
	// records were never pushed, so their cursors are never committed and the next run re-reads
	// them), so the puller never blocks on a pusher that has stopped reading.
	send := func() {
		if len(cur.items) == 0 {
			return
		}
		n := len(cur.items)
		select {
		case out <- cur:
		case <-ctx.Done():
		}
		cur = &batch{items: r.mem.nextItems(n)} // batches are alike: no regrowing per batch
	}
	defer send()
	// A panic of a stream's Next stops its key only (keyStream.next). One anywhere else (a
	// stream's Close) stops the puller: the records pulled before it are whole and sent.
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("internal error in a source", "panic", p, "stack", string(debug.Stack()))
			r.addErr(fmt.Errorf("internal error in a source: %v", p))
		}
	}()
	var records int
	var bytes int64
	hooked := false
	failed := false
	waiting := false
	active := streams
	for len(active) > 0 {
		next := active[:0]
		for _, ks := range active {
			if ctx.Err() != nil {
				return
			}
			if r.frozen.has(ks.ks.key) {
				ks.close()
				continue
			}
			done := false
			for range r.opts.Quantum {
				// The record is read straight into the batch's next item.
				cur.items = append(cur.items, item{ks: ks.ks})
				rec := &cur.items[len(cur.items)-1].rec
				err := ks.next(ctx, rec)
				if err != nil {
					// Nothing to keep alive, and nothing of a record a panic left half read
					// (pushed, its cursor would move the key past it).
					*rec = source.Record{}
					cur.items = cur.items[:len(cur.items)-1]
				}
				if errors.Is(err, io.EOF) {
					done = true
					break
				}
				if errors.Is(err, source.ErrWaiting) && ctx.Err() == nil {
					waiting = true
					r.wait(ks.ks, err)
					done = true
					break
				}
				if err != nil {
					var sp *sourcePanic
					panicked := errors.As(err, &sp)
					if ctx.Err() != nil && !panicked {
						return
					}
					failed = true
					name := r.deps.Bindings[ks.ks.binding].ReportName()
					if panicked {
						r.log.Error("internal error in a source; its key stops for this run", "key", ks.ks.key, "panic", sp.value,
							"stack", string(sp.stack))
					} else {
						r.log.Error("source failed; its key stops for this run", "key", ks.ks.key, "err", err)
					}
					r.addErr(fmt.Errorf("%s: %s: %w", name, ks.ks.key, err))
					if fatalForRun(err) {
						return
					}
					done = true
					break
				}
				if !rec.Skip {
					records++
					cur.entries++
					n := int64(len(rec.Entry.Line))
					bytes += n
					cur.bytes += n
				}
				if !hooked {
					hooked = true
					r.hook(StepMidPull)
				}
				if cur.entries >= r.opts.PushEntries || cur.bytes >= r.opts.PushBytes {
					send()
				}
				if !r.opts.Drain && (records >= r.opts.MaxRecords || bytes >= r.opts.MaxBytes) {
					return
				}
			}
			if done {
				ks.close()
				continue
			}
			next = append(next, ks)
		}
		active = next
	}
	// Intake that stopped (its time ran out) may also have kept a source from opening, which is
	// not reported as an error: the loop then ends with keys that never reached their end.
	r.caughtUp = !failed && !waiting && ctx.Err() == nil
}

// wait records a key that stopped with more to ship (source.ErrWaiting) in the run report, with
// its source's reason, and notes it (called from the puller).
func (r *run) wait(ks *keyState, err error) {
	name := r.deps.Bindings[ks.binding].ReportName()
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.rep.Waiting = append(r.rep.Waiting, WaitingKey{Key: ks.key, Reason: err.Error()})
	r.note(fmt.Sprintf("%s: %s: %v", name, ks.key, err))
}

// batchMemory is what consecutive batches reuse instead of allocating it anew: the items of a
// settled batch (cleared, so that they keep no line alive) for the puller's next batch, and the
// slices ship builds a batch's pushes in. A batch's items and lines are most of what a run
// allocates besides the lines themselves; reused, they cost no garbage collection work.
type batchMemory struct {
	spare    chan []item // capacity 1; nil: nothing is reused
	ptrs     []*loki.Entry
	groups   []pushGroup
	outcomes []loki.Outcome
}

// nextItems returns an empty item slice for a batch of about n items: a settled batch's if
// one is spare and large enough.
func (m *batchMemory) nextItems(n int) []item {
	select {
	case s := <-m.spare:
		if cap(s) >= n {
			return s
		}
	default:
	}
	return make([]item, 0, n)
}

// recycle hands a batch's items, once the batch is settled and nothing refers to them, to
// the puller's next batch.
func (m *batchMemory) recycle(b *batch) {
	clear(b.items)
	select {
	case m.spare <- b.items[:0]:
	default:
	}
	b.items = nil
}

// count adds to a named event counter of binding i in the run report (sources call it from
// the puller): Report.Events["<source>.<event>"] and the source's Events.
func (r *run) count(i int, event string, n int64) {
	r.eventsMu.Lock()
	defer r.eventsMu.Unlock()
	if r.rep.Events == nil {
		r.rep.Events = map[string]int64{}
	}
	r.rep.Events[r.deps.Bindings[i].ReportName()+"."+event] += n
	sr := r.sourceReportByBinding(i)
	if sr.Events == nil {
		sr.Events = map[string]int64{}
	}
	sr.Events[event] += n
}

// sourceReportByBinding is the report of binding i's source. It is found by name once per
// binding (open does it for every binding before the puller and the pusher start; bindings of
// one org and source share it) and then by index: the name is built of the org prefix and the
// source's name, and settling counts every record into the report.
func (r *run) sourceReportByBinding(i int) *SourceReport {
	if sr := r.sourceReports[i]; sr != nil {
		return sr
	}
	name := r.deps.Bindings[i].ReportName()
	sr := r.rep.Sources[name]
	if sr == nil {
		b := r.deps.Bindings[i]
		sr = &SourceReport{Org: b.Org, Source: b.Source.Name()}
		r.rep.Sources[name] = sr
	}
	r.sourceReports[i] = sr
	return sr
}

// sourceReport is the report of the source whose key ks is.
func (r *run) sourceReport(ks *keyState) *SourceReport { return r.sourceReportByBinding(ks.binding) }
