package eventlogfile

import (
	"bytes"
	"errors"
	"io"
	"math/bits"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
)

// errRowTooLarge is returned for a record longer than the reader's cap; the record is consumed
// (the reader is positioned at the next one), so the caller can skip it and go on.
var errRowTooLarge = errors.New("CSV row larger than max_row_bytes")

// csvReader is a streaming RFC 4180 reader tuned for EventLogFile bodies: fields separated by
// commas, records by \n or \r\n, quoted fields with "" escapes and embedded commas and line
// breaks, an optional UTF-8 BOM, blank lines ignored. It is lenient like encoding/csv with
// LazyQuotes: a quote inside an unquoted field is data, and a quote in a quoted field that is
// not followed by a quote, comma or line end is data too; an unterminated quote ends at EOF.
//
// A well-formed record that lies whole in the read buffer (nearly every record) is decoded in
// place: its fields are ranges of the read buffer, unquoted there. Any other record is decoded
// by a state machine into one reused buffer. Either way reading allocates nothing once the
// buffers have grown. Skipping records (Skip) uses the state machine without copying, so
// skipped and read records always have the same boundaries.
type csvReader struct {
	r        io.Reader
	buf      []byte
	pos, end int
	eof      bool
	err      error // sticky read error other than io.EOF
	n        int64 // bytes read from r
	started  bool

	data     []byte     // the bytes the current record's fields index: row, or the read buffer
	row      []byte     // fields of a record the state machine read, concatenated
	fields   []csvField // the current record's fields
	dirty    bool       // the field being read is not plain
	maxRow   int
	tooLarge bool
	discard  bool

	// Scratch of fast, per record: the fields read in place that hold "" escapes, and how many
	// escapes they hold (their values are that much shorter). Kept here rather than in fast's
	// locals: they are rarely touched, and the field loop's registers go further without them.
	unquote []int
	pairs   int

	// How the current record ended: eol is false for a record ended by the end of the input
	// (the last one, without a line break).
	eol bool
}

// csvField is where a field of the current record lies in its data, and whether it was quoted
// and holds only ASCII without '"', '\\' or control characters (JSON carries it as it is).
type csvField struct {
	start, end int
	plain      bool
}

const csvBufSize = 256 << 10

func newCSVReader(r io.Reader, maxRow int) *csvReader {
	return &csvReader{r: r, buf: make([]byte, csvBufSize), maxRow: maxRow}
}

// BytesRead returns how many bytes were read from the underlying reader.
func (c *csvReader) BytesRead() int64 { return c.n }

// Unterminated reports whether the current record (or the one over the cap just consumed) was
// ended by the end of the input instead of a line break: the mark of a record cut short.
func (c *csvReader) Unterminated() bool { return !c.eol }

// NumFields returns the number of fields of the current record.
func (c *csvReader) NumFields() int { return len(c.fields) }

// Field returns field i of the current record (valid until the next Read or AtEnd).
func (c *csvReader) Field(i int) []byte { return c.data[c.fields[i].start:c.fields[i].end] }

// Data returns the bytes the fields of the current record index: field i is
// Data()[Fields()[i].start:Fields()[i].end] (valid until the next Read or AtEnd). Its capacity may
// run on into the read buffer past the record, for a reader to read short values in whole words
// (the shaper does); nothing may write there.
func (c *csvReader) Data() []byte { return c.data }

// Fields returns where the fields of the current record lie in Data, and which are plain
// (valid until the next Read or AtEnd; not to be changed).
func (c *csvReader) Fields() []csvField { return c.fields }

// fill reads more input, keeping buf[pos:end]. It returns false when nothing more is available
// (EOF or an error, kept in c.err).
func (c *csvReader) fill() bool {
	if c.eof || c.err != nil {
		return false
	}
	if c.pos > 0 {
		c.end = copy(c.buf, c.buf[c.pos:c.end])
		c.pos = 0
	}
	if c.end == len(c.buf) {
		c.buf = append(c.buf, make([]byte, len(c.buf))...)
	}
	before := c.end
	for {
		n, err := c.r.Read(c.buf[c.end:])
		c.end += n
		c.n += int64(n)
		switch {
		case errors.Is(err, io.EOF):
			c.eof = true
		case err != nil:
			c.err = err
		}
		if !c.started && (c.end >= 3 || c.eof || c.err != nil) {
			c.started = true
			if bytes.HasPrefix(c.buf[:c.end], []byte("\xef\xbb\xbf")) {
				c.pos = 3
				before = 3
			}
		}
		if c.started && c.end > before {
			return true
		}
		if c.eof || c.err != nil {
			return false
		}
	}
}

// ensure makes at least n unread bytes available unless the input ends first.
func (c *csvReader) ensure(n int) bool {
	for c.end-c.pos < n {
		if !c.fill() {
			return c.end-c.pos >= n
		}
	}
	return true
}

func (c *csvReader) endErr() error {
	if c.err != nil {
		return c.err
	}
	return io.EOF
}

