package eventlogfile

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
)

// TestReadEntriesTypesValuesAsListed: ReadEntries types a body's values by the field types its
// record lists, as the source does (numbers and booleans bare), and shapes every value as a
// string when none are listed.
func TestReadEntriesTypesValuesAsListed(t *testing.T) {
	csv := "\"EVENT_TYPE\",\"TIMESTAMP_DERIVED\",\"CPU_TIME\",\"IS_API\"\n" +
		"\"API\",\"2026-12-01T10:00:00.000Z\",\"12\",\"1\"\n"
	sh, err := shape.New(shape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body Body
		want []string
	}{
		{"typed", Body{EventType: "API", FieldNames: "EVENT_TYPE,TIMESTAMP_DERIVED,CPU_TIME,IS_API", FieldTypes: "String,DateTime,Number,Boolean"},
			[]string{`"CPU_TIME":12`, `"IS_API":true`}},
		{"untyped", Body{EventType: "API"}, []string{`"CPU_TIME":"12"`, `"IS_API":"1"`}},
	} {
		var lines []string
		n, err := ReadEntries(strings.NewReader(csv), c.body, sh, func(e loki.Entry, _ shape.Lines) error {
			lines = append(lines, e.Line)
			return nil
		})
		if err != nil || n != 1 || len(lines) != 1 {
			t.Fatalf("%s: %d rows, %d entries, %v", c.name, n, len(lines), err)
		}
		for _, w := range c.want {
			if !strings.Contains(lines[0], w) {
				t.Errorf("%s: line %s lacks %s", c.name, lines[0], w)
			}
		}
	}
}
