package shape

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/sf2loki/sf2loki/loki"
)

// shaped is one entry with its line memory and a copy of what it held when handed out.
type shaped struct {
	e     loki.Entry
	lines Lines
	line  string
	meta  string
}

func shapeRows(t *testing.T, p *Plan, r *Record, from, n int) []shaped {
	t.Helper()
	out := make([]shaped, 0, n)
	for i := from; i < from+n; i++ {
		e, skip := p.Shape(row(r, "A", fmt.Sprintf("%04d%s", i, strings.Repeat("a", 1000)), "B", fmt.Sprint("b", i)))
		if skip != "" {
			t.Fatalf("row %d skipped: %s", i, skip)
		}
		out = append(out, shaped{e: e, lines: p.Lines(), line: strings.Clone(e.Line), meta: strings.Clone(e.Metadata[0].Value)})
	}
	return out
}

// in reports whether s lies in c's memory.
func in(s string, c *lineChunk) bool {
	if c == nil || len(s) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(c.buf[:cap(c.buf)])))
	at := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	return at >= base && at < base+uintptr(cap(c.buf))
}

// writesInto shapes n rows from row from and reports whether a line of one lies in c.
func writesInto(t *testing.T, p *Plan, r *Record, from, n int, c *lineChunk) bool {
	t.Helper()
	for _, s := range shapeRows(t, p, r, from, n) {
		if in(s.e.Line, c) {
			return true
		}
	}
	return false
}

func intact(t *testing.T, what string, es []shaped) {
	t.Helper()
	for i, s := range es {
		if s.e.Line != s.line || s.e.Metadata[0].Value != s.meta {
			t.Fatalf("%s: entry %d was overwritten: %.40q…, metadata %q", what, i, s.e.Line, s.e.Metadata[0].Value)
		}
	}
}

