package job

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// keyState tracks one checkpoint key through a run: the cursor of its contiguous pushed prefix,
// what is committed, and whether the key is frozen.
type keyState struct {
	key     string // full key, org prefix included
	binding int    // index into Deps.Bindings
	dest    int    // index into the run's destinations
	before  json.RawMessage
	// candidate is the cursor of the longest prefix of pulled records that are all pushed,
	// skipped or dropped (encoded into pending when a push settles: positions can be lazy);
	// committed is the last one written.
	candidate source.Position
	pending   json.RawMessage
	committed json.RawMessage
	dirty     bool
	// pendingAccepted counts accepted entries whose cursor is not committed yet.
	pendingAccepted int64
	frozen          bool // frozen or held: nothing more of the key is pushed or committed in this run
	// undurable is the key as it was before the first entry it passed whose dead letter is not
	// synced yet (nil: none): a failed sync takes the key back to it.
	undurable *undurable
}

// undurable is a key's ledger before it passed an entry whose dead letter is not synced yet.
type undurable struct {
	at              item // that entry (valid while its batch settles)
	candidate       source.Position
	dirty           bool
	pendingAccepted int64
	dropped         []loki.Reason // why the key's entries were dropped since, that one's first
}

// deadLettered notes that ks passes it, whose dead letter is not synced yet, dropped for reason.
func (ks *keyState) deadLettered(it *item, reason loki.Reason) {
	if ks.undurable == nil {
		ks.undurable = &undurable{at: *it, candidate: ks.candidate, dirty: ks.dirty, pendingAccepted: ks.pendingAccepted}
	}
	ks.undurable.dropped = append(ks.undurable.dropped, reason)
}

// item is one pulled record on its way through a push and a commit.
type item struct {
	ks  *keyState
	rec source.Record
}

// batch is the unit of one push and one commit.
type batch struct {
	items   []item
	entries int
	bytes   int64
}

// frozenSet is shared by the puller (which stops pulling frozen keys) and the pusher.
type frozenSet struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (f *frozenSet) add(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]bool{}
	}
	f.keys[key] = true
}

func (f *frozenSet) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[key]
}

// settled is what applying one push to the ledger produced.
type settled struct {
	updates  map[string]json.RawMessage
	accepted int64
	bytes    int64
}

// settle walks the batch in pull order and advances each key's candidate cursor over records
// that are done (accepted, skipped, or dropped under RejectDrop). The first record that is not
// done freezes its key (or holds it, when the rate caps left no time to push the record):
// nothing after it on that key is ever committed in this run.
// outcomes[i] is the push outcome of the i-th non-skip item; dropped reports whether a rejected
// entry was disposed of (counted and dead-lettered) and may be passed. The dead letters are
// synced before the cursors that pass them are handed to the commit.
func (r *run) settle(items []item, sh *shipment, dropped func(it item, rej loki.Rejection) bool) settled {
	s := settled{updates: map[string]json.RawMessage{}}
	n := 0
	for i := range items {
		it := &items[i] // not a copy: an item is 160 bytes
		ks := it.ks
		if it.rec.Skip {
			if !ks.frozen {
				ks.candidate, ks.dirty = it.rec.Cursor, true
				r.sourceReport(ks).Skipped++
			}
			continue
		}
		idx := n
		n++
		if ks.frozen {
			if sh.outcomes[idx] == loki.Accepted {
				// The receiver has it, but its cursor lies beyond the key's frozen entry: it
				// cannot be committed and is shipped again by the next run.
				r.rep.Uncommitted++
				r.accepted(sh, idx, it, &s)
			}
			continue
		}
		switch sh.outcomes[idx] {
		case loki.Accepted:
			ks.candidate, ks.dirty = it.rec.Cursor, true
			ks.pendingAccepted++
			r.accepted(sh, idx, it, &s)
		case loki.Rejected:
			rej := sh.rejected[idx]
			if dropped(*it, rej) {
				if r.deadLetter != nil {
					ks.deadLettered(it, rej.Reason)
				}
				ks.candidate, ks.dirty = it.rec.Cursor, true
				r.sourceReport(ks).Dropped++
				continue
			}
			by := "by the receiver"
			if rej.Status == 0 {
				by = "before sending (the receiver's rules)"
			}
			r.freeze(ks, *it, "rejected "+by+" ("+string(rej.Reason)+"): "+rej.Detail)
		default:
			if sh.held[idx] {
				r.hold(ks)
			} else if err := sh.refused[idx]; err != nil {
				r.log.Error("the egress rate caps can never let this entry through: its key is frozen", "key", ks.key, "err", err)
				r.freeze(ks, *it, err.Error())
				if r.capErr == nil {
					r.capErr = fmt.Errorf("%w: key %s: %w", ErrConfig, ks.key, err)
				}
			} else {
				r.freeze(ks, *it, "not delivered")
			}
		}
	}
	r.syncDeadLetters()
	for _, ks := range r.keysInOrder {
		if ks.dirty {
			ks.pending = ks.candidate.JSON()
			s.updates[ks.key] = ks.pending
		}
	}
	return s
}

