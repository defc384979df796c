package keyset

import (
	"log/slog"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// Events a Tracker counts through Options.Count.
const (
	// EventLateRows: a row arrived later than the overlap window reaches back; the late-row
	// probe found it and it is delivered late.
	EventLateRows = "late_rows"
	// EventLateRecovered: a row arrived late but inside the overlap window and was delivered.
	EventLateRecovered = "late_rows_recovered"
	// EventOverlapShrunk: the window held more rows than Options.MaxIDs and was shrunk.
	EventOverlapShrunk = "overlap_shrunk"
)

// Options configures a Tracker.
type Options struct {
	// Kind is the key of the rows.
	Kind Kind
	// Layout writes the cursors handed out.
	Layout *Layout
	// Overlap is the overlap window; zero or negative: none.
	Overlap time.Duration
	// MaxIDs caps the rows remembered in the window (at least 1 when there is a window).
	MaxIDs int
	// Probe says the reader sends the late-row probe (ByID only; see ProbeMax).
	Probe bool
	// Log receives the warnings about late rows and a shrunk window.
	Log *slog.Logger
	// Count counts the events above.
	Count func(event string, n int64)
}

// Tracker follows one key through one run: it classifies every row read (Consider), keeps the
// position, the window and max_id, and hands out the cursor of each row delivered (Cursor).
type Tracker struct {
	o Options
	// pos is the last row delivered in order (nil before the first), from the window's start,
	// win the rows remembered in [from, pos]. posAt and fromAt are what pos and from point to
	// once rows are read (setPos, setFrom): a new position per row would be an allocation per
	// row.
	pos, from     *Position
	posAt, fromAt Position
	win           *window
	maxID         string
	passed        bool // a row after the stored position was read
	shrunk        bool

	csh     *cursorShared // what the cursors handed out share (see cursorShared)
	cursors []cursorState // unused cursors of the current block (see Cursor)
}

// NewTracker returns the tracker of a key resuming from st (nil: no usable cursor).
func NewTracker(o Options, st *State) *Tracker {
	if o.Count == nil {
		o.Count = func(string, int64) {}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	t := &Tracker{o: o}
	if st != nil {
		t.setPos(st.Pos)
		t.maxID = st.MaxID
		if st.From != nil && o.Overlap > 0 {
			t.setFrom(*st.From)
		}
	}
	if o.Overlap > 0 {
		var seen []uint64
		if st != nil {
			seen = st.Seen
		}
		t.win = newWindow(seen)
	}
	return t
}

// Start returns where the run reads from, and whether that row is included: the window's start
// (included), or just after the position when the window is empty, or def (included) for a key
// without a cursor.
func (t *Tracker) Start(def time.Time) (Position, bool) {
	switch {
	case t.pos == nil:
		start := Position{TS: def}
		if t.win != nil {
			t.setFrom(start)
		}
		return start, true
	case t.from != nil:
		return *t.from, true
	}
	return *t.pos, false
}

// ProbeMax is where the late-row probe starts, (before Start) AND Id > ProbeMax, or "" when
// the run sends no probe (Options.Probe off, no cursor, or a cursor without max_id).
func (t *Tracker) ProbeMax() string {
	if t.pos == nil || !t.o.Probe || t.o.Kind != ByID {
		return ""
	}
	return t.maxID
}

// Remembered is how many rows the window may read again before the run passes the stored
// position (0 once it has), for sizing a query's LIMIT.
func (t *Tracker) Remembered() int {
	if t.passed || t.win == nil {
		return 0
	}
	return t.win.size()
}

// Consider classifies a row read: late (before the window: found by the late-row probe),
// already handled (in the window and remembered), late but inside the window, or new. It
// reports whether the row is to be delivered, with the cursor Cursor then returns.
func (t *Tracker) Consider(p Position) bool {
	k := t.o.Kind
	if t.pos != nil && t.beforeWindow(p) {
		t.bumpMax(p.Key)
		t.o.Count(EventLateRows, 1)
		t.o.Log.Warn("a row became visible later than the overlap window reaches back; delivering it late",
			"id", p.Key, "timestamp", salesforce.FormatDateTime(p.TS), "overlap", t.o.Overlap)
		return true
	}
	if t.pos != nil && k.Cmp(p, *t.pos) <= 0 {
		t.bumpMax(p.Key)
		if t.win == nil {
			// Reading starts after the position when there is no window; only the probe
			// reaches back, and it is handled above.
			return false
		}
		h := k.hash48(p.Key)
		if t.win.confirm(h, p) {
			return false
		}
		t.win.add(h, p)
		t.o.Count(EventLateRecovered, 1)
		t.o.Log.Info("a row became visible late, inside the overlap window; delivering it", "id", p.Key, "timestamp", salesforce.FormatDateTime(p.TS))
		return true
	}
	if !t.passed {
		t.passed = true
		if t.win != nil {
			t.win.forgetPending()
		}
	}
	t.bumpMax(p.Key)
	t.setPos(p)
	if t.win != nil {
		t.win.add(k.hash48(p.Key), p)
		t.slide()
	}
	return true
}

// beforeWindow reports whether p lies before what the window covers.
func (t *Tracker) beforeWindow(p Position) bool {
	if t.from != nil {
		return t.o.Kind.Cmp(p, *t.from) < 0
	}
	return t.o.Kind.Cmp(p, *t.pos) <= 0
}

// bumpMax raises max_id (ByID only).
func (t *Tracker) bumpMax(id string) {
	if t.o.Kind != ByID {
		return
	}
	if t.maxID == "" || strings.Compare(ByID.Norm(id), ByID.Norm(t.maxID)) > 0 {
		t.maxID = id
	}
}

// slide moves the window after a new row: rows older than pos − Overlap are forgotten, and
// past MaxIDs the oldest are, and the start moves up to the oldest kept row. The start never
// moves back: every row handled at or after it is remembered.
func (t *Tracker) slide() {
	w, k := t.win, t.o.Kind
	if t.from == nil {
		t.setFrom(w.list[len(w.list)-1].pos)
	}
	edge := Position{TS: t.pos.TS.Add(-t.o.Overlap)}
	i := 0
	for i < len(w.list) && w.list[i].pos.TS.Before(edge.TS) {
		i++
	}
	w.dropFront(i)
	if k.Cmp(*t.from, edge) < 0 {
		t.setFrom(edge)
	}
	if over := len(w.list) - t.o.MaxIDs; over > 0 {
		w.dropFront(over)
		front := w.list[0].pos
		if k.Cmp(*t.from, front) < 0 {
			t.setFrom(front)
		}
		if !t.shrunk {
			t.shrunk = true
			t.o.Count(EventOverlapShrunk, 1)
			t.o.Log.Warn("more rows than max_overlap_ids fall inside the overlap window; the window is shrunk to the newest of them",
				"max_overlap_ids", t.o.MaxIDs, "window_start", salesforce.FormatDateTime(front.TS), "overlap", t.o.Overlap)
		}
	}
}

// setPos moves the position to p.
func (t *Tracker) setPos(p Position) { t.posAt, t.pos = p, &t.posAt }

// setFrom moves the window's start to p.
func (t *Tracker) setFrom(p Position) { t.fromAt, t.from = p, &t.fromAt }

// cursorBlock is how many cursors are allocated at once: a block of 64 (4.5 KiB) stays in memory
// as long as one of its cursors does, which the job holds for at most two batches.
const cursorBlock = 64

// Cursor returns the cursor of the current state, after the row Consider last accepted: a
// lazy position that shares the window's encodings and is encoded only if the job commits it.
func (t *Tracker) Cursor() source.Position {
	var from *Position
	if t.win != nil {
		from = t.from
	}
	if len(t.cursors) == 0 {
		// The cursors of consecutive rows are allocated together: one allocation per
		// cursorBlock rows instead of one per row.
		t.cursors = make([]cursorState, cursorBlock)
	}
	shMax := sharedMaxID(*t.pos, t.maxID)
	if t.csh == nil || !t.csh.fits(t.win, shMax) {
		t.csh = newCursorShared(t.o.Layout, t.win, shMax)
	}
	c := &t.cursors[0]
	t.cursors = t.cursors[1:]
	fillCursorState(c, t.csh, *t.pos, from, t.win, t.maxID)
	return source.LazyCursor(c)
}
