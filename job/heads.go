package job

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/store"
)

// HeadCounterPrefix starts the names of the counters that keep, in the checkpoint document,
// the newest timestamp shipped to each stream: "stream_head:" + the stream's id (see StreamID).
// The counter's value is the timestamp in Unix nanoseconds. They are committed with the cursors
// through the epoch-conditioned writer, so a fenced run can never move them.
const HeadCounterPrefix = "stream_head:"

// DefaultMaxStreamHeads bounds how many stream heads the checkpoint document keeps: about
// 260 bytes each in the indented document for a 110-byte label set, 130 KB at the bound (an
// eighth of a ConfigMap's 1 MiB).
const DefaultMaxStreamHeads = 500

// StreamID identifies a stream at a destination: the canonical label string, prefixed by the
// destination's name when there is one ("" is the job's only sink). Heads of different
// destinations never mix: a stream's head at one receiver says nothing about another.
func StreamID(destination string, l loki.Labels) string {
	if destination == "" {
		return l.String()
	}
	return destination + "|" + l.String()
}

// heads is the ledger of stream heads: for each stream, the newest timestamp this job has
// pushed to it that the receiver may have stored (accepted, or sent without an answer). It is
// loaded from the claimed document's counters and committed with every push's cursors.
//
// A head that is missing or too low lets the job push an entry the receiver refuses as
// too_far_behind; the job then re-stamps it and pushes it again, so a missing head costs a
// request, never an entry. A head that is too high costs only a re-stamp the receiver did not
// need. That is why the ledger may be bounded: when it holds more than max heads, the oldest
// are forgotten; and a head older than the oldest timestamp the receiver accepts plus the
// ordering window can never refuse anything again, so it is forgotten first.
type heads struct {
	ns      map[string]int64 // stream id -> head (Unix ns)
	changed map[string]bool  // raised since the last commit
	removed map[string]bool  // forgotten since the last commit (to delete from the document)
	max     int
}

// loadHeads reads the heads from the document's counters.
func loadHeads(stored map[string]store.Counter, max int) *heads {
	if max <= 0 {
		max = DefaultMaxStreamHeads
	}
	h := &heads{ns: map[string]int64{}, changed: map[string]bool{}, removed: map[string]bool{}, max: max}
	for name, c := range stored {
		if id, ok := strings.CutPrefix(name, HeadCounterPrefix); ok {
			h.ns[id] = c.Value
		}
	}
	return h
}

// get returns the head of a stream and whether the ledger knows it.
func (h *heads) get(id string) (int64, bool) {
	ns, ok := h.ns[id]
	return ns, ok
}

// raise records that the stream may now hold an entry at ns.
func (h *heads) raise(id string, ns int64) {
	if cur, ok := h.ns[id]; ok && cur >= ns {
		return
	}
	h.ns[id] = ns
	h.changed[id] = true
	delete(h.removed, id)
}

// prune forgets the heads at or below expired (they can no longer refuse anything) and then,
// above the bound, the oldest heads.
func (h *heads) prune(expired int64) {
	for id, ns := range h.ns {
		if ns <= expired {
			h.forget(id)
		}
	}
	if len(h.ns) <= h.max {
		return
	}
	ids := make([]string, 0, len(h.ns))
	for id := range h.ns {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(h.ns[a], h.ns[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, id := range ids[:len(ids)-h.max] {
		h.forget(id)
	}
}

func (h *heads) forget(id string) {
	delete(h.ns, id)
	delete(h.changed, id)
	h.removed[id] = true
}

// change is what the next commit writes: the raised heads and the forgotten ones.
func (h *heads) change() (set map[string]store.Counter, del []string) {
	if len(h.changed) > 0 {
		set = make(map[string]store.Counter, len(h.changed))
		for id := range h.changed {
			set[HeadCounterPrefix+id] = store.Counter{Value: h.ns[id]}
		}
	}
	for id := range h.removed {
		del = append(del, HeadCounterPrefix+id)
	}
	slices.Sort(del)
	return set, del
}

// committed marks the last change as written.
func (h *heads) committed() {
	clear(h.changed)
	clear(h.removed)
}
