package eventlogfile

import (
	"encoding/json"
	"fmt"
	"slices"
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

// TestReadEntriesPassesEveryKeptRowAfterADroppedOne: ReadEntries reads every row into one
// record, so nothing a dropped row left there (its skip mark, its reason) may hide the kept row
// after it: each kept row is passed once, in order, and every row is counted.
func TestReadEntriesPassesEveryKeptRowAfterADroppedOne(t *testing.T) {
	var b strings.Builder
	b.WriteString("\"EVENT_TYPE\",\"TIMESTAMP_DERIVED\",\"USER_ID\"\n")
	var want []string
	for i := range 12 {
		user := fmt.Sprintf("005%012d", i)
		if i%3 != 2 {
			user = fmt.Sprintf("bot-%d", i) // two dropped rows before each kept one
		} else {
			want = append(want, user)
		}
		fmt.Fprintf(&b, "\"API\",\"2026-12-01T10:00:%02d.000Z\",\"%s\"\n", i, user)
	}
	sh, err := shape.New(shape.Options{Transforms: []shape.Transform{
		{Op: shape.OpDropRow, Name: "bots", Match: map[string]string{"USER_ID": "bot-*"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	n, err := ReadEntries(strings.NewReader(b.String()), Body{EventType: "API"}, sh, func(e loki.Entry, _ shape.Lines) error {
		var line struct{ USER_ID string }
		if err := json.Unmarshal([]byte(e.Line), &line); err != nil {
			return err
		}
		got = append(got, line.USER_ID)
		return nil
	})
	if err != nil || n != 12 {
		t.Fatalf("ReadEntries: %d rows, %v; want 12 rows", n, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("entries for %v; want %v", got, want)
	}
}
