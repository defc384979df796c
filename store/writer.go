package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"unicode/utf8"
)

// Change is one commit: checkpoint values to set and delete, counters to set and delete, and
// (for lease/store only) the embedded lease state. All of it lands in one conditional write.
type Change struct {
	Set            map[string]json.RawMessage // checkpoint key -> value (valid JSON)
	Delete         []string                   // checkpoint keys to remove
	Counters       map[string]Counter         // counter name -> value and window (Epoch/UpdatedAt are set by the writer)
	DeleteCounters []string
	// Lease updates the embedded lease fields of the fence. Only lease/store sets it; a
	// change with only Lease set is a renewal and does not move last_commit_at.
	Lease *LeaseState
}

// empty reports a change with no checkpoint or counter edits.
func (c Change) empty() bool {
	return len(c.Set) == 0 && len(c.Delete) == 0 && len(c.Counters) == 0 && len(c.DeleteCounters) == 0
}

// validate refuses a change the document could not hold as given. Names and values must be
// valid UTF-8: json.Valid does not look inside strings, a value is stored byte for byte, and a
// document holding invalid UTF-8 is refused as corrupt by every later read (while a name with
// it would be stored under U+FFFD, another name than the one given).
func (c Change) validate() error {
	for k, v := range c.Set {
		if k == "" {
			return errors.New("commit: empty checkpoint key")
		}
		if !utf8.ValidString(k) {
			return fmt.Errorf("commit: checkpoint %q: the key is not valid UTF-8", k)
		}
		if !json.Valid(v) {
			return fmt.Errorf("commit: checkpoint %q: value is not valid JSON", k)
		}
		if !utf8.Valid(v) {
			return fmt.Errorf("commit: checkpoint %q: value is not valid UTF-8", k)
		}
	}
	for k, v := range c.Counters {
		if !utf8.ValidString(k) || !utf8.ValidString(v.Window) {
			return fmt.Errorf("commit: counter %q: name or window is not valid UTF-8", k)
		}
	}
	for _, k := range c.Delete {
		if _, ok := c.Set[k]; ok {
			return fmt.Errorf("commit: checkpoint %q is both set and deleted", k)
		}
	}
	for _, k := range c.DeleteCounters {
		if _, ok := c.Counters[k]; ok {
			return fmt.Errorf("commit: counter %q is both set and deleted", k)
		}
	}
	return nil
}

// WriterStats counts what a Writer went through.
type WriterStats struct {
	Commits   int // confirmed writes after the claim
	Conflicts int // precondition failures seen (each followed by a re-read)
	LostAcks  int // ambiguous writes that the re-read proved had landed
	Retries   int // writes repeated after a re-read proved the previous attempt had not landed
}

// Writer owns the version chain of a claimed document: every write conditions on the exact
// version it last wrote, carries a fresh stamp, and is verified by re-reading after any
// ambiguous failure. Its methods are serialized, so renewals (lease/store) and the job's
// commits sharing one Writer never conflict with each other; a Commit waiting for another to
// finish gives up when its context ends (a renewal is not held past its own timeout behind a
// job's commit whose store stopped answering).
type Writer struct {
	s       *Store
	epoch   uint64
	inv     string
	holder  string
	turn    chan struct{} // held (one element) by the method in progress
	doc     *Document     // last confirmed version
	version Version
	seq     uint64   // highest seq used by any attempt
	pending *attempt // an unconfirmed write whose outcome is unknown
	failed  error    // sticky ErrFenced / ErrIntegrity
	stats   WriterStats
}

func (s *Store) newWriter(req ClaimRequest, doc *Document, v Version) *Writer {
	return &Writer{s: s, epoch: req.Epoch, inv: req.Invocation, holder: req.Holder, doc: doc, version: v, seq: doc.Writer.Seq,
		turn: make(chan struct{}, 1)}
}

// Epoch is the epoch the writer claimed.
func (w *Writer) Epoch() uint64 { return w.epoch }

// Invocation is the invocation id in the writer's stamps.
func (w *Writer) Invocation() string { return w.inv }

// Document returns a copy of the last confirmed document.
func (w *Writer) Document() *Document {
	w.lock()
	defer w.unlock()
	return w.doc.Clone()
}

// Version returns the version of the last confirmed write.
func (w *Writer) Version() Version {
	w.lock()
	defer w.unlock()
	return w.version
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	w.lock()
	defer w.unlock()
	return w.stats
}

// Err returns the sticky error (ErrFenced or ErrIntegrity) that stopped the writer, or nil.
func (w *Writer) Err() error {
	w.lock()
	defer w.unlock()
	return w.failed
}

