package shape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
)

// FuzzLineCarriesEveryValue: whatever the values and kinds of a row, its line is one valid JSON
// object holding every field under its name, in the schema's order, each value as its kind says
// (a String as the string, invalid UTF-8 turned into U+FFFD byte by byte; a Number bare when it
// is a JSON number; a Bool bare when true, false, 1 or 0; a Null as null; any other as a string),
// with omit_empty leaving out the empty ones. The row is given three ways, which must shape
// alike: as the EventLogFile source gives it (values found in a larger buffer that runs on past
// them, marked plain where they are), field by field, and in another order than the schema's.
func FuzzLineCarriesEveryValue(f *testing.F) {
	f.Add([]byte("\x00005xx\x01123\x02true\x03\x00a \"quoted\" value\x011.5e3\x020\x00"), false)
	f.Add([]byte("\x00\x00\x01-0\x01012\x02yes\x00\xff\xfe\x00\u2028\\\x00 a value longer than thirty-two bytes, moved by append"), true)
	f.Add([]byte("\x01\x02\x03\x00"), true)
	f.Add([]byte("a plain value of 24 bytes\x00\x0112345678901234567890\x00seventeen bytes!!\x00x"), false)
	f.Fuzz(func(t *testing.T, data []byte, omit bool) {
		chunks := bytes.Split(data, []byte{0})
		if len(chunks) > 64 {
			chunks = chunks[:64]
		}
		var names []string
		var kinds []Kind
		var vals [][]byte
		for i, c := range chunks {
			k := String
			if len(c) > 0 && c[0] < 4 {
				k, c = Kind(c[0]), c[1:]
			}
			names = append(names, fmt.Sprintf("F%d", i))
			kinds = append(kinds, k)
			vals = append(vals, c)
		}
		s, err := New(Options{OmitEmpty: omit})
		if err != nil {
			t.Fatal(err)
		}
		p := s.Plan(Schema{Source: "eventlogfile", Type: "API", Fields: names})

		// As the source gives it: the values one after another in a buffer that runs on.
		var buf []byte
		spans := make([][2]int, len(vals))
		for i, v := range vals {
			spans[i] = [2]int{len(buf), len(buf) + len(v)}
			buf = append(buf, v...)
		}
		buf = append(buf, bytes.Repeat([]byte{'"'}, 64)...) // past the row: never part of a value
		var cols Record
		cols.Reset()
		cols.Use(buf[:spans[len(spans)-1][1]])
		cols.Columns(names, len(names))
		for i, sp := range spans {
			v := vals[i]
			plain := kinds[i] == String && jsonenc.Plain(v) == len(v) && len(v)%3 != 1 // some plain values left unmarked
			cols.SetColumn(i, kinds[i], plain, sp[0], sp[1])
		}
		cols.Time = time.Unix(1700000000, 0)
		var byField, reversed Record
		byField.Reset()
		reversed.Reset()
		for i := range vals {
			byField.AppendString(names[i], kinds[i], string(vals[i]))
			j := len(vals) - 1 - i
			reversed.AppendString(names[j], kinds[j], string(vals[j]))
		}
		byField.Time, reversed.Time = cols.Time, cols.Time

		var lines [3]string
		for n, r := range []*Record{&cols, &byField, &reversed} {
			e, skip := p.Shape(r)
			if skip != "" {
				t.Fatalf("record %d skipped: %q", n, skip)
			}
			lines[n] = e.Line
		}
		if lines[0] != lines[1] {
			t.Fatalf("the source's row and the same row field by field shape differently:\n%s\n%s", lines[0], lines[1])
		}
		got := decodeObject(t, lines[0])
		var want []member
		for i, v := range vals {
			if omit && len(v) == 0 {
				continue
			}
			want = append(want, member{names[i], expectedJSON(kinds[i], v)})
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("line %s\n got %v\nwant %v", lines[0], got, want)
		}
		other := decodeObject(t, lines[2])
		if len(other) != len(got) {
			t.Fatalf("the reversed row has %d members, the row %d:\n%s\n%s", len(other), len(got), lines[2], lines[0])
		}
		at := map[string]string{}
		for _, m := range got {
			at[m.name] = m.value
		}
		for _, m := range other {
			if at[m.name] != m.value {
				t.Fatalf("member %s: %s in the reversed row, %s in the row", m.name, m.value, at[m.name])
			}
		}
	})
}

type member struct{ name, value string }

func (m member) String() string { return m.name + "=" + m.value }

// decodeObject reads line as one JSON object and returns its members in order, each value as
// compact JSON.
func decodeObject(t *testing.T, line string) []member {
	t.Helper()
	if !json.Valid([]byte(line)) {
		t.Fatalf("not JSON: %q", line)
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line %q does not open an object: %v %v", line, tok, err)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, member{tok.(string), canonical(t, c.Bytes())})
	}
	return out
}

// canonical re-encodes a JSON string value so that two spellings of one string compare equal;
// numbers, booleans and null stay as written.
func canonical(t *testing.T, v []byte) string {
	t.Helper()
	if len(v) == 0 || v[0] != '"' {
		return string(v)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		t.Fatalf("string %s: %v", v, err)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// expectedJSON is the value the line must carry for a field of kind k and value v, canonical.
func expectedJSON(k Kind, v []byte) string {
	switch k {
	case Null:
		return "null"
	case Number:
		if isJSONNumberSyntax(v) {
			return string(v)
		}
	case Bool:
		switch string(v) {
		case "true", "1":
			return "true"
		case "false", "0":
			return "false"
		}
	}
	var s strings.Builder
	for len(v) > 0 {
		r, n := utf8.DecodeRune(v)
		if r == utf8.RuneError && n == 1 {
			s.WriteRune(utf8.RuneError)
		} else {
			s.Write(v[:n])
		}
		v = v[n:]
	}
	b, _ := json.Marshal(s.String())
	return string(b)
}
