package eventlogfile

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// csvOutcome is everything the reader says about one input.
type csvOutcome struct {
	Records  [][]string
	TooLarge []int // indexes of the records over the cap
	Err      string
	NoEOL    bool // how the last record ended
	Bytes    int64
	Plain    [][]bool // per record and field: marked plain (JSON carries it as it is)
}

func readOutcome(r io.Reader, maxRow int) csvOutcome {
	c := newCSVReader(r, maxRow)
	var out csvOutcome
	for {
		err := c.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errRowTooLarge) {
			out.TooLarge = append(out.TooLarge, len(out.Records))
			out.Records = append(out.Records, nil)
			out.Plain = append(out.Plain, nil)
			continue
		}
		if err != nil {
			out.Err = err.Error()
			break
		}
		rec := make([]string, c.NumFields())
		plain := make([]bool, c.NumFields())
		for i := range rec {
			rec[i], plain[i] = string(c.Field(i)), c.Fields()[i].plain
		}
		out.Records = append(out.Records, rec)
		out.Plain = append(out.Plain, plain)
		out.NoEOL = c.Unterminated()
	}
	out.Bytes = c.BytesRead()
	return out
}

// FuzzCSVReader: on any input the reader ends; it reads the same records whatever sizes the
// underlying reads return; Skip sees the same record boundaries as Read; no record it returns is
// over the cap; it reads every byte.
func FuzzCSVReader(f *testing.F) {
	f.Add([]byte("\"A\",\"B\"\n\"1\",\"x, y\"\n"), uint16(1024))
	f.Add([]byte("\xef\xbb\xbfA,B\r\n\"line1\r\nline2\",\"say \"\"hi\"\"\"\r\n\n"), uint16(64))
	f.Add([]byte("A,B\n\"1\",\"2"), uint16(1024))
	f.Add([]byte("A\n"+string(bytes.Repeat([]byte("x"), 300))+"\n1\n"), uint16(100))
	f.Add([]byte("A,B\nab\"c,\"d\"e\"\n\"\"\r"), uint16(8))
	f.Fuzz(func(t *testing.T, data []byte, capArg uint16) {
		maxRow := 1 + int(capArg)%4096
		whole := readOutcome(bytes.NewReader(data), maxRow)
		if whole.Err != "" {
			t.Fatalf("an in-memory input failed: %s", whole.Err)
		}
		if whole.Bytes != int64(len(data)) {
			t.Fatalf("read %d of %d bytes", whole.Bytes, len(data))
		}
		for i, rec := range whole.Records {
			n := 0
			for j, v := range rec {
				n += len(v)
				if whole.Plain[i][j] && jsonenc.Plain(v) != len(v) {
					t.Fatalf("record %d field %d %q is marked plain", i, j, v)
				}
			}
			if n > maxRow {
				t.Fatalf("record %d holds %d bytes, over the cap %d", i, n, maxRow)
			}
		}
		for _, wrap := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader} {
			if got := readOutcome(wrap(bytes.NewReader(data)), maxRow); !reflect.DeepEqual(got, whole) {
				t.Fatalf("chunked reads differ:\n got %+v\nwant %+v", got, whole)
			}
		}
		c := newCSVReader(iotest.HalfReader(bytes.NewReader(data)), maxRow)
		n, err := c.Skip(int64(len(whole.Records)) + 1)
		if !errors.Is(err, io.EOF) || n != int64(len(whole.Records)) {
			t.Fatalf("Skip saw %d records (%v), Read %d", n, err, len(whole.Records))
		}
	})
}