// Commit applies c in one write conditioned on the last version this writer wrote.
//
// Results: nil (written and confirmed, possibly after a lost acknowledgement); ErrFenced (a
// newer epoch owns the document, or it was deleted: stop, nothing more will be written);
// ErrIntegrity (a foreign stamp under our epoch, or a fence below ours: the store ignored a
// precondition or someone edited by hand); ErrUnavailable (the outcome is unknown: the next
// Commit first settles it, and carries its changes forward); ErrTooLarge (nothing written); an
// error naming the key of a change the document cannot hold, such as a value that is not valid
// UTF-8 (nothing written).
func (w *Writer) Commit(ctx context.Context, c Change) error {
	if err := c.validate(); err != nil {
		return err
	}
	select {
	case w.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: commit to %s not sent: waiting for the commit before it: %w", ErrUnavailable, w.s.Object(), ctx.Err())
	}
	defer w.unlock()
	if w.failed != nil {
		return w.failed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: commit to %s not sent: %w", ErrUnavailable, w.s.Object(), err)
	}
	if w.pending != nil {
		if err := w.settlePending(ctx); err != nil {
			return err
		}
	}
	basis := w.doc
	if w.pending != nil {
		basis = w.pending.doc // not landed (yet): carry its changes forward
	}
	now := w.s.o.Now()
	next := basis.Clone()
	for k, v := range c.Set {
		next.Checkpoints[k] = Checkpoint{Value: append(json.RawMessage(nil), v...), Epoch: w.epoch, UpdatedAt: now}
	}
	for _, k := range c.Delete {
		delete(next.Checkpoints, k)
	}
	if len(c.Counters) > 0 && next.Counters == nil {
		next.Counters = map[string]Counter{}
	}
	for k, v := range c.Counters {
		v.Epoch, v.UpdatedAt = w.epoch, now
		next.Counters[k] = v
	}
	for _, k := range c.DeleteCounters {
		delete(next.Counters, k)
	}
	if len(next.Counters) == 0 {
		next.Counters = nil
	}
	if l := c.Lease; l != nil {
		next.Fence.RenewedAt = l.RenewedAt
		next.Fence.Duration = Duration(l.Duration)
		next.Fence.Released = l.Released
	}
	if c.Lease == nil || !c.empty() {
		next.LastCommitAt = now
	}
	w.seq++
	next.Writer = &Stamp{Epoch: w.epoch, Invocation: w.inv, Seq: w.seq, WrittenAt: now, Host: w.s.o.Host}
	data, err := w.s.encode(next)
	if err != nil {
		w.seq--
		return err
	}
	return w.write(ctx, &attempt{doc: next, data: data})
}

// write sends att conditioned on w.version through the store's one CAS loop.
func (w *Writer) write(ctx context.Context, att *attempt) error {
	res, pending, err := w.s.cas(ctx, Snapshot{Doc: w.doc, Version: w.version}, casOp{
		what:   "commit",
		build:  func(Snapshot) (*attempt, error) { return att, nil }, // built on our own version: write it again as is
		settle: w.settle,
	}, &w.stats)
	if err != nil {
		if errors.Is(err, ErrUnavailable) && pending != nil {
			w.pending = pending
		}
		return err
	}
	w.confirm(res.doc, res.version)
	return nil
}

// settlePending reads the document to learn whether an unconfirmed write landed, so that
// the next write is conditioned on the right version instead of running into our own write.
func (w *Writer) settlePending(ctx context.Context) error {
	cur, err := w.s.Read(ctx)
	if err != nil {
		return fmt.Errorf("%w: an earlier commit to %s is still unconfirmed: %w", ErrUnavailable, w.s.Object(), err)
	}
	if cur.Version == w.version {
		return nil // not landed; the next write carries it and conditions on the same version
	}
	landed, err := w.settle(cur, w.pending) // landed, fenced, integrity, or our base rewritten
	if err != nil {
		return err
	}
	if landed {
		w.stats.LostAcks++
		w.confirm(w.pending.doc, cur.Version)
	}
	return nil
}

// settle interprets the document read back after a failed write of att: landed when att is
// stored; no error and not landed when one of our own earlier writes is current, so att (built
// on top of it) may be written again on cur's version.
func (w *Writer) settle(cur Snapshot, att *attempt) (landed bool, err error) {
	obj := w.s.Object()
	if cur.Absent {
		return false, w.fail(&FencedError{Object: obj, Epoch: w.epoch, Reason: "the document was deleted after our claim"})
	}
	st, f := cur.Doc.Writer, cur.Doc.Fence
	if st.same(att.doc.Writer) {
		return true, nil
	}
	if f != nil && f.Epoch > w.epoch {
		return false, w.fail(&FencedError{Object: obj, Epoch: w.epoch, StoredEpoch: f.Epoch, StoredHolder: f.Holder})
	}
	if st != nil && st.Epoch == w.epoch && st.Invocation == w.inv && st.Seq < att.doc.Writer.Seq && f != nil && f.Epoch == w.epoch {
		// One of our own earlier writes is current (the confirmed base, or an unconfirmed one
		// that landed late); att was built on top of it, so write att on this version.
		w.doc, w.version = cur.Doc, cur.Version
		return false, nil
	}
	if f == nil || f.Epoch < w.epoch {
		return false, w.fail(fmt.Errorf("%w: %s was rewritten below our fence (epoch %d, stored %d, writer %+v): "+
			"the store ignored a precondition or the document was restored by hand", ErrIntegrity, obj, w.epoch, cur.Doc.FenceEpoch(), st))
	}
	return false, w.fail(fmt.Errorf("%w: %s has a foreign writer under our epoch %d (writer %+v, ours %s)",
		ErrIntegrity, obj, w.epoch, st, w.inv))
}

func (w *Writer) confirm(doc *Document, v Version) {
	w.doc, w.version, w.pending = doc, v, nil
	w.stats.Commits++
}

func (w *Writer) fail(err error) error {
	w.failed = err
	w.pending = nil
	return err
}

// Checkpoints returns a copy of the confirmed checkpoints.
func (w *Writer) Checkpoints() map[string]Checkpoint {
	w.lock()
	defer w.unlock()
	return w.doc.Clone().Checkpoints
}

// Counters returns a copy of the confirmed counters.
func (w *Writer) Counters() map[string]Counter {
	w.lock()
	defer w.unlock()
	return maps.Clone(w.doc.Counters)
}

// lock waits for the writer's turn; unlock gives it back.
func (w *Writer) lock()   { w.turn <- struct{}{} }
func (w *Writer) unlock() { <-w.turn }
