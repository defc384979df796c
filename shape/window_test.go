package shape

import (
	"bytes"
	"testing"
)

// TestAppendWindowAppendsWhatAppendDoes checks appendWindow against append for every length
// around the window, with sources and destinations that have the window's room beyond their
// ends and ones that have not: the result is always out's bytes, then src[:n], and nothing
// else; the bytes out already held are never changed.
func TestAppendWindowAppendsWhatAppendDoes(t *testing.T) {
	backing := make([]byte, 128)
	for i := range backing {
		backing[i] = byte('a' + i%26)
	}
	for n := 0; n <= window+8; n++ {
		for _, srcCap := range []int{n, n + 1, window, window + 16} {
			if srcCap < n {
				continue
			}
			src := backing[7 : 7+n : 7+srcCap]
			for _, room := range []int{0, n, window - 1, window, 2 * window} {
				out := make([]byte, 3, 3+room)
				copy(out, "{\"x")
				want := append(append([]byte(nil), out...), src[:n]...)
				got := appendWindow(out, src, n)
				if !bytes.Equal(got, want) {
					t.Fatalf("n=%d srcCap=%d room=%d: got %q, want %q", n, srcCap, room, got, want)
				}
			}
		}
	}
}

// TestLinesWithShortAndLongValuesAreExact shapes rows whose values are shorter than, as long as
// and longer than appendWindow's window, next to member names shorter and longer than it, so that
// a move of the whole window past a short value must be overwritten by what follows it.
func TestLinesWithShortAndLongValuesAreExact(t *testing.T) {
	s := mustShaper(t, Options{})
	long := "0123456789abcdefghijklmnopqrstuvwxyz-0123456789"
	fields := []string{"A", "NAME_OF_EXACTLY_THIRTY_BYTES__", "C"}
	p := s.Plan(Schema{Source: "eventlogfile", Type: "API", Fields: fields})
	for _, vals := range [][3]string{
		{"x", long, ""},
		{long, "y", long[:31]},
		{long[:32], long[:33], "z"},
		{"", "", ""},
	} {
		want := `{"A":"` + vals[0] + `","NAME_OF_EXACTLY_THIRTY_BYTES__":"` + vals[1] + `","C":"` + vals[2] + `"}`
		// Copied by the record, and escaped on the way; then plain, as the CSV reader marks them.
		var copied Record
		for i, f := range fields {
			copied.AppendString(f, String, vals[i])
		}
		records := []*Record{&copied}
		for _, room := range []int{0, 2 * window} { // the source's buffer ends with the row, or goes on
			var plain Record
			plain.Use(append(make([]byte, 0, len(vals[0])+len(vals[1])+len(vals[2])+room), vals[0]+vals[1]+vals[2]...))
			at := 0
			for i, f := range fields {
				plain.AddField(f, String, true, at, at+len(vals[i]))
				at += len(vals[i])
			}
			records = append(records, &plain)
		}
		for _, r := range records {
			e, skip := p.Shape(r)
			if skip != "" {
				t.Fatalf("skipped: %s", skip)
			}
			if e.Line != want {
				t.Fatalf("line %s, want %s", e.Line, want)
			}
		}
	}
}
