package eventlogfile

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

func readAll(t *testing.T, r io.Reader, maxRow int) ([][]string, error) {
	t.Helper()
	c := newCSVReader(r, maxRow)
	var out [][]string
	for {
		err := c.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if errors.Is(err, errRowTooLarge) {
			out = append(out, []string{"<too large>"})
			continue
		}
		if err != nil {
			return out, err
		}
		rec := make([]string, c.NumFields())
		for i := range rec {
			rec[i] = string(c.Field(i))
		}
		out = append(out, rec)
	}
}

func TestCSVQuirks(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want [][]string
	}{
		{"quoted everything", "\"A\",\"B\"\n\"1\",\"x, y\"\n", [][]string{{"A", "B"}, {"1", "x, y"}}},
		{"bare values", "A,B\n1,2\n", [][]string{{"A", "B"}, {"1", "2"}}},
		{"embedded newline and quotes", "A,B\n\"line1\nline2\",\"say \"\"hi\"\"\"\n", [][]string{{"A", "B"}, {"line1\nline2", `say "hi"`}}},
		{"crlf", "A,B\r\n1,2\r\n", [][]string{{"A", "B"}, {"1", "2"}}},
		{"crlf inside quotes kept", "A\r\n\"a\r\nb\"\r\n", [][]string{{"A"}, {"a\r\nb"}}},
		{"bom", "\xef\xbb\xbf\"A\",\"B\"\n1,2\n", [][]string{{"A", "B"}, {"1", "2"}}},
		{"no final newline", "A,B\n1,2", [][]string{{"A", "B"}, {"1", "2"}}},
		{"blank lines", "A\n\n\r\n1\n\n", [][]string{{"A"}, {"1"}}},
		{"empty fields", "A,B,C\n,,\n\"\",x,\n", [][]string{{"A", "B", "C"}, {"", "", ""}, {"", "x", ""}}},
		{"lazy quotes", "A,B\nab\"c,\"d\"e\"\n", [][]string{{"A", "B"}, {`ab"c`, `d"e`}}},
		{"unterminated quote", "A\n\"abc\n", [][]string{{"A"}, {"abc\n"}}},
		{"lone cr is data", "A\na\rb\n", [][]string{{"A"}, {"a\rb"}}},
		{"header only", "\"A\",\"B\"\n", [][]string{{"A", "B"}}},
		{"empty", "", nil},
		{"bom only", "\xef\xbb\xbf", nil},
		{"multibyte", "A\n\"é,ü\"\n", [][]string{{"A"}, {"é,ü"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
				got, err := readAll(t, wrap(strings.NewReader(c.in)), 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("got %q\nwant %q", got, c.want)
				}
			}
		})
	}
}

