package keyset

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// maxIDs is the window size of these tests (the SOQL source's default max_overlap_ids).
const maxIDs = 500

// loginTime is the layout of a LoginHistory cursor of the SOQL source.
var loginTime = NewLayout(ByID, 1, "ts", "field", "LoginTime")

// testCursor is a LoginHistory cursor as encoding/json writes and reads it.
type testCursor struct {
	V      int    `json:"v"`
	Field  string `json:"field"`
	TS     string `json:"ts"`
	LastID string `json:"last_id"`
	Members
}

// decodeTest reads back a cursor written with loginTime.
func decodeTest(t *testing.T, raw string) (State, bool, error) {
	t.Helper()
	var c testCursor
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return State{}, false, err
	}
	st, err := loginTime.Decode(c.Members, c.TS, c.LastID)
	return st, err == nil, err
}

// id is the Id of test row i.
func id(i int) string { return fmt.Sprintf("0Ya%012d", i) }

// storedWindow is the window a run restores from a cursor that remembers the n rows from
// id(first) on, all pending, and their hashes in stored order.
func storedWindow(first, n int) ([]uint64, *window) {
	var stored []uint64
	for i := range n {
		stored = append(stored, ByID.hash48(id(first+i)))
	}
	return stored, newWindow(stored)
}

// handed is a cursor handed out, with its encoding then.
type handed struct {
	c    *cursorState
	json string
}

// TestHandedOutCursorsNeverChange: a cursor handed out with a row shares the window's encodings;
// whatever the window does afterwards (rows added in order and late, the front dropped, pending
// ids confirmed or forgotten), the cursor encodes exactly as it did when it was handed out.
func TestHandedOutCursorsNeverChange(t *testing.T) {
	ts := time.Date(2026, 6, 30, 11, 0, 0, 0, time.UTC)
	stored, w := storedWindow(1000, 6)
	var all []handed
	hand := func(step string, i int) {
		pos := Position{TS: ts.Add(time.Duration(i) * time.Second), Key: id(i)}
		from := Position{TS: ts}
		c := newCursorState(loginTime, pos, &from, w, id(i))
		all = append(all, handed{c, string(c.EncodeCursor())})
		for j, h := range all {
			if got := string(h.c.EncodeCursor()); got != h.json {
				t.Fatalf("after %s: cursor %d changed:\n now  %s\n then %s", step, j, got, h.json)
			}
		}
	}
	for i := range 40 {
		w.add(ByID.hash48(id(i)), Position{TS: ts.Add(time.Duration(i) * time.Second), Key: id(i)})
		hand("an add in order", i)
		if i%3 == 0 && len(w.list) > 4 {
			w.dropFront(2)
			hand("dropping the front", i)
		}
		if i%7 == 0 && i > 0 {
			// A late row: older than the newest remembered one, inserted in place.
			late := 500 + i
			w.add(ByID.hash48(id(late)), Position{TS: ts.Add(time.Duration(i-2)*time.Second + time.Millisecond), Key: id(late)})
			hand("a late insert", i)
		}
		if i < len(stored) {
			if !w.confirm(stored[i], Position{TS: ts.Add(time.Duration(i) * time.Second), Key: id(1000 + i)}) {
				t.Fatalf("stored id %d was not pending", i)
			}
			hand("confirming a pending id", i)
		}
		if i == 20 {
			w.forgetPending()
			hand("forgetting pending ids", i)
		}
	}
	// And the encoding itself is the window's: the last cursor carries every remembered id.
	last := all[len(all)-1]
	st, ok, err := decodeTest(t, last.json)
	if err != nil || !ok || len(st.Seen) != w.size() {
		t.Fatalf("decoded %d ids (%v), the window remembers %d", len(st.Seen), err, w.size())
	}
}

