package soql

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// cursorVersion is the version of the cursor format documented in the package comment.
const cursorVersion = 1

// keyKind says which field keys a row and how keys compare.
type keyKind int

const (
	// byID keys rows on Id: compared on the case-sensitive 15-character form, byte-wise (the
	// order of Salesforce's base-62 ids).
	byID keyKind = iota
	// byEventIdentifier keys Big Object rows on EventIdentifier (a UUID), compared without case.
	byEventIdentifier
)

func (k keyKind) field() string {
	if k == byEventIdentifier {
		return EventIdentifier
	}
	return "Id"
}

// norm returns the form of key that is compared and hashed.
func (k keyKind) norm(key string) string {
	if k == byEventIdentifier {
		return strings.ToLower(key)
	}
	if len(key) > 15 {
		return key[:15]
	}
	return key
}

// position is a point in (timestamp, key) order. An empty key lies before every key of its
// timestamp.
type position struct {
	ts  time.Time
	key string
}

// cmp orders two positions.
func (k keyKind) cmp(a, b position) int {
	if c := a.ts.Compare(b.ts); c != 0 {
		return c
	}
	return strings.Compare(k.norm(a.key), k.norm(b.key))
}

// hash48 is the 48-bit FNV-1a hash of a normalised key that the seen set stores.
func (k keyKind) hash48(key string) uint64 {
	h := uint64(14695981039346656037)
	n := k.norm(key)
	for i := 0; i < len(n); i++ {
		h ^= uint64(n[i])
		h *= 1099511628211
	}
	return h >> 16
}

// seenEntry is one row remembered in the overlap window.
type seenEntry struct {
	h   uint64
	pos position
}

// window is the overlap window's memory: the rows handled whose position lies in [from, pos].
// Hashes restored from a stored cursor are pending until the re-read confirms them (their
// positions are unknown until then); once the stream passes the stored position, pending hashes
// that were not re-read are forgotten.
//
// The encodings (enc, penc) are shared with the cursors handed out (cursorState): a byte once
// written is never changed. enc grows by append and loses its front by reslicing; a late insert,
// which changes the order, writes a new array, and so does every change of penc.
type window struct {
	list    []seenEntry // known rows, ascending: all[head:]
	all     []seenEntry // list's array from its start; dropFront only moves head
	head    int
	enc     []byte          // base64url of list's hashes, 8 characters each, kept in step with list
	encBase []byte          // enc's array from its start (enc is encBase[off:] with the front forgotten)
	gen     uint64          // counts changes of encBase and penc (see cursorShared)
	inList  map[uint64]bool // list's hashes for confirm; nil while no confirm needs them (see index)
	quiet   int             // rows added since confirm last used inList
	pending map[uint64]bool
	order   []uint64 // pending hashes in stored order (for a stable encoding)
	penc    *[]byte  // encoding of the hashes of order still pending (nil: none); a new one per change
}

func newWindow(stored []uint64) *window {
	w := &window{pending: make(map[uint64]bool, len(stored))}
	for _, h := range stored {
		if !w.pending[h] {
			w.pending[h] = true
			w.order = append(w.order, h)
		}
	}
	w.encodePending()
	return w
}

// encodePending writes penc anew from order and pending.
func (w *window) encodePending() {
	if len(w.pending) == 0 {
		w.penc = nil
		w.gen++
		return
	}
	b := make([]byte, 0, 8*len(w.pending))
	for _, h := range w.order {
		if w.pending[h] {
			b = appendHash(b, h)
		}
	}
	w.penc = &b
	w.gen++
}

// confirm reports whether h was remembered; a pending hash becomes a known entry at p.
func (w *window) confirm(h uint64, p position) bool {
	if w.index()[h] {
		return true
	}
	if w.pending[h] {
		delete(w.pending, h)
		w.encodePending()
		w.add(h, p)
		return true
	}
	return false
}

// index returns the set of list's hashes. Only confirm asks (for rows read again: the overlap
// re-read at a run's start, late rows), so the set is kept only while it is asked for: once as
// many rows as the list holds were added without a confirm, add drops it, and the next confirm
// builds it again. A row in order then costs no map update, and the rebuilds cost at most one
// insertion per row added.
func (w *window) index() map[uint64]bool {
	if w.inList == nil {
		w.inList = make(map[uint64]bool, len(w.list))
		for _, e := range w.list {
			w.inList[e.h] = true
		}
	}
	w.quiet = 0
	return w.inList
}

