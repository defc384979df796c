package shape

import (
	"testing"
	"time"
)

// columnsRow fills r as the EventLogFile source does: the values are ranges of one buffer, the
// names the source's column slice; values past len(vals) are left unset.
func columnsRow(r *Record, buf []byte, names []string, vals ...string) {
	r.Reset()
	r.Time = time.Unix(1700000000, 0)
	data := buf[:0]
	var spans [][2]int
	for _, v := range vals {
		spans = append(spans, [2]int{len(data), len(data) + len(v)})
		data = append(data, v...)
	}
	r.Use(data)
	r.Columns(names, len(spans))
	for i, sp := range spans {
		r.SetColumn(i, String, true, sp[0], sp[1])
	}
}

// TestColumnsTemplateReused: a record filled through Columns with the same slice row after row
// holds that row's values only: a column a row leaves unset is empty, not the last row's value,
// and the names are the slice's.
func TestColumnsTemplateReused(t *testing.T) {
	names := []string{"A", "B", "C"}
	var r Record
	columnsRow(&r, make([]byte, 64), names, "a1", "b1", "c1")
	columnsRow(&r, make([]byte, 64), names, "a2")
	if r.Len() != 3 {
		t.Fatalf("%d fields, want 3", r.Len())
	}
	for i, want := range []string{"a2", "", ""} {
		if r.Name(i) != names[i] || string(r.Value(i)) != want || r.Kind(i) != String {
			t.Errorf("field %d: %s=%q (kind %d), want %s=%q (String)", i, r.Name(i), r.Value(i), r.Kind(i), names[i], want)
		}
	}
	if !r.Follows(names) || r.Follows([]string{"A", "B", "C"}) {
		t.Errorf("Follows: %v for its own slice, %v for an equal copy; want true, false", r.Follows(names), r.Follows([]string{"A", "B", "C"}))
	}
}

// TestColumnsForgottenByOtherWrites: a row built field by field in between (other names in the
// same slots) makes the next Columns write the names again instead of trusting stale ones.
func TestColumnsForgottenByOtherWrites(t *testing.T) {
	names := []string{"A", "B"}
	var r Record
	columnsRow(&r, make([]byte, 16), names, "1", "2")
	row(&r, "X", "x", "Y", "y")
	if r.Follows(names) {
		t.Fatal("a record built by AppendString follows the column slice")
	}
	columnsRow(&r, make([]byte, 16), names, "3", "4")
	for i, want := range []string{"A", "B"} {
		if r.Name(i) != want {
			t.Errorf("field %d named %q, want %q", i, r.Name(i), want)
		}
	}
}

// TestColumnsShapeAsFields: a plan shapes a record filled through Columns exactly as the same
// row added field by field, on the first row (names compared) and the next (template known),
// and by name when the columns are not the plan's order.
func TestColumnsShapeAsFields(t *testing.T) {
	s := mustShaper(t, Options{})
	names := []string{"USER_ID", "URI", "CPU_TIME"}
	p := s.Plan(Schema{Source: "eventlogfile", Type: "API", Fields: names})
	for i, vals := range [][]string{{"005x", "/a", "12"}, {"005y", "/b", "13"}, {"005z"}} {
		var byCols, byFields Record
		columnsRow(&byCols, make([]byte, 64), names, vals...)
		kv := []string{}
		for j, n := range names {
			v := ""
			if j < len(vals) {
				v = vals[j]
			}
			kv = append(kv, n, v)
		}
		row(&byFields, kv...)
		got, skip := p.Shape(&byCols)
		want, wskip := p.Shape(&byFields)
		if skip != wskip || got.Line != want.Line {
			t.Errorf("row %d: Columns shaped %q (skip %q), fields %q (skip %q)", i, got.Line, skip, want.Line, wskip)
		}
	}
	other := []string{"URI", "USER_ID", "CPU_TIME"}
	var r, f Record
	columnsRow(&r, make([]byte, 64), other, "/c", "005w", "14")
	row(&f, "URI", "/c", "USER_ID", "005w", "CPU_TIME", "14")
	got, _ := p.Shape(&r)
	want, _ := p.Shape(&f)
	if got.Line != want.Line {
		t.Errorf("columns out of the plan's order: %q, want %q", got.Line, want.Line)
	}
}