// TestSharedCursorsEncodeAsFresh follows a stream's cursors as it hands them out: consecutive
// cursors share one cursorShared until the window writes a new encoding array, its pending ids
// change or max_id stops being the row's own id. Each one encodes exactly as a cursor built on
// its own from the same state (times with sub-millisecond parts and before 1970 included), and
// still does after thousands of rows more.
func TestSharedCursorsEncodeAsFresh(t *testing.T) {
	key := loginTime
	base := time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC) // crosses the Unix epoch
	stored, w := storedWindow(100000, 8)
	var all []handed
	var sh *cursorShared
	shared, made := 0, 0
	maxID := ""
	for i := range 3000 {
		// 1.5 ms apart: timestamps with sub-millisecond parts, which the cursor writes truncated.
		pos := Position{TS: base.Add(time.Duration(i) * 1500 * time.Microsecond), Key: id(i)}
		switch {
		case i < len(stored):
			w.confirm(stored[i], pos)
		case i == 40:
			w.forgetPending()
		case i%97 == 0:
			// A late row (older than the newest remembered), inserted in place.
			w.add(ByID.hash48(id(200000+i)), Position{TS: pos.TS.Add(-3 * time.Millisecond), Key: id(200000 + i)})
		}
		w.add(ByID.hash48(pos.Key), pos)
		if over := w.size() - maxIDs; over > 0 && len(w.list) >= over {
			w.dropFront(over)
		}
		switch i % 50 {
		case 0:
			maxID = id(900000 + i) // a larger id seen earlier: max_id is not the row's own
		case 10:
			maxID = pos.Key
		}
		if maxID < pos.Key {
			maxID = pos.Key
		}
		from := w.list[0].pos
		shMax := sharedMaxID(pos, maxID)
		if sh == nil || !sh.fits(w, shMax) {
			sh = newCursorShared(key, w, shMax)
			made++
		} else {
			shared++
		}
		c := new(cursorState)
		fillCursorState(c, sh, pos, &from, w, maxID)
		want := referenceCursor(t, pos, from, w, maxID)
		if got := string(c.EncodeCursor()); got != want {
			t.Fatalf("row %d: a shared cursor encodes\n %s\nwant (encoding/json of the state):\n %s", i, got, want)
		}
		all = append(all, handed{c, want})
	}
	for j, h := range all {
		if got := string(h.c.EncodeCursor()); got != h.json {
			t.Fatalf("cursor %d changed:\n now  %s\n then %s", j, got, h.json)
		}
	}
	if shared < 10*made {
		t.Errorf("cursors shared a cursorShared %d times and made %d: sharing is not what happens", shared, made)
	}
	// The time is written truncated to the millisecond, as the full time.Time was.
	last := all[len(all)-1]
	st, ok, err := decodeTest(t, last.json)
	wantTS := base.Add(2999 * 1500 * time.Microsecond).Truncate(time.Millisecond)
	if err != nil || !ok || !st.Pos.TS.Equal(wantTS) {
		t.Fatalf("decoded ts %v (%v), want %v", st.Pos.TS, err, wantTS)
	}
}