// syncDeadLetters makes the dead letters written since the last commit durable before the
// next commit moves their keys past their entries: the checkpoint store's commits are
// durable, and a power loss must not take the dead letters of entries a committed cursor has
// passed. It syncs once for all of them. When the sync fails, each key that passed such an
// entry is taken back to the first one and frozen there, as when a dead letter cannot be
// written: its entries before it are committed, the next run ships the rest again.
func (r *run) syncDeadLetters() {
	if r.deadLetter == nil || !r.deadLetter.unsynced {
		return // nothing written since the last sync: no key passed an undurable dead letter
	}
	err := r.deadLetter.sync()
	if err != nil {
		r.log.Error("cannot sync the dead letter: the keys that passed an entry since the last sync are frozen at it instead", "err", err)
		r.addErr(fmt.Errorf("dead letter: %w", err))
	}
	for _, ks := range r.keysInOrder {
		u := ks.undurable
		if u == nil {
			continue
		}
		ks.undurable = nil
		if err == nil {
			continue
		}
		r.rep.Uncommitted += ks.pendingAccepted - u.pendingAccepted
		ks.candidate, ks.dirty, ks.pendingAccepted = u.candidate, u.dirty, u.pendingAccepted
		for _, reason := range u.dropped { // not dropped for good: the next run ships them again
			r.rep.Dropped[string(reason)]--
			if r.rep.Dropped[string(reason)] == 0 {
				delete(r.rep.Dropped, string(reason))
			}
			r.sourceReport(ks).Dropped--
		}
		// Stopped at an earlier entry than any later one this batch froze it at.
		r.rep.Frozen = slices.DeleteFunc(r.rep.Frozen, func(f FrozenKey) bool { return f.Key == ks.key })
		r.freeze(ks, u.at, "its dead letter could not be made durable: "+err.Error())
	}
}

// accepted adds an accepted entry to the report's records and bytes (as sent: after the line
// cap).
func (r *run) accepted(sh *shipment, idx int, it *item, s *settled) {
	n := sh.lineBytes(idx, it.rec.Entry.Line)
	s.accepted++
	s.bytes += n
	sr := r.sourceReport(it.ks)
	sr.Records++
	sr.Bytes += n
	if dr := r.destReport(it.ks.dest); dr != nil {
		dr.Records++
		dr.Bytes += n
	}
}

// committedAll marks every dirty key as committed.
func (r *run) committedAll() {
	for _, ks := range r.keysInOrder {
		if ks.dirty {
			ks.committed, ks.dirty, ks.pendingAccepted = ks.pending, false, 0
		}
	}
}

// hold stops ks for the rest of the run at an entry the egress rate caps left no time for:
// nothing after it is pushed or committed, and the next run starts with it. Unlike a frozen
// key, a held one is no failure.
func (r *run) hold(ks *keyState) {
	ks.frozen = true
	r.frozen.add(ks.key)
}

// freeze stops ks for the rest of the run at an entry that could not be shipped, and reports
// it with reason.
func (r *run) freeze(ks *keyState, it item, reason string) {
	r.hold(ks)
	// A copy: the entry's memory is reused once its push is settled.
	line := it.rec.Entry.Line
	if len(line) > 200 {
		line = line[:200] + "…"
	} else {
		line = strings.Clone(line)
	}
	r.rep.Frozen = append(r.rep.Frozen, FrozenKey{
		Key: ks.key, Reason: reason, Timestamp: it.rec.Entry.Timestamp,
		Stream: it.rec.Entry.Labels.String(), Line: line,
	})
}