// add remembers a row (appended: callers add in ascending order, except late rows, which are
// few and are inserted in place).
func (w *window) add(h uint64, p position) {
	if w.inList != nil {
		w.quiet++
		if w.quiet > len(w.list) {
			w.inList = nil
		} else {
			w.inList[h] = true
		}
	}
	e := seenEntry{h: h, pos: p}
	n := len(w.list)
	if len(w.all) == cap(w.all) && w.head >= len(w.all)/2 {
		// Full, and at least half of it forgotten rows: move the list to the front instead of
		// letting append copy it into a larger array (a sliding window would do so every few
		// hundred rows).
		copy(w.all, w.list)
		clear(w.all[n:])
		w.all, w.head = w.all[:n], 0
	}
	w.all = append(w.all, seenEntry{})
	w.list = w.all[w.head:]
	if n == 0 || !p.ts.Before(w.list[n-1].pos.ts) {
		w.list[n] = e
		if len(w.enc)+8 > cap(w.enc) {
			// A new array, its front free of rows already forgotten: the bytes of the old one
			// stay as cursors handed out saw them.
			w.enc = append(make([]byte, 0, encCap(len(w.enc)+8)), w.enc...)
			w.encBase = w.enc
			w.gen++
		}
		w.enc = appendHash(w.enc, h)
		return
	}
	i := n
	for i > 0 && p.ts.Before(w.list[i-1].pos.ts) {
		i--
	}
	copy(w.list[i+1:], w.list[i:n])
	w.list[i] = e
	enc := make([]byte, 0, encCap(len(w.enc)+8))
	for _, x := range w.list {
		enc = appendHash(enc, x.h)
	}
	w.enc, w.encBase = enc, enc
	w.gen++
}

// encCap is the capacity of a new encoding array for n bytes: room for three times as many
// more, so that a full window, which forgets a row for every row it adds, writes a new array
// every few windows' worth of rows instead of (as append would grow it) every few hundred rows.
func encCap(n int) int { return 4*n + 512 }

// forgetPending drops the stored hashes that the re-read did not confirm.
func (w *window) forgetPending() {
	clear(w.pending)
	w.order, w.penc = nil, nil
	w.gen++
}

// dropFront forgets the oldest n known rows.
func (w *window) dropFront(n int) {
	if n == 0 {
		return
	}
	if w.inList != nil {
		for _, e := range w.list[:n] {
			delete(w.inList, e.h)
		}
	}
	w.head += n
	w.list = w.all[w.head:]
	w.enc = w.enc[8*n:]
}

// size is the number of remembered rows.
func (w *window) size() int { return len(w.list) + len(w.pending) }

// appendHash appends the 8 base64url characters of a 48-bit hash.
func appendHash(b []byte, h uint64) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for shift := 42; shift >= 0; shift -= 6 {
		b = append(b, alphabet[(h>>uint(shift))&63])
	}
	return b
}

func decodeSeen(s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	if len(s)%8 != 0 {
		return nil, errors.New("seen is not a list of 8-character hashes")
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("seen: %w", err)
	}
	out := make([]uint64, 0, len(raw)/6)
	for i := 0; i+6 <= len(raw); i += 6 {
		b := raw[i : i+6]
		out = append(out, uint64(b[0])<<40|uint64(b[1])<<32|uint64(b[2])<<24|uint64(b[3])<<16|uint64(b[4])<<8|uint64(b[5]))
	}
	return out, nil
}

// cursorJSON is the stored form (see the package comment).
type cursorJSON struct {
	V      int    `json:"v"`
	Field  string `json:"field"`
	By     string `json:"by,omitempty"`
	TS     string `json:"ts"`
	LastID string `json:"last_id"`
	FromTS string `json:"from_ts,omitempty"`
	FromID string `json:"from_id,omitempty"`
	Seen   string `json:"seen,omitempty"`
	MaxID  string `json:"max_id,omitempty"`
}

// state is a decoded cursor.
type state struct {
	pos   position
	from  *position // nil: the window is empty, reading starts just after pos
	seen  []uint64
	maxID string
}

// validKey checks a key read back from a cursor: an Id, or an EventIdentifier (any short text
// without control characters; it is quoted with QuoteString in queries).
func (k keyKind) validKey(key string) error {
	if k == byEventIdentifier {
		if key == "" || len(key) > 255 || !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%q is not an EventIdentifier", key)
		}
		return nil
	}
	return salesforce.ValidateID(key)
}