// referenceCursor is the stored form of a LoginTime cursor written by encoding/json from the
// state itself (the window's remembered rows, then its pending ids in stored order).
func referenceCursor(t *testing.T, pos, from Position, w *window, maxID string) string {
	t.Helper()
	var seen []byte
	for _, e := range w.list {
		seen = appendHash(seen, e.h)
	}
	for _, h := range w.order {
		if w.pending[h] {
			seen = appendHash(seen, h)
		}
	}
	const layout = "2006-01-02T15:04:05.000Z"
	b, err := json.Marshal(testCursor{V: 1, Field: "LoginTime", TS: pos.TS.UTC().Format(layout), LastID: pos.Key,
		Members: Members{FromTS: from.TS.UTC().Format(layout), FromID: from.Key, Seen: string(seen), MaxID: maxID}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fullWindow returns a window holding maxIDs rows one millisecond apart from ts.
func fullWindow(ts time.Time) *window {
	w := newWindow(nil)
	for i := range maxIDs {
		id := fmt.Sprintf("0Ya%012d", i)
		w.add(ByID.hash48(id), Position{TS: ts.Add(time.Duration(i) * time.Millisecond), Key: id})
	}
	return w
}

// BenchmarkCursor measures what the stream spends per row on its cursor with a full overlap
// window: the window slides by one row and a cursor is handed out (encoded only if committed).
func BenchmarkCursor(b *testing.B) {
	ts := time.Date(2026, 6, 30, 11, 0, 0, 0, time.UTC)
	w := fullWindow(ts)
	from := Position{TS: ts}
	b.ReportAllocs()
	i := maxIDs
	var c *cursorState
	for b.Loop() {
		id := fmt.Sprintf("0Ya%012d", i)
		pos := Position{TS: ts.Add(time.Duration(i) * time.Millisecond), Key: id}
		w.add(ByID.hash48(id), pos)
		w.dropFront(1)
		c = newCursorState(loginTime, pos, &from, w, id)
		i++
	}
	b.ReportMetric(float64(len(c.EncodeCursor())), "bytes/cursor")
}

// BenchmarkCursorEncode measures encoding one committed cursor with a full overlap window.
func BenchmarkCursorEncode(b *testing.B) {
	ts := time.Date(2026, 6, 30, 11, 0, 0, 0, time.UTC)
	w := fullWindow(ts)
	from := Position{TS: ts}
	pos := Position{TS: ts.Add(time.Second), Key: "0Ya000000000999AAA"}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(newCursorState(loginTime, pos, &from, w, pos.Key).EncodeCursor())
	}
	b.ReportMetric(float64(n), "bytes/cursor")
}

// TestWindowSlidesInPlace follows a window through thousands of rows, dropping its front as a
// full overlap window does, with late rows inserted in place: the remembered rows, their order
// and their encoding stay those of a plain list, while the list moves to the front of its
// array instead of growing a new one.
func TestWindowSlidesInPlace(t *testing.T) {
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	w := newWindow(nil)
	var want []seenEntry
	var arrays []*seenEntry
	for i := range 5000 {
		p := Position{TS: ts.Add(time.Duration(i) * time.Second), Key: fmt.Sprintf("005000000000%03dAAA", i%1000)}
		if i%97 == 0 && len(want) > 3 {
			p.TS = want[len(want)-3].pos.TS.Add(time.Millisecond) // late: before the newest rows
		}
		h := uint64(i + 1)
		w.add(h, p)
		at := len(want)
		for at > 0 && p.TS.Before(want[at-1].pos.TS) {
			at--
		}
		want = append(want[:at], append([]seenEntry{{h: h, pos: p}}, want[at:]...)...)
		if over := len(want) - 500; over > 0 {
			w.dropFront(over)
			want = want[over:]
		}
		if len(w.list) != len(want) {
			t.Fatalf("row %d: the window holds %d rows, want %d", i, len(w.list), len(want))
		}
		var enc []byte
		for j := range want {
			if w.list[j] != want[j] {
				t.Fatalf("row %d: entry %d is %v, want %v", i, j, w.list[j], want[j])
			}
			if w.inList != nil && !w.inList[want[j].h] {
				t.Fatalf("row %d: hash %x is not marked remembered", i, want[j].h)
			}
			enc = appendHash(enc, want[j].h)
		}
		if string(w.enc) != string(enc) {
			t.Fatalf("row %d: encoding differs from the rows'", i)
		}
		// The set of hashes, when kept, is exactly the list's; confirms come in bursts (rows
		// 1000-1999) or not at all, and the set is kept only while they come.
		if w.inList != nil && len(w.inList) != len(want) {
			t.Fatalf("row %d: %d hashes marked remembered, want %d", i, len(w.inList), len(want))
		}
		if i >= 1000 && i < 2000 && i%7 == 0 {
			w.index()
		}
		if i >= 2000+2*500 && w.inList != nil {
			t.Fatalf("row %d: the set of hashes is kept %d rows after the last confirm", i, i-2000)
		}
		end := w.list[:cap(w.list)]
		if a := &end[len(end)-1]; i >= 1000 && (len(arrays) == 0 || arrays[len(arrays)-1] != a) {
			arrays = append(arrays, a) // the array's last element tells one array from another
		}
	}
	// Long after the last confirm (the set dropped), a confirm finds every remembered row and
	// nothing else.
	for _, e := range want {
		if !w.confirm(e.h, e.pos) {
			t.Fatalf("confirm(%x) of a remembered row = false", e.h)
		}
	}
	if w.confirm(1<<47, want[0].pos) {
		t.Fatal("confirm of a row never added = true")
	}
	if set := w.index(); len(set) != len(want) {
		t.Fatalf("%d hashes marked remembered, want %d", len(set), len(want))
	}
	for _, e := range want {
		if !w.inList[e.h] {
			t.Fatalf("hash %x is not marked remembered", e.h)
		}
	}
	if len(arrays) != 1 {
		t.Fatalf("the window's rows moved to %d arrays over 4000 rows of a full window: it grows instead of sliding", len(arrays))
	}
}