// TestLinesReusedOnlyOnceEveryLineIsReleased: a chunk whose every line was released is written
// again by later rows; a chunk with one line not released is never written again, however many
// rows follow, until that line is released too.
func TestLinesReusedOnlyOnceEveryLineIsReleased(t *testing.T) {
	s := mustShaper(t, Options{Metadata: []string{"B"}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A", "B"}})
	var r Record
	first := shapeRows(t, p, &r, 0, 200) // about three chunks of 1 KiB lines
	chunkA, chunkB := first[0].lines.c, first[100].lines.c
	if chunkA == nil || chunkB == nil || chunkA == chunkB || first[len(first)-1].lines.c == chunkB {
		t.Fatalf("rows 0 and 100 lie in chunks %p and %p: want two different chunks, both full", chunkA, chunkB)
	}
	var keptA shaped // one line of chunk A is still referred to
	for _, s := range first {
		switch {
		case s.lines.c == chunkA && keptA.lines.c == nil:
			keptA = s
		case s.lines.c == chunkA, s.lines.c == chunkB:
			s.lines.Release()
		}
	}
	next := shapeRows(t, p, &r, 200, 400)
	reusedB := false
	for i, s := range next {
		if in(s.e.Line, chunkA) || in(s.e.Metadata[0].Value, chunkA) {
			t.Fatalf("row %d was written into a chunk whose line %q is not released", 200+i, keptA.line[:8])
		}
		reusedB = reusedB || (in(s.e.Line, chunkB) && s.lines.c == chunkB)
	}
	if !reusedB {
		t.Fatal("the chunk whose every line was released was not reused")
	}
	intact(t, "the line not released", []shaped{keptA})
	var unreleased []shaped // everything but chunks A and B stays held
	for _, s := range first {
		if s.lines.c != chunkA && s.lines.c != chunkB {
			unreleased = append(unreleased, s)
		}
	}
	intact(t, "the lines not released", unreleased)
	intact(t, "the rows written into the reused chunk", next)
	keptA.lines.Release()
	if !writesInto(t, p, &r, 600, 400, chunkA) {
		t.Fatal("the chunk was not reused once its last line was released")
	}
}

// TestLinesZeroWhenNothingIsHeld: a skipped row and a line that outgrew the chunk (memory of its
// own) hold no line memory; releasing their zero Lines does nothing.
func TestLinesZeroWhenNothingIsHeld(t *testing.T) {
	s := mustShaper(t, Options{Transforms: []Transform{{Op: OpDropRow, Name: "d", Match: map[string]string{"A": "drop"}}}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A"}})
	var r Record
	if _, skip := p.Shape(row(&r, "A", "keep")); skip != "" || p.Lines().c == nil {
		t.Fatalf("a shaped row holds no line memory (skip %q)", skip)
	}
	if _, skip := p.Shape(row(&r, "A", "drop")); skip == "" || p.Lines().c != nil {
		t.Fatalf("a skipped row (skip %q) holds line memory", skip)
	}
	e, _ := p.Shape(row(&r, "A", strings.Repeat("\x01", 4*lineChunkSize))) // escaped: six times its size
	if l := p.Lines(); l.c != nil && in(e.Line, l.c) && cap(l.c.buf) == lineChunkSize {
		t.Fatalf("a line longer than a chunk lies in a pooled chunk")
	}
	Lines{}.Release()
}

// TestLinesReleasedTwicePanics: a second release of one entry would let its chunk be written
// while another line in it is still referred to; it is caught where it can be.
func TestLinesReleasedTwicePanics(t *testing.T) {
	s := mustShaper(t, Options{})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A"}})
	var r Record
	p.Shape(row(&r, "A", "x"))
	l := p.Lines()
	p.Shape(row(&r, "A", strings.Repeat("y", lineChunkSize))) // the plan moves on to a new chunk
	l.Release()                                               // the chunk returns to the pool
	defer func() {
		if recover() == nil {
			t.Fatal("a second release did not panic")
		}
	}()
	l.Release()
}

// TestLinesReleasedWhileWrittenReusedAfterPlanLeaves: lines released while their plan still
// writes into their chunk free nothing (the plan goes on after them); once the plan has moved
// on, the chunk is reused, and a chunk with a line still held is not.
func TestLinesReleasedWhileWrittenReusedAfterPlanLeaves(t *testing.T) {
	s := mustShaper(t, Options{Metadata: []string{"B"}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A", "B"}})
	var r Record
	early := shapeRows(t, p, &r, 0, 10) // 10 KiB of a 64 KiB chunk
	chunk := early[0].lines.c
	for _, e := range early {
		if e.lines.c != chunk {
			t.Fatalf("the first ten rows lie in more than one chunk")
		}
		e.lines.Release()
	}
	more := shapeRows(t, p, &r, 10, 20) // still the same chunk, after the released lines
	intact(t, "the released lines, while the plan writes after them", early)
	for _, e := range more {
		if e.lines.c == chunk {
			e.lines.Release()
		}
	}
	rest := shapeRows(t, p, &r, 30, 100) // the plan fills the chunk and leaves it
	if rest[len(rest)-1].lines.c == chunk {
		t.Fatalf("the plan did not move on from its first chunk")
	}
	held := rest[0]
	if held.lines.c != chunk {
		t.Fatalf("row 30 does not lie in the first chunk")
	}
	for _, e := range rest[1:] {
		if e.lines.c == chunk {
			e.lines.Release()
		}
	}
	if writesInto(t, p, &r, 130, 200, chunk) {
		t.Fatalf("row written into a chunk with a line still held")
	}
	intact(t, "the line still held", []shaped{held})
	held.lines.Release()
	if !writesInto(t, p, &r, 330, 200, chunk) {
		t.Fatal("a chunk whose lines were all released, some while it was written, was not reused")
	}
	if got := s.ChunksReused(); got < 1 {
		t.Fatalf("ChunksReused = %d", got)
	}
}