// skipBlank skips empty lines; it returns false when the input is exhausted.
func (c *csvReader) skipBlank() bool {
	for {
		if c.pos >= c.end && !c.fill() {
			return false
		}
		switch c.buf[c.pos] {
		case '\n':
			c.pos++
		case '\r':
			if c.ensure(2) && c.buf[c.pos+1] == '\n' {
				c.pos += 2
				continue
			}
			return true
		default:
			return true
		}
	}
}

// AtEnd reports whether no record follows (only blank lines remain). It may read ahead. A read
// error is returned as such.
func (c *csvReader) AtEnd() (bool, error) {
	if c.skipBlank() {
		return false, nil
	}
	if c.err != nil {
		return false, c.err
	}
	return true, nil
}

// Read decodes the next record. It returns io.EOF at the end of the input, errRowTooLarge for
// a record over the cap (consumed), or the underlying read error.
func (c *csvReader) Read() error {
	c.discard = false
	return c.read()
}

// Skip consumes n records without decoding them. It returns the number skipped and an error
// when the input ended (io.EOF) or failed first. Over-long records count as records.
func (c *csvReader) Skip(n int64) (int64, error) {
	c.discard = true
	defer func() { c.discard = false }()
	var done int64
	for done < n {
		if err := c.read(); err != nil && !errors.Is(err, errRowTooLarge) {
			return done, err
		}
		done++
	}
	return done, nil
}

type fieldEnd int

const (
	endComma fieldEnd = iota
	endLine
	endInput
)

func (c *csvReader) read() error {
	c.row, c.fields, c.tooLarge = c.row[:0], c.fields[:0], false
	c.eol = false
	if !c.skipBlank() {
		return c.endErr()
	}
	if !c.discard && c.fast() {
		return nil
	}
	for {
		var how fieldEnd
		c.dirty = true // unquoted fields are not looked at for JSON
		if c.pos < c.end || c.fill() {
			if c.buf[c.pos] == '"' {
				c.pos++
				c.dirty = false
				how = c.quoted()
			} else {
				how = c.unquoted()
			}
		} else {
			how = endInput // the record ended with a comma: one more, empty, field
		}
		if !c.discard {
			start := 0
			if n := len(c.fields); n > 0 {
				start = c.fields[n-1].end
			}
			c.fields = append(c.fields, csvField{start, len(c.row), !c.dirty})
		}
		if how == endComma {
			continue
		}
		c.eol = how == endLine
		if how == endInput && c.err != nil {
			return c.err // a record cut by a broken download is not a record
		}
		if c.tooLarge {
			c.row, c.fields = c.row[:0], c.fields[:0]
			return errRowTooLarge
		}
		c.data = c.row
		return nil
	}
}

// fast decodes the current record in place, in one pass over the read buffer, when the record
// lies in it whole and is well formed: quoted fields (with "" escapes and embedded commas and
// line breaks) and unquoted ones without a carriage return, ended by \n or \r\n, within the cap.
// It returns false otherwise, having consumed and changed nothing: the state machine then
// reads the record (a record cut by the buffer's end, a stray quote, a lone \r, an over-long
// record), with the same result. This is the path of nearly every row, so it finds field ends
// a block of 64 bytes at a time (jsonenc.Classify) and copies nothing: the fields are ranges of
// the buffer.
func (c *csvReader) fast() bool {
	b := c.buf[c.pos:c.end]
	fields := c.fields
	c.unquote, c.pairs = c.unquote[:0], 0
	// The masks of b[at:at+64]: its quotes, and its other bytes that need attention in JSON.
	at, quotes, others := -64, uint64(0), uint64(0)
	end := 0 // the record's length, with its line break
	i := 0
	var d byte // the byte after a quoted field's closing quote
fields:
	for i < len(b) {
		if b[i] == '"' {
			i++
			clean := true
			k := i
			for {
				// The closing quote is the first quote from k on; the value is plain unless a
				// byte JSON must escape or check lies before it. The bytes are classified a
				// block of 64 at a time into two masks, which the next fields go on using.
				for {
					if k >= at+64 {
						if k >= len(b) {
							return false
						}
						at = k
						quotes, others = jsonenc.Classify(b[k:])
					}
					sh := uint(k - at)
					if q := quotes >> sh; q != 0 {
						n := bits.TrailingZeros64(q)
						if others>>sh&(1<<n-1) != 0 {
							clean = false
						}
						k += n
						break
					}
					if others>>sh != 0 {
						clean = false
					}
					k = at + 64
				}
				if k+1 >= len(b) {
					return false
				}
				if d = b[k+1]; d == '"' { // an escaped quote: unquoted once the record is whole
					if len(c.unquote) == 0 || c.unquote[len(c.unquote)-1] != len(fields) {
						c.unquote = append(c.unquote, len(fields))
					}
					clean = false
					c.pairs++
					k += 2
					continue
				}
				break
			}
			fields = append(fields, csvField{i, k, clean})
			i = k + 2
			switch d {
			case ',':
			case '\n':
				end = i
				break fields
			case '\r':
				if i >= len(b) || b[i] != '\n' {
					return false
				}
				end = i + 1
				break fields
			default:
				return false // a stray quote: data, as the state machine reads it
			}
		} else {
			j := i
			for j < len(b) && !special[b[j]] {
				j++
			}
			if j >= len(b) {
				return false
			}
			fields = append(fields, csvField{i, j, false})
			i = j + 1
			switch b[j] {
			case ',':
			case '\n':
				end = i
				break fields
			default: // '\r'
				if i >= len(b) || b[i] != '\n' {
					return false
				}
				end = i + 1
				break fields
			}
		}
	}
	if end == 0 {
		return false // the record goes on past the buffer
	}
	// A record's decoded values are never longer than the record, so only a long record is
	// measured against the cap.
	if end > c.maxRow {
		size := -c.pairs
		for _, f := range fields {
			size += f.end - f.start
		}
		if size > c.maxRow {
			return false
		}
	}
	for _, f := range c.unquote {
		fields[f].end = unquoteInPlace(b, fields[f].start, fields[f].end)
	}
	c.data, c.fields = b[:end], fields
	c.pos += end
	c.eol = true
	return true
}

