package keyset

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// Members are the members the window adds to a source's cursor (see the package comment). A
// source embeds them in the struct its cursor is decoded into, and checks them with
// Layout.Decode.
type Members struct {
	FromTS string `json:"from_ts,omitempty"`
	FromID string `json:"from_id,omitempty"`
	Seen   string `json:"seen,omitempty"`
	MaxID  string `json:"max_id,omitempty"`
}

// State is a decoded cursor: where a run resumes.
type State struct {
	Pos   Position
	From  *Position // nil: the window is empty, reading starts just after Pos
	Seen  []uint64  // the hashes of the rows remembered in [From, Pos]
	MaxID string    // the late-row probe's start (ByID only)
}

// Layout is how a source writes (and reads back) its cursors: the members before the position
// (the version and what the source checks itself), and the name of the position's timestamp
// member. The position's key is last_id; the window's Members follow.
type Layout struct {
	head []byte
	ts   string
	kind Kind
}

// NewLayout returns the layout of cursors {"v":version,<head>,"<ts>":…,"last_id":…,<Members>};
// head is name, value pairs of string members.
func NewLayout(kind Kind, version int, ts string, head ...string) *Layout {
	b := strconv.AppendInt([]byte(`{"v":`), int64(version), 10)
	for i := 0; i+1 < len(head); i += 2 {
		b = appendMember(b, head[i], head[i+1])
	}
	return &Layout{head: b, ts: ts, kind: kind}
}

// Encode returns the stored form of a state, as a run starting from it would write it before
// reading anything.
func (l *Layout) Encode(st State) json.RawMessage {
	w := newWindow(st.Seen)
	return newCursorState(l, st.Pos, st.From, w, st.MaxID).EncodeCursor()
}

// Decode checks a decoded cursor's position, its timestamp member ts and last_id, and the
// window's members m, and returns the state they describe: the reverse of Encode. Errors wrap
// source.ErrCursor.
func (l *Layout) Decode(m Members, ts, lastID string) (State, error) {
	bad := func(format string, args ...any) (State, error) {
		return State{}, errors.Join(source.ErrCursor, fmt.Errorf(format, args...))
	}
	kind := l.kind
	t, err := salesforce.ParseDateTime(ts)
	if err != nil {
		return bad("%s: %w", l.ts, err)
	}
	if err := kind.ValidKey(lastID); err != nil {
		return bad("last_id: %w", err)
	}
	pos := Position{TS: t, Key: lastID}
	st := State{Pos: pos}
	if m.FromTS != "" {
		ft, err := salesforce.ParseDateTime(m.FromTS)
		if err != nil {
			return bad("from_ts: %v", err)
		}
		if m.FromID != "" {
			if err := kind.ValidKey(m.FromID); err != nil {
				return bad("from_id: %v", err)
			}
		}
		from := Position{TS: ft, Key: m.FromID}
		if kind.Cmp(from, pos) > 0 {
			return bad("the window starts after the position")
		}
		st.From = &from
	} else if m.FromID != "" {
		return bad("from_id without from_ts")
	}
	if st.Seen, err = decodeSeen(m.Seen); err != nil {
		return bad("%v", err)
	}
	if m.MaxID != "" {
		if kind != ByID {
			return bad("max_id on a cursor keyed on %s", kind.Field())
		}
		if err := salesforce.ValidateID(m.MaxID); err != nil {
			return bad("max_id: %v", err)
		}
		st.MaxID = m.MaxID
	}
	return st, nil
}

// cursorState is a stream's cursor after one row, handed out with the row as a lazy
// source.Position: a small struct (72 bytes) sharing the window's encodings instead of a copy
// of up to max_overlap_ids hashes per row. The job encodes only the positions it commits.
type cursorState struct {
	sh      *cursorShared
	posKey  string
	fromKey string
	// posMs and fromMs are the positions' timestamps in Unix milliseconds: the cursor writes
	// them to the millisecond (salesforce.FormatDateTime), so nothing finer is kept.
	posMs, fromMs int64
	off, end      uint32 // the window's known hashes: sh.enc[off:end]
	flags         uint8
}

