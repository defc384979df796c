package shape

import (
	"strings"
	"time"
)

// Kind says how a field value is written in the JSON line.
type Kind uint8

// Field kinds. A value whose kind does not fit it (a Number that is not a JSON number, a Bool
// other than true/false/1/0) is written as a string.
const (
	// String values are written as JSON strings (the default).
	String Kind = iota
	// Number values are written bare when they are valid JSON numbers.
	Number
	// Bool values are written bare when they are true or false, and 1 and 0 as true and false
	// (the form of EventLogFile's Boolean columns).
	Bool
	// Null fields are written as null; their value is ignored.
	Null
)

// field is one value of a Record: its bytes live in Record.buf[start:end].
type field struct {
	name       string
	kind       Kind
	plain      bool // the source found nothing to escape in the value (EndPlainField)
	start, end int32
}

// Record is one source record on its way through a Plan: a type, a stable id, a timestamp and an
// ordered list of named fields. It is built for reuse: Reset keeps the buffers, so filling a
// Record per row allocates nothing once it has grown to the largest row. A Record is used by
// one goroutine.
type Record struct {
	// Type is the event type or object name; it does not select the rules (the Plan was made
	// for one type) and is informational.
	Type string
	// ID is the record's stable id, the sampling key when the type names no sample field (an
	// EventLogFile row: file id and row number; a SOQL row: its Id). Sources append into it
	// after Reset.
	ID []byte
	// Time is the entry timestamp, taken by the source from the original (untransformed) values.
	Time time.Time

	fields []field
	buf    []byte
}

// Reset empties the record for the next row, keeping its buffers.
func (r *Record) Reset() {
	r.Type, r.ID, r.Time = "", r.ID[:0], time.Time{}
	r.fields, r.buf = r.fields[:0], r.buf[:0]
}

// Append adds a field. The value is copied.
func (r *Record) Append(name string, kind Kind, value []byte) {
	start := len(r.buf)
	r.buf = append(r.buf, value...)
	r.fields = append(r.fields, field{name: name, kind: kind, start: int32(start), end: int32(len(r.buf))})
}

// AppendString adds a field from a string. The value is copied.
func (r *Record) AppendString(name string, kind Kind, value string) {
	start := len(r.buf)
	r.buf = append(r.buf, value...)
	r.fields = append(r.fields, field{name: name, kind: kind, start: int32(start), end: int32(len(r.buf))})
}

// AppendTo returns the record's value buffer for a field being assembled in place (a CSV cell
// decoded straight into the record): append the value's bytes to the returned slice and pass
// the result to EndField. Nothing may be appended to the record in between.
func (r *Record) AppendTo() []byte { return r.buf }

// EndField adds a field whose value is what was appended to the slice returned by AppendTo.
func (r *Record) EndField(name string, kind Kind, buf []byte) {
	start := len(r.buf)
	r.buf = buf
	r.fields = append(r.fields, field{name: name, kind: kind, start: int32(start), end: int32(len(r.buf))})
}

// EndPlainField is EndField for a value its source has checked while reading it: ASCII with no
// '"', '\\' or control character, which a JSON string holds as it is. The line is then written
// without looking at the value again; a transform that changes the value drops the mark.
func (r *Record) EndPlainField(name string, kind Kind, buf []byte) {
	start := len(r.buf)
	r.buf = buf
	r.fields = append(r.fields, field{name: name, kind: kind, plain: true, start: int32(start), end: int32(len(r.buf))})
}

// Len returns the number of fields.
func (r *Record) Len() int { return len(r.fields) }

// Name returns the name of field i.
func (r *Record) Name(i int) string { return r.fields[i].name }

// Kind returns the kind of field i.
func (r *Record) Kind(i int) Kind { return r.fields[i].kind }

// Value returns the value of field i. The bytes are valid until the record is changed.
func (r *Record) Value(i int) []byte {
	f := &r.fields[i]
	return r.buf[f.start:f.end:f.end]
}

// Lookup returns the value of the first field called name (ASCII case-insensitive).
func (r *Record) Lookup(name string) ([]byte, bool) {
	for i := range r.fields {
		if strings.EqualFold(r.fields[i].name, name) {
			return r.Value(i), true
		}
	}
	return nil, false
}

// set replaces the value and kind of field i (the old bytes stay in the buffer until Reset).
func (r *Record) set(i int, kind Kind, value []byte) {
	start := len(r.buf)
	r.buf = append(r.buf, value...)
	r.fields[i] = field{name: r.fields[i].name, kind: kind, start: int32(start), end: int32(len(r.buf))}
}