// unquoteInPlace turns the "" escapes of b[start:end], a quoted field's value where every quote
// is half of such a pair, into single quotes in place, and returns the value's new end.
func unquoteInPlace(b []byte, start, end int) int {
	q := bytes.IndexByte(b[start:end], '"')
	if q < 0 {
		return end
	}
	// Up to the first pair nothing moves; from there on, each run of text up to and including
	// a pair's first quote moves left by the pairs before it.
	w := start + q + 1
	r := w + 1
	for {
		q = bytes.IndexByte(b[r:end], '"')
		if q < 0 {
			return w + copy(b[w:], b[r:end])
		}
		w += copy(b[w:], b[r:r+q+1])
		r += q + 2
	}
}

func (c *csvReader) add(b []byte) {
	if c.discard || c.tooLarge {
		return
	}
	if len(c.row)+len(b) > c.maxRow {
		c.tooLarge = true
		return
	}
	c.row = append(c.row, b...)
}

func (c *csvReader) addByte(b byte) {
	if c.discard || c.tooLarge {
		return
	}
	if len(c.row)+1 > c.maxRow {
		c.tooLarge = true
		return
	}
	c.row = append(c.row, b)
}

// special marks the bytes that end an unquoted field.
var special = [256]bool{',': true, '\n': true, '\r': true}

func (c *csvReader) unquoted() fieldEnd {
	for {
		b := c.buf[c.pos:c.end]
		i := 0
		for i < len(b) && !special[b[i]] {
			i++
		}
		c.add(b[:i])
		c.pos += i
		if i == len(b) {
			if !c.fill() {
				return endInput
			}
			continue
		}
		switch c.buf[c.pos] {
		case ',':
			c.pos++
			return endComma
		case '\n':
			c.pos++
			return endLine
		default: // '\r': \r\n ends the record, a lone \r is data
			if c.ensure(2) && c.buf[c.pos+1] == '\n' {
				c.pos += 2
				return endLine
			}
			c.addByte('\r')
			c.pos++
			if c.pos >= c.end && !c.fill() {
				return endInput
			}
		}
	}
}

func (c *csvReader) quoted() fieldEnd {
	for {
		b := c.buf[c.pos:c.end]
		// The closing quote, found by the scan that also tells whether JSON can carry the
		// value as it is (it stops at the first byte that is not plain).
		i := jsonenc.Plain(b)
		if i < len(b) && b[i] != '"' {
			c.dirty = true
			if j := bytes.IndexByte(b[i:], '"'); j >= 0 {
				i += j
			} else {
				i = len(b)
			}
		}
		if i == len(b) {
			i = -1
		}
		if i < 0 {
			c.add(b)
			c.pos = c.end
			if !c.fill() {
				return endInput // unterminated quote: the field runs to the end
			}
			continue
		}
		c.add(b[:i])
		// Fast path: the byte after the quote is in the buffer and ends the field.
		if i+1 < len(b) {
			switch b[i+1] {
			case ',':
				c.pos += i + 2
				return endComma
			case '\n':
				c.pos += i + 2
				return endLine
			}
		}
		c.pos += i + 1
		if !c.ensure(1) {
			return endInput
		}
		switch c.buf[c.pos] {
		case '"':
			c.addByte('"')
			c.dirty = true
			c.pos++
		case ',':
			c.pos++
			return endComma
		case '\n':
			c.pos++
			return endLine
		case '\r':
			if c.ensure(2) && c.buf[c.pos+1] == '\n' {
				c.pos += 2
				return endLine
			}
			if c.end-c.pos == 1 && c.eof {
				c.pos++
				return endInput
			}
			c.addByte('"')
			c.dirty = true
		default:
			c.addByte('"') // a stray quote inside a quoted field is data
			c.dirty = true
		}
	}
}