// FuzzDecodeCursor: the cursor decoder never panics and never errors without ErrCursor; a value
// it accepts is a safe position (a SOQL-literal date, a valid id or none, a row not negative)
// that survives being written and read again; a legacy value reads the same as the JSON string
// the Python sf2loki stored it in.
func FuzzDecodeCursor(f *testing.F) {
	f.Add([]byte(`{"v":1,"created":"2026-06-30T01:00:00.000Z","file_id":"0AT000000000001AAA","row":1234}`))
	f.Add([]byte(`{"v":1,"created":"2026-06-30T01:00:00.000Z","file_id":"0AT000000000001AAA","row":5000,"done":true}`))
	f.Add([]byte(`{"v":1,"created":"2026-06-30T01:00:00.000Z","file_id":"0AT000000000001AAA","row":12,"short_bytes":0}`))
	f.Add([]byte(`{"v":1,"created":"2026-06-30T01:00:00.000Z","file_id":"0AT000000000001AAA","row":12,"done":true,"short_bytes":4096}`))
	f.Add([]byte(`{"ids": [["0AT5g00000PyA1bGAF", "2026-06-30T07:00:00.000+0000"]], "last_created": "2026-06-30T07:00:00.000+0000"}`))
	f.Add([]byte(`"{\"ids\": [\"0AT5g00000PyA0aGAF\"], \"last_created\": \"2026-06-30T07:00:00.000+0000\"}"`))
	f.Add([]byte(`{"v":1,"created":"yesterday'--","file_id":"x' OR Id != '","row":-5}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, skip, ok, err := decodeCursor(json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, source.ErrCursor) {
				t.Fatalf("error without ErrCursor: %v", err)
			}
			if ok {
				t.Fatal("ok with an error")
			}
			return
		}
		if !ok {
			return
		}
		ts, perr := salesforce.ParseDateTime(c.Created)
		if perr != nil || salesforce.FormatDateTime(ts) != c.Created {
			t.Fatalf("created %q is not a canonical SOQL date-time (%v)", c.Created, perr)
		}
		if c.Row < 0 {
			t.Fatalf("row %d", c.Row)
		}
		for id := range skip {
			if salesforce.ValidateID(id) != nil {
				t.Fatalf("skip id %q", id)
			}
		}
		if c.FileID == "" { // a legacy value: the Python string holding it reads the same
			if c.Row != 0 || c.Done {
				t.Fatalf("legacy cursor %+v", c)
			}
			wrapped, _ := json.Marshal(string(raw))
			c2, skip2, ok2, err2 := decodeCursor(wrapped)
			if bytes.TrimSpace(raw)[0] == '"' {
				return // already the string form
			}
			if err2 != nil || !ok2 || c2 != c || !reflect.DeepEqual(skip2, skip) {
				t.Fatalf("the string form reads %+v %v (%v), the object %+v %v", c2, skip2, err2, c, skip)
			}
			return
		}
		if salesforce.ValidateID(c.FileID) != nil {
			t.Fatalf("file_id %q", c.FileID)
		}
		if c.ShortBytes != nil && (*c.ShortBytes < 0 || c.Done) {
			t.Fatalf("short_bytes %d of a cursor done %v", *c.ShortBytes, c.Done)
		}
		again, _, ok2, err2 := decodeCursor(appendCursor(nil, c.Created, c.FileID, c.Row, c.Done, c.Interval == IntervalDaily, c.ShortBytes))
		if err2 != nil || !ok2 || !reflect.DeepEqual(again, c) {
			t.Fatalf("written and read again: %+v (%v), want %+v", again, err2, c)
		}
	})
}

// FuzzCSVMatchesEncodingCSV: on inputs without carriage returns or a BOM (where encoding/csv
// reads differently by design: it turns a quoted \r\n into \n and keeps a BOM as data), the
// reader returns the records encoding/csv returns with LazyQuotes and ragged rows allowed,
// whatever sizes the underlying reads return.
func FuzzCSVMatchesEncodingCSV(f *testing.F) {
	f.Add([]byte("\"A\",\"B\"\n\"1\",\"x, y\"\n"))
	f.Add([]byte("A,B\n\"line1\nline2\",\"say \"\"hi\"\"\"\n\n\n"))
	f.Add([]byte("A,B\n\"1\",\"2"))
	f.Add([]byte("A,B\nab\"c,\"d\"e\"\n\"\"\n,\n\"x\"\"\n"))
	f.Add([]byte("\"a\",b,\n\"\xff\xfe\",\"\\\",\"\x01\"\n\"é\"\"\",\"\"\"\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.IndexByte(data, '\r') >= 0 || bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
			return
		}
		std := csv.NewReader(bytes.NewReader(data))
		std.LazyQuotes, std.FieldsPerRecord, std.ReuseRecord = true, -1, false
		want, err := std.ReadAll()
		if err != nil {
			t.Skipf("encoding/csv: %v", err)
		}
		for _, wrap := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
			got := readOutcome(wrap(bytes.NewReader(data)), len(data)+1)
			if got.Err != "" || len(got.TooLarge) > 0 {
				t.Fatalf("reader failed: %+v", got)
			}
			if len(got.Records) != len(want) {
				t.Fatalf("%d records, encoding/csv %d:\n got %q\nwant %q", len(got.Records), len(want), got.Records, want)
			}
			for i := range want {
				if !slices.Equal(got.Records[i], want[i]) {
					t.Fatalf("record %d: got %q, encoding/csv %q", i, got.Records[i], want[i])
				}
			}
		}
	})
}