// decodeCursor reads a stored cursor; ok is false when there is none. Errors wrap
// source.ErrCursor.
func decodeCursor(raw json.RawMessage, field string, kind keyKind) (st state, ok bool, err error) {
	var c cursorJSON
	ok, err = source.DecodeCursor(raw, cursorVersion, &c)
	if err != nil || !ok {
		return state{}, ok, err
	}
	bad := func(format string, args ...any) (state, bool, error) {
		return state{}, false, errors.Join(source.ErrCursor, fmt.Errorf(format, args...))
	}
	if !strings.EqualFold(c.Field, field) {
		return bad("cursor follows field %q, the object is configured on %q", c.Field, field)
	}
	by := ""
	if kind == byEventIdentifier {
		by = EventIdentifier
	}
	if c.By != by {
		return bad("cursor is keyed on %q, the object on %q", c.By, kind.field())
	}
	t, err := salesforce.ParseDateTime(c.TS)
	if err != nil {
		return bad("ts: %v", err)
	}
	if err := kind.validKey(c.LastID); err != nil {
		return bad("last_id: %v", err)
	}
	st.pos = position{ts: t, key: c.LastID}
	if c.FromTS != "" {
		ft, err := salesforce.ParseDateTime(c.FromTS)
		if err != nil {
			return bad("from_ts: %v", err)
		}
		if c.FromID != "" {
			if err := kind.validKey(c.FromID); err != nil {
				return bad("from_id: %v", err)
			}
		}
		from := position{ts: ft, key: c.FromID}
		if kind.cmp(from, st.pos) > 0 {
			return bad("the window starts after the position")
		}
		st.from = &from
	} else if c.FromID != "" {
		return bad("from_id without from_ts")
	}
	if st.seen, err = decodeSeen(c.Seen); err != nil {
		return bad("%v", err)
	}
	if c.MaxID != "" {
		if kind != byID {
			return bad("max_id on a Big Object cursor")
		}
		if err := salesforce.ValidateID(c.MaxID); err != nil {
			return bad("max_id: %v", err)
		}
		st.maxID = c.MaxID
	}
	return st, true, nil
}

// cursorKey is what every cursor of a stream shares: the timestamp field and the key kind.
type cursorKey struct {
	field string
	kind  keyKind
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

// cursorShared is what consecutive cursors of a stream share: the key, the window's encoding
// array and pending encoding at the time, and max_id when it is not the row's own id. A new one
// is made when one of them changes: the window writes a new encoding array every few windows'
// worth of rows, the pending encoding changes only while stored ids are re-read.
type cursorShared struct {
	key   *cursorKey
	enc   []byte  // the window's encoding array from its start; bytes handed out are never written again
	pend  *[]byte // the window's penc (shared, never written again)
	maxID string
	gen   uint64 // the window's gen when made
}

// newCursorShared captures what cursors share in the current state; w may be nil.
func newCursorShared(key *cursorKey, w *window, maxID string) *cursorShared {
	sh := &cursorShared{key: key, maxID: maxID}
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
func sharedMaxID(pos position, maxID string) string {
	if maxID == pos.key {
		return ""
	}
	return maxID
}

// newCursorState captures the cursor of the current state; w and from may be nil.
func newCursorState(key *cursorKey, pos position, from *position, w *window, maxID string) *cursorState {
	c := new(cursorState)
	fillCursorState(c, newCursorShared(key, w, sharedMaxID(pos, maxID)), pos, from, w, maxID)
	return c
}

// fillCursorState writes the cursor of the current state into c; sh must fit the state (see
// cursorShared.fits).
func fillCursorState(c *cursorState, sh *cursorShared, pos position, from *position, w *window, maxID string) {
	*c = cursorState{sh: sh, posKey: pos.key, posMs: pos.ts.UnixMilli()}
	if from != nil {
		c.fromKey, c.fromMs = from.key, from.ts.UnixMilli()
		c.flags |= cursorHasFrom
	}
	if maxID != "" && maxID == pos.key {
		c.flags |= cursorMaxIsPos
	}
	if w != nil {
		off := cap(w.encBase) - cap(w.enc)
		c.off, c.end = uint32(off), uint32(off+len(w.enc)) //nolint:gosec // a window's encoding is far below 4 GiB
	}
}

// EncodeCursor returns the stored form (the JSON of cursorJSON, written directly).
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
	b := make([]byte, 0, 256+len(sh.key.field)+len(c.posKey)+len(maxID)+len(known)+len(pend))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, cursorVersion, 10)
	b = appendMember(b, "field", sh.key.field)
	if sh.key.kind == byEventIdentifier {
		b = appendMember(b, "by", EventIdentifier)
	}
	b = appendMember(b, "ts", salesforce.FormatDateTime(time.UnixMilli(c.posMs)))
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

// encodeCursor returns the stored form of a state at once.
func encodeCursor(field string, kind keyKind, pos position, from *position, w *window, maxID string) json.RawMessage {
	return newCursorState(&cursorKey{field: field, kind: kind}, pos, from, w, maxID).EncodeCursor()
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