// Flags of a cursorState.
const (
	cursorHasFrom  = 1 << iota // from is set
	cursorMaxIsPos             // max_id is the row's own id (posKey), not sh.maxID
)

// cursorShared is what consecutive cursors of a stream share: the layout, the window's encoding
// array and pending encoding at the time, and max_id when it is not the row's own id. A new one
// is made when one of them changes: the window writes a new encoding array every few windows'
// worth of rows, the pending encoding changes only while stored ids are re-read.
type cursorShared struct {
	layout *Layout
	enc    []byte  // the window's encoding array from its start; bytes handed out are never written again
	pend   *[]byte // the window's penc (shared, never written again)
	maxID  string
	gen    uint64 // the window's gen when made
}

// newCursorShared captures what cursors share in the current state; w may be nil.
func newCursorShared(l *Layout, w *window, maxID string) *cursorShared {
	sh := &cursorShared{layout: l, maxID: maxID}
	if w != nil {
		sh.enc, sh.pend, sh.gen = w.encBase, w.penc, w.gen
	}
	return sh
}

// fits reports whether sh is what a cursor of the current state shares (maxID: as
// newCursorShared takes it).
func (sh *cursorShared) fits(w *window, maxID string) bool {
	return sh.maxID == maxID && (w == nil || sh.gen == w.gen)
}

// sharedMaxID is the maxID a cursorShared carries for a cursor at pos: none when max_id is
// the row's own id (the cursor says so with cursorMaxIsPos).
func sharedMaxID(pos Position, maxID string) string {
	if maxID == pos.Key {
		return ""
	}
	return maxID
}

// newCursorState captures the cursor of the current state; w and from may be nil.
func newCursorState(l *Layout, pos Position, from *Position, w *window, maxID string) *cursorState {
	c := new(cursorState)
	fillCursorState(c, newCursorShared(l, w, sharedMaxID(pos, maxID)), pos, from, w, maxID)
	return c
}

// fillCursorState writes the cursor of the current state into c; sh must fit the state (see
// cursorShared.fits).
func fillCursorState(c *cursorState, sh *cursorShared, pos Position, from *Position, w *window, maxID string) {
	*c = cursorState{sh: sh, posKey: pos.Key, posMs: pos.TS.UnixMilli()}
	if from != nil {
		c.fromKey, c.fromMs = from.Key, from.TS.UnixMilli()
		c.flags |= cursorHasFrom
	}
	if maxID != "" && maxID == pos.Key {
		c.flags |= cursorMaxIsPos
	}
	if w != nil {
		off := cap(w.encBase) - cap(w.enc)
		c.off, c.end = uint32(off), uint32(off+len(w.enc)) //nolint:gosec // a window's encoding is far below 4 GiB
	}
}

// EncodeCursor returns the stored form, written directly.
func (c *cursorState) EncodeCursor() json.RawMessage {
	sh := c.sh
	known := sh.enc[c.off:c.end]
	var pend []byte
	if sh.pend != nil {
		pend = *sh.pend
	}
	maxID := sh.maxID
	if c.flags&cursorMaxIsPos != 0 {
		maxID = c.posKey
	}
	l := sh.layout
	b := make([]byte, 0, 256+len(l.head)+len(c.posKey)+len(maxID)+len(known)+len(pend))
	b = append(b, l.head...)
	b = appendMember(b, l.ts, salesforce.FormatDateTime(time.UnixMilli(c.posMs)))
	b = appendMember(b, "last_id", c.posKey)
	if c.flags&cursorHasFrom != 0 {
		b = appendMember(b, "from_ts", salesforce.FormatDateTime(time.UnixMilli(c.fromMs)))
		if c.fromKey != "" {
			b = appendMember(b, "from_id", c.fromKey)
		}
	}
	if len(known)+len(pend) > 0 {
		b = append(b, `,"seen":"`...)
		b = append(b, known...)
		b = append(b, pend...)
		b = append(b, '"')
	}
	if maxID != "" {
		b = appendMember(b, "max_id", maxID)
	}
	return append(b, '}')
}

// appendMember appends ,"name":"value" with value escaped as JSON.
func appendMember(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			q, _ := json.Marshal(value) // rare: keys are ids, UUIDs and API names
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, value...)
	return append(b, '"')
}
