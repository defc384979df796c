package shape

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSchemaOrderAndOtherOrderShapeAlike: a record with the schema's fields in order is shaped
// from the plan's column lists (appendObject's fast path), any other from each field's rules
// found by name. Both must give the same members, labels and metadata, whatever the fields'
// kinds, values and rules: dropped, hashed, promoted, metadata, empty, null, escaped, numbers.
func TestSchemaOrderAndOtherOrderShapeAlike(t *testing.T) {
	type kv struct {
		name string
		kind Kind
		val  string
	}
	rows := [][]kv{
		{
			{"USER_ID", String, "005xx0000012345"}, {"SESSION_KEY", String, "secret"},
			{"USER_TYPE", String, "Standard"}, {"URI", String, "/services/data"},
			{"CPU_TIME", Number, "12"}, {"EMPTY", String, ""}, {"QUOTED", String, `say "hi"`},
			{"NOTHING", Null, ""}, {"ORIGIN", String, "api"}, {"LONG_VALUE", String, "a value longer than thirty-two bytes, copied by append"},
		},
		{ // empty metadata and label values, a number as a label
			{"USER_ID", String, ""}, {"SESSION_KEY", String, ""},
			{"USER_TYPE", String, ""}, {"URI", String, ""},
			{"CPU_TIME", Number, "7"}, {"EMPTY", String, "now set"}, {"QUOTED", String, "plain"},
			{"NOTHING", Null, ""}, {"ORIGIN", Null, "a null value is ignored"}, {"LONG_VALUE", String, "x"},
		},
	}
	schema := make([]string, len(rows[0]))
	for i, f := range rows[0] {
		schema[i] = f.name
	}
	for _, omit := range []bool{false, true} {
		s := mustShaper(t, Options{
			Salt:      testSalt,
			OmitEmpty: omit,
			Transforms: []Transform{
				{Op: OpHash, Fields: []string{"USER_ID"}},
				{Op: OpDropField, Fields: []string{"SESSION_KEY"}},
			},
			Metadata: []string{"URI", "NOTHING", "ORIGIN", "SESSION_KEY"},
			Types:    []TypeRule{{Type: "API", Labels: []string{"USER_TYPE", "CPU_TIME"}}},
		})
		p := s.Plan(Schema{Source: "eventlogfile", Type: "API", Fields: schema})
		for n, fields := range rows {
			var inOrder, reversed Record
			inOrder.Reset()
			reversed.Reset()
			for i := range fields {
				inOrder.AppendString(fields[i].name, fields[i].kind, fields[i].val)
				f := fields[len(fields)-1-i]
				reversed.AppendString(f.name, f.kind, f.val)
			}
			inOrder.Time, reversed.Time = time.Unix(1700000000, 0), time.Unix(1700000000, 0)
			if !p.aligned(&inOrder) || p.aligned(&reversed) {
				t.Fatalf("aligned: %v in the schema's order, %v reversed; want true, false", p.aligned(&inOrder), p.aligned(&reversed))
			}
			a, askip := p.Shape(&inOrder)
			b, bskip := p.Shape(&reversed)
			if askip != "" || bskip != "" {
				t.Fatalf("row %d skipped: %q, %q", n, askip, bskip)
			}
			var am, bm map[string]any
			if err := json.Unmarshal([]byte(a.Line), &am); err != nil {
				t.Fatalf("omit_empty %v, row %d: the schema-ordered line %q: %v", omit, n, a.Line, err)
			}
			if err := json.Unmarshal([]byte(b.Line), &bm); err != nil {
				t.Fatalf("omit_empty %v, row %d: the reversed line %q: %v", omit, n, b.Line, err)
			}
			if !maps.Equal(keysOf(am), keysOf(bm)) || !jsonEqual(am, bm) {
				t.Errorf("omit_empty %v, row %d: lines differ:\nschema order %s\nreversed     %s", omit, n, a.Line, b.Line)
			}
			if a.Labels.String() != b.Labels.String() {
				t.Errorf("omit_empty %v, row %d: labels %s, reversed %s", omit, n, a.Labels, b.Labels)
			}
			if !slices.Equal(a.Metadata, b.Metadata) {
				t.Errorf("omit_empty %v, row %d: metadata %v, reversed %v", omit, n, a.Metadata, b.Metadata)
			}
			// The schema-ordered line is what the fast path writes: its members in schema order.
			var order []string
			dec := json.NewDecoder(strings.NewReader(a.Line))
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
			for dec.More() {
				tok, _ := dec.Token()
				order = append(order, tok.(string))
				var skip any
				_ = dec.Decode(&skip)
			}
			if !slices.IsSortedFunc(order, func(x, y string) int { return slices.Index(schema, x) - slices.Index(schema, y) }) {
				t.Errorf("omit_empty %v, row %d: members %v not in the schema's order", omit, n, order)
			}
		}
	}
}

func keysOf(m map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func jsonEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
