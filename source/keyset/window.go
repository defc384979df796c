package keyset

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// seenEntry is one row remembered in the overlap window.
type seenEntry struct {
	h   uint64
	pos Position
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
func (w *window) confirm(h uint64, p Position) bool {
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
func (w *window) add(h uint64, p Position) {
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
	if n == 0 || !p.TS.Before(w.list[n-1].pos.TS) {
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
	for i > 0 && p.TS.Before(w.list[i-1].pos.TS) {
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