// TestCSVMatchesEncodingCSV compares with encoding/csv (LazyQuotes) on random well-formed
// input, read through readers returning odd-sized chunks.
func TestCSVMatchesEncodingCSV(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", ",", "\"", "\n", "\r\n", " ", "é", "x"}
	for iter := range 300 {
		var b strings.Builder
		rows := 1 + r.IntN(20)
		for range rows {
			nf := 1 + r.IntN(5)
			for f := range nf {
				if f > 0 {
					b.WriteByte(',')
				}
				var v strings.Builder
				for range r.IntN(12) {
					v.WriteString(alphabet[r.IntN(len(alphabet))])
				}
				s := v.String()
				if r.IntN(3) > 0 || strings.ContainsAny(s, ",\"\n\r") {
					s = `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
				}
				b.WriteString(s)
			}
			b.WriteString("\n")
		}
		in := b.String()
		std := csv.NewReader(strings.NewReader(in))
		std.FieldsPerRecord, std.LazyQuotes = -1, true
		want, err := std.ReadAll()
		if err != nil {
			t.Fatalf("encoding/csv: %v", err)
		}
		// encoding/csv turns \r\n inside quoted fields into \n; ours keeps the bytes.
		got, err := readAll(t, iotest.HalfReader(strings.NewReader(in)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			for j := range got[i] {
				got[i][j] = strings.ReplaceAll(got[i][j], "\r\n", "\n")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: input %q\n got %q\nwant %q", iter, in, got, want)
		}
	}
}

// TestCSVPlainFields: a quoted field of ASCII without quotes, backslashes or control characters
// is marked plain (the shaper then copies it into the JSON line without looking at it again),
// whatever the reads' sizes; anything else, and every unquoted field, is not.
func TestCSVPlainFields(t *testing.T) {
	in := "\"A\",\"B c/d:e\",\"\",x\n" +
		"\"say \"\"hi\"\"\",\"back\\slash\",\"tab\there\",\"é\"\n" +
		"\"line1\nline2\",\"a\"b\",\"" + strings.Repeat("long plain value ", 40) + "\",\"\"\"\"\n"
	want := [][]bool{{true, true, true, false}, {false, false, false, false}, {false, false, true, false}}
	for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
		got := readOutcome(wrap(strings.NewReader(in)), 1<<20)
		if !reflect.DeepEqual(got.Plain, want) {
			t.Fatalf("plain %v, want %v (records %q)", got.Plain, want, got.Records)
		}
	}
}

func TestCSVSkipMatchesRead(t *testing.T) {
	in := "A,B\n\"1\na\",x\n2,y\n\n\"3\",\"z\"\"\"\n4,w\n"
	for n := int64(0); n <= 6; n++ {
		c := newCSVReader(iotest.OneByteReader(strings.NewReader(in)), 1<<20)
		skipped, err := c.Skip(n)
		if n <= 5 && (err != nil || skipped != n) {
			t.Fatalf("Skip(%d) = %d, %v", n, skipped, err)
		}
		if n == 6 {
			if !errors.Is(err, io.EOF) || skipped != 5 {
				t.Fatalf("Skip past the end = %d, %v", skipped, err)
			}
			continue
		}
		all, _ := readAll(t, strings.NewReader(in), 1<<20)
		err = c.Read()
		if n == 5 {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after skipping all: %v", err)
			}
			continue
		}
		if err != nil || string(c.Field(0)) != all[n][0] {
			t.Fatalf("after Skip(%d) read %q (%v), want %q", n, c.Field(0), err, all[n][0])
		}
	}
}

func TestCSVRowTooLargeIsSkipped(t *testing.T) {
	big := strings.Repeat("x", 5000)
	in := "A,B\n1,2\n\"" + big + "\",3\n4,5\n"
	got, err := readAll(t, iotest.HalfReader(strings.NewReader(in)), 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"A", "B"}, {"1", "2"}, {"<too large>"}, {"4", "5"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestCSVReadErrorIsNotARecord(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("A,B\n1,2\n3,"), iotest.ErrReader(boom))
	c := newCSVReader(r, 1<<20)
	for range 2 {
		if err := c.Read(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Read(); !errors.Is(err, boom) {
		t.Fatalf("a record cut by a read error: %v", err)
	}
}

func TestCSVAtEnd(t *testing.T) {
	c := newCSVReader(strings.NewReader("A\n1\n\n\r\n"), 1<<20)
	_ = c.Read()
	if end, _ := c.AtEnd(); end {
		t.Fatal("AtEnd before the last record")
	}
	_ = c.Read()
	if end, err := c.AtEnd(); !end || err != nil {
		t.Fatalf("AtEnd after the last record = %v, %v", end, err)
	}
	if c.BytesRead() != 7 {
		t.Fatalf("BytesRead = %d", c.BytesRead())
	}
}

// shapeFile runs the source's row path over a body with the listing's field names and types.
func shapeFile(t *testing.T, body, names, types string, stringValues bool) []string {
	t.Helper()
	sh, err := shape.New(shape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &Source{opts: Options{Shaper: sh, TimestampColumn: DefaultTimestampColumn, MaxRowBytes: 1 << 20, StringValues: stringValues, Log: slog.New(slog.DiscardHandler)}}
	st := &stream{src: src, typ: "API", key: Key("API"), log: src.opts.Log, count: func(string, int64) {}}
	of := st.newOpenFile(fileInfo{ID: "0AT000000000001AAA", Created: "2026-06-30T00:00:00.000Z", names: names, types: types},
		io.NopCloser(nil), newCSVReader(strings.NewReader(body), 1<<20))
	st.file = of
	if err := of.csv.Read(); err != nil {
		t.Fatal(err)
	}
	st.header(of)
	var lines []string
	for st.file != nil {
		var rec source.Record
		ok, err := st.nextRow(&rec)
		if err != nil {
			t.Fatal(err)
		}
		if ok && !rec.Skip {
			lines = append(lines, rec.Entry.Line)
		}
	}
	return lines
}

// TestTheHeaderIsTheTruth: the column names come from the file's own header row, never from
// LogFileFieldNames: a header name with surrounding spaces, columns in another order than the
// listing, a column the listing does not name. The header row is never shipped as an entry, each
// value is filed under its own column, and LogFileFieldTypes is matched by name.
func TestTheHeaderIsTheTruth(t *testing.T) {
	body := "\"EVENT_TYPE \",\" ROWS\",\"USER_ID\",\"NEW_COLUMN\",\"\"\n" +
		"\"API\",\"12\",\"005000000000001\",\"n\",\"x\"\n" +
		"\"API\",\"\",\"005000000000002\"\n"
	got := shapeFile(t, body, "USER_ID,EVENT_TYPE,ROWS", "Id,String,Number", false)
	want := []string{
		`{"EVENT_TYPE":"API","ROWS":12,"USER_ID":"005000000000001","NEW_COLUMN":"n","_column_5":"x"}`,
		`{"EVENT_TYPE":"API","ROWS":"","USER_ID":"005000000000002","NEW_COLUMN":"","_column_5":""}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A first row that looks like data is still the header: Salesforce always writes one.
	got = shapeFile(t, "\"API\",\"12\"\n\"API\",\"3\"\n", "EVENT_TYPE,ROWS", "String,Number", false)
	if len(got) != 1 || got[0] != `{"API":"API","12":"3"}` {
		t.Fatalf("got %q", got)
	}
}

// TestCSVUnterminated: how the last record ended tells a body cut inside a record from one that
// ended at a record boundary, whether it was cut inside a quoted field, after a comma, or inside
// a record over the cap.
func TestCSVUnterminated(t *testing.T) {
	cases := []struct {
		in    string
		noEOL bool
	}{
		{"A,B\n1,2\n", false},
		{"A,B\n1,2\r\n", false},
		{"A,B\n1,2", true},
		{"A,B\n\"1\",\"2\"", true},
		{"A,B\n\"1\",\"2", true},
		{"A,B\n\"1\",\"2\nmore", true},
		{"A,B\n\"1\",", true},
		{"A,B\n\"1\"\r", true},
		{"A,B\n\"1\",\"" + strings.Repeat("x", 100) + "\"\n", false},
		{"A,B\n\"1\",\"" + strings.Repeat("x", 100), true},
	}
	for _, c := range cases {
		for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
			r := newCSVReader(wrap(strings.NewReader(c.in)), 50)
			for err := r.Read(); err == nil || errors.Is(err, errRowTooLarge); err = r.Read() {
				if end, _ := r.AtEnd(); end {
					break
				}
			}
			if noEOL := r.Unterminated(); noEOL != c.noEOL {
				t.Errorf("%q: Unterminated() = %v, want %v", c.in, noEOL, c.noEOL)
			}
		}
	}
}

// TestCSVFieldEndsAcrossBlocks: the in-place reader classifies bytes in blocks of 64 that
// start wherever a search starts. Wherever a field starts in its block and wherever its quote,
// "" escape or byte JSON must look at lies, the record reads as the byte-at-a-time state
// machine reads it (one byte per read keeps every record out of the in-place path; compared at
// some positions, as it is slow), and a value with such a byte is not marked plain.
func TestCSVFieldEndsAcrossBlocks(t *testing.T) {
	for _, special := range []string{`\`, "\x01", "é", `""`, "\n", ","} {
		for lead := range 64 { // every start of the value within a block
			for pos := 0; pos < 140; pos += 5 {
				value := []byte(strings.Repeat("v", 140))
				value = append(value[:pos:pos], append([]byte(special), value[pos:]...)...)
				in := fmt.Sprintf("\"A\",\"B\",\"C\"\n\"%s\",\"%s\",\"z\"\n\"next\",\"\",\"\"\n",
					strings.Repeat("p", lead), value)
				whole := readOutcome(strings.NewReader(in), 1<<20)
				if pos%35 == 0 {
					bytewise := readOutcome(iotest.OneByteReader(strings.NewReader(in)), 1<<20)
					if !reflect.DeepEqual(whole, bytewise) {
						t.Fatalf("%q at %d after a field of %d: in place %+v, byte by byte %+v", special, pos, lead, whole, bytewise)
					}
				}
				wantValue := strings.ReplaceAll(string(value), `""`, `"`)
				if len(whole.Records) != 3 || whole.Records[1][1] != wantValue || whole.Records[1][0] != strings.Repeat("p", lead) {
					t.Fatalf("%q at %d after a field of %d: records %q", special, pos, lead, whole.Records)
				}
				wantPlain := special == ","
				if whole.Plain[1][1] != wantPlain || !whole.Plain[1][0] || !whole.Plain[2][0] {
					t.Fatalf("%q at %d after a field of %d: plain %v, want the value's %v", special, pos, lead, whole.Plain, wantPlain)
				}
			}
		}
	}
}
