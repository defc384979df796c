package shape

import (
	"strings"
	"time"
	"unsafe"
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
	plain      bool // the source found nothing to escape in the value (AddField)
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
	// after Reset; a source may leave it empty when the plan does not read it (Plan.UsesID).
	ID []byte
	// Time is the entry timestamp, taken by the source from the original (untransformed) values.
	Time time.Time

	fields []field
	buf    []byte // the bytes the fields index: own, or the source's (Use)
	own    []byte // the record's own buffer, while buf is the source's
	ext    bool   // buf is the source's: copy it to own before writing
	// cols is the first name of the slice given to Columns whose names fields[:ncols] hold
	// from one row to the next; nil once anything else has written those fields.
	cols  *string
	ncols int
}

// Reset empties the record for the next row, keeping its buffers.
func (r *Record) Reset() {
	r.Type, r.ID, r.Time = "", r.ID[:0], time.Time{}
	if r.ext {
		r.buf, r.own, r.ext = r.own, nil, false
	}
	r.fields, r.buf = r.fields[:0], r.buf[:0]
}

// Use makes buf, a buffer of the source's, the bytes the fields of an empty record index: the
// source then adds each value as a range of buf (AddField) instead of copying it, as the
// EventLogFile CSV reader does with its read buffer. The record never writes to buf (a
// transform's result, or a field added by Append, goes to the record's own buffer, which then
// starts with a copy of buf), and reads it until the next Reset: buf must not change before.
func (r *Record) Use(buf []byte) {
	if r.ext {
		r.buf = buf
		return
	}
	r.own, r.buf, r.ext = r.buf[:0], buf, true
}

// Columns makes the fields of an empty record the columns names, in order. The caller then
// gives each of the first set columns its value with SetColumn; the others are empty and of kind
// String. A source whose rows share one header (the EventLogFile CSV reader) passes the same
// slice for every row: the names are then written when the slice changes, not for every field
// of every row, and a Plan made for those names knows at once that the record follows them.
func (r *Record) Columns(names []string, set int) {
	n := len(names)
	if n > 0 && r.cols == unsafe.SliceData(names) && r.ncols == n && len(r.fields) == 0 {
		r.fields = r.fields[:n]
		for i := min(max(set, 0), n); i < n; i++ {
			f := &r.fields[i]
			f.kind, f.plain, f.start, f.end = String, false, 0, 0
		}
		return
	}
	r.fields = r.fields[:0]
	for _, name := range names {
		r.fields = append(r.fields, field{name: name})
	}
	r.cols, r.ncols = unsafe.SliceData(names), n
}

// SetColumn gives column i of Columns its value, buf[start:end] of the buffer given to Use, and
// kind; plain as for AddField.
func (r *Record) SetColumn(i int, kind Kind, plain bool, start, end int) {
	f := &r.fields[i]
	f.kind, f.plain, f.start, f.end = kind, plain, int32(start), int32(end)
}

// SetColumnCopy gives column i of Columns a copy of value, and kind: a value the source
// decoded or built instead of finding it whole in the buffer given to Use.
func (r *Record) SetColumnCopy(i int, kind Kind, value []byte) { r.set(i, kind, value) }

// Follows reports whether the record's fields are the columns names, in order, as Columns made
// them (true only for the very slice given to Columns).
func (r *Record) Follows(names []string) bool {
	return len(names) > 0 && r.cols == unsafe.SliceData(names) && r.ncols == len(names) && len(r.fields) == len(names)
}

// forget drops the column template before fields[:ncols] are written by anything else.
func (r *Record) forget() {
	if r.cols != nil && len(r.fields) < r.ncols {
		r.cols = nil
	}
}

// AddField adds a field whose value is buf[start:end] of the buffer given to Use. plain says
// the source has checked the value while reading it: ASCII with no '"', '\\' or control
// character, which a JSON string holds as it is; the line is then written without looking at
// the value again (a transform that changes the value drops the mark).
func (r *Record) AddField(name string, kind Kind, plain bool, start, end int) {
	r.forget()
	r.fields = append(r.fields, field{name: name, kind: kind, plain: plain, start: int32(start), end: int32(end)})
}

// writable makes buf the record's own before it is appended to.
func (r *Record) writable() {
	if r.ext {
		r.buf, r.own, r.ext = append(r.own[:0], r.buf...), nil, false
	}
}

// Append adds a field. The value is copied.
func (r *Record) Append(name string, kind Kind, value []byte) {
	r.forget()
	r.writable()
	start := len(r.buf)
	r.buf = append(r.buf, value...)
	r.fields = append(r.fields, field{name: name, kind: kind, start: int32(start), end: int32(len(r.buf))})
}

// AppendString adds a field from a string. The value is copied.
func (r *Record) AppendString(name string, kind Kind, value string) {
	r.forget()
	r.writable()
	start := len(r.buf)
	r.buf = append(r.buf, value...)
	r.fields = append(r.fields, field{name: name, kind: kind, start: int32(start), end: int32(len(r.buf))})
}

// AppendTo returns the record's value buffer for a field being assembled in place (a CSV cell
// decoded straight into the record): append the value's bytes to the returned slice and pass
// the result to EndField. Nothing may be appended to the record in between.
func (r *Record) AppendTo() []byte {
	r.writable()
	return r.buf
}

// EndField adds a field whose value is what was appended to the slice returned by AppendTo.
func (r *Record) EndField(name string, kind Kind, buf []byte) {
	r.forget()
	start := len(r.buf)
	r.buf = buf
	r.fields = append(r.fields, field{name: name, kind: kind, start: int32(start), end: int32(len(r.buf))})
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
	r.writable()
	start := len(r.buf)
	r.buf = append(r.buf, value...)
	r.fields[i] = field{name: r.fields[i].name, kind: kind, start: int32(start), end: int32(len(r.buf))}
}
