package salesforce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
)

// RowPage is one page of a SOQL answer decoded without maps: every record is a Row over the
// page's own bytes. It is what a source that reads many rows uses (Page and Record decode each
// row into a map[string]any, about a hundred allocations per row).
type RowPage struct {
	// TotalSize is Salesforce's count of matching rows (over all pages).
	TotalSize int
	// Done is true on the last page.
	Done bool
	// NextRecordsURL is the instance path of the next page when Done is false.
	NextRecordsURL string
	// Rows are the records of this page, in server order.
	Rows []Row

	tooling bool
	c       *Client
	body    []byte
	mem     *rowMem // the memory of Rows and of every row's fields
}

// rowMem is the memory of a page's rows, handed from a released page to the next one.
type rowMem struct {
	fields []rowField // every row's fields, row after row
	bounds []int      // per row: the index of its first field, where its object starts and ends
	rows   []Row
}

// Release hands the page's memory back to the client that read it, for the next page. Call it
// only when nothing refers to the page's rows or their values any more: the next answer is
// read over them.
func (p *RowPage) Release() {
	if p == nil || p.c == nil {
		return
	}
	c, b, m := p.c, p.body, p.mem
	p.Rows, p.c, p.body, p.mem = nil, nil, nil, nil
	c.putBody(b)
	if m != nil {
		clear(m.rows) // they refer to this page's text
		c.spareRows.Store(m)
	}
}

// ValueKind is the JSON type of a Row value.
type ValueKind uint8

// Kinds of Row values.
const (
	ValueNull   ValueKind = iota
	ValueString           // the text, unescaped
	ValueNumber           // the number's JSON text as sent (12899.0 stays 12899.0)
	ValueBool             // true or false
	ValueObject           // an object or array: its JSON text as sent
)

// Row is one SOQL record: its fields in the order Salesforce sent them, relationship objects
// flattened into dotted names ("LogUser.Username") after the object itself, "attributes"
// members left out (they stay in an object's JSON text). A null relationship is one null field.
// A Row's bytes belong to its page; it is valid as long as the page is referenced.
type Row struct {
	p          *rowText
	fields     []rowField
	start, end uint32 // the record object in p.body
}

// rowText is what the rows of a page share.
type rowText struct {
	body  []byte   // the page's JSON, as received
	esc   []byte   // strings that needed unescaping or UTF-8 repair, decoded
	names []string // flattened field names
}

// rowField is one value: a name index, a kind and the value's bytes in body or (fieldEsc) in
// esc.
type rowField struct {
	name       uint16
	kind       ValueKind
	flags      uint8 // fieldEsc, fieldPlain
	start, end uint32
}

// rowField flags.
const (
	fieldEsc   = 1 << iota // the value is in esc, decoded
	fieldPlain             // a string of ASCII with no '"', '\\' or control character
)

// Len returns the number of fields.
func (r Row) Len() int { return len(r.fields) }

// Name returns the flattened name of field i.
func (r Row) Name(i int) string { return r.p.names[r.fields[i].name] }

// Kind returns the kind of field i.
func (r Row) Kind(i int) ValueKind { return r.fields[i].kind }

// Value returns the bytes of field i (see ValueKind); nil for null. Do not modify them.
func (r Row) Value(i int) []byte {
	f := &r.fields[i]
	if f.kind == ValueNull {
		return nil
	}
	if f.flags&fieldEsc != 0 {
		return r.p.esc[f.start:f.end:f.end]
	}
	return r.p.body[f.start:f.end:f.end]
}

// Text returns the row's record object as Salesforce sent it, the JSON text that Span places
// values in. Do not modify it.
func (r Row) Text() []byte { return r.p.body[r.start:r.end:r.end] }

// Span returns where the bytes Value returns for field i lie in Text; ok is false for a null
// and for a string that was decoded (it had escapes or invalid UTF-8), whose bytes lie
// elsewhere.
func (r Row) Span(i int) (start, end int, ok bool) {
	f := &r.fields[i]
	if f.kind == ValueNull || f.flags&fieldEsc != 0 {
		return 0, 0, false
	}
	return int(f.start - r.start), int(f.end - r.start), true
}

// Plain reports whether field i is a string of ASCII characters other than '"', '\\' and
// control characters: text a JSON string holds as it is, without escaping.
func (r Row) Plain(i int) bool { return r.fields[i].flags&fieldPlain != 0 }

// Index returns the position of the field called path ("LogUser.Username"), or -1. The search
// starts at hint (the position after the previous field looked up, when fields are read in
// order) and wraps around.
func (r Row) Index(path string, hint int) int {
	if len(r.fields) == 0 {
		return -1
	}
	return r.indexOf(int32(slices.Index(r.p.names, path)), hint) //nolint:gosec // at most 0xffff names
}

// indexOf is Index by the number of a name of the page (-1: none).
func (r Row) indexOf(name int32, hint int) int {
	if name < 0 {
		return -1
	}
	n := len(r.fields)
	if hint < 0 || hint >= n {
		hint = 0
	}
	for k := range n {
		i := hint + k
		if i >= n {
			i -= n
		}
		if int32(r.fields[i].name) == name {
			return i
		}
	}
	return -1
}

// FieldIndex finds the fields of a fixed list of paths in rows. The paths are matched against
// a page's field names once, when the first row of the page is looked at; a row's fields are
// then told apart by their name's number instead of by comparing strings. A FieldIndex is not
// safe for concurrent use.
type FieldIndex struct {
	paths []string
	text  *rowText // the page ids belong to (kept alive by this reference, so never reused)
	ids   []int32  // per path: its index in text.names, or -1
	at    []int    // Locate's answer: per path, its position in the last row located
}

// NewFieldIndex returns a FieldIndex of paths (flattened names, as Row.Index takes them).
func NewFieldIndex(paths []string) *FieldIndex {
	x := &FieldIndex{paths: slices.Clone(paths), ids: make([]int32, len(paths)), at: make([]int, len(paths))}
	for j := range x.ids {
		x.ids[j], x.at[j] = -1, -1
	}
	return x
}

// match makes x's name numbers those of r's page.
func (x *FieldIndex) match(r Row) {
	if r.p != x.text {
		x.text = r.p
		for j, path := range x.paths {
			x.ids[j] = int32(slices.Index(r.p.names, path)) //nolint:gosec // at most 0xffff names
		}
	}
}

// Locate returns the position in r of every path, in the order of the paths (-1: absent):
// what Find returns for each. The slice is x's own, overwritten by the next call. Rows of a
// page have the same fields in the same order, so where a path was in the previous row is
// looked at first, and a row costs a comparison per path.
func (x *FieldIndex) Locate(r Row) []int {
	if len(r.fields) == 0 {
		for k := range x.at {
			x.at[k] = -1
		}
		return x.at
	}
	x.match(r)
	fields := r.fields
	hint := 0
	for k, id := range x.ids {
		if p := x.at[k]; p >= 0 && p < len(fields) && int32(fields[p].name) == id {
			hint = p + 1
			continue
		}
		p := r.indexOf(id, hint)
		x.at[k] = p
		if p >= 0 {
			hint = p + 1
		}
	}
	return x.at
}

// Find returns the position in r of the field called paths[k], or -1: what r.Index(paths[k],
// hint) returns.
func (x *FieldIndex) Find(r Row, k, hint int) int {
	if len(r.fields) == 0 {
		return -1
	}
	x.match(r)
	return r.indexOf(x.ids[k], hint)
}

// String returns the value at path as text: strings as they are, numbers in their JSON form,
// booleans as "true"/"false" (as Record.String). ok is false for missing, null and object values.
func (r Row) String(path string) (string, bool) {
	i := r.Index(path, 0)
	if i < 0 {
		return "", false
	}
	switch r.fields[i].kind {
	case ValueString, ValueNumber, ValueBool:
		return string(r.Value(i)), true
	}
	return "", false
}

// QueryRows runs a SOQL query and returns its first page as rows (see Query).
func (c *Client) QueryRows(ctx context.Context, soql string) (*RowPage, error) {
	if strings.TrimSpace(soql) == "" {
		return nil, errors.New("salesforce: empty SOQL query")
	}
	return c.fetchRowPage(ctx, c.dataPath("query")+"?q="+url.QueryEscape(soql), false)
}

// NextRowPage fetches the page after p by its nextRecordsUrl. It returns (nil, nil) when p is
// the last page.
func (c *Client) NextRowPage(ctx context.Context, p *RowPage) (*RowPage, error) {
	if p == nil || p.Done || p.NextRecordsURL == "" {
		return nil, nil
	}
	return c.fetchRowPage(ctx, p.NextRecordsURL, p.tooling)
}

func (c *Client) fetchRowPage(ctx context.Context, path string, tooling bool) (*RowPage, error) {
	kind, hdr, err := c.pageRequest(path, tooling)
	if err != nil {
		return nil, err
	}
	var page *RowPage
	err = c.authorizedJSONKeep(ctx, kind, path, hdr, true, func(b []byte) error {
		p, err := decodeRowPage(b, c.spareRows.Swap(nil))
		if err != nil {
			return err
		}
		p.tooling, p.c, p.body, page = tooling, c, b, p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// maxRowDepth bounds the nesting of a record's objects.
const maxRowDepth = 64

// DecodeRowPage decodes a query result (totalSize, done, nextRecordsUrl, records) from b, which
// the page keeps: b must not be modified afterwards. Values are read as encoding/json reads them:
// invalid UTF-8 and unpaired surrogates become U+FFFD.
func DecodeRowPage(b []byte) (*RowPage, error) {
	return decodeRowPage(b, nil)
}

// decodeRowPage is DecodeRowPage decoding the rows into spare (a released page's memory,
// grown when the page needs more), or, when spare is nil, into scratch memory copied once into
// slices of the page's size (a page that is never released keeps no spare capacity).
func decodeRowPage(b []byte, spare *rowMem) (*RowPage, error) {
	d := &rowDecoder{b: b, t: &rowText{body: b}, index: map[string]uint16{}, mem: spare, inPlace: spare != nil}
	if spare != nil {
		d.fields, d.bounds = spare.fields[:0], spare.bounds[:0]
	} else if s, ok := decoderScratch.Get().(*rowScratch); ok {
		d.fields, d.bounds = s.fields[:0], s.bounds[:0]
		defer func() {
			s.fields, s.bounds = d.fields[:0], d.bounds[:0]
			decoderScratch.Put(s)
		}()
	}
	p, err := d.page()
	if err != nil {
		return nil, fmt.Errorf("not a query result: %w", err)
	}
	return p, nil
}

// rowScratch is a decoder's working memory, kept between pages: the fields of a page are
// collected here and copied once into a slice of their exact size.
type rowScratch struct {
	fields []rowField
	bounds []int
}

var decoderScratch = sync.Pool{New: func() any { return new(rowScratch) }}

// nameState is what the decoder knows of a name while it decodes a page.
type nameState struct {
	seen uint32 // the last row (counted from 1) that had it
	raw  bool   // it has no '"', '\\' or control character (guess may compare it as sent)
}

type rowDecoder struct {
	b      []byte
	pos    int
	t      *rowText
	index  map[string]uint16 // name → index into t.names
	fields []rowField
	mem    *rowMem // the page's rows: the spare memory decoded into, or set by records
	// inPlace: fields and bounds are mem's (a spare), not scratch memory
	inPlace bool
	plain   bool        // the last string str scanned is plain (see Row.Plain)
	bounds  []int       // per record: the index of its first field, where its object starts and ends
	name    []byte      // the flattened name being built
	names   []nameState // per name (index into t.names)
	row     uint32
	order   []uint16 // the names of the previous record, in order
	ord     int      // fields of the current record so far
}

var errSyntax = errors.New("invalid JSON")

func (d *rowDecoder) syntax(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, d.pos)
}

func (d *rowDecoder) ws() {
	for d.pos < len(d.b) {
		switch d.b[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte (0 at the end).
func (d *rowDecoder) peek() byte {
	if d.pos < len(d.b) {
		if c := d.b[d.pos]; c > ' ' { // no whitespace: Salesforce sends compact JSON
			return c
		}
	}
	d.ws()
	if d.pos >= len(d.b) {
		return 0
	}
	return d.b[d.pos]
}

func (d *rowDecoder) expect(c byte) error {
	if d.peek() != c {
		return d.syntax("expected " + strconv.QuoteRune(rune(c)))
	}
	d.pos++
	return nil
}

// text reads the string at the current position and returns its bytes, unescaped (valid until
// the next string is read).
func (d *rowDecoder) text() ([]byte, error) {
	s, e, esc, err := d.str()
	if err != nil {
		return nil, err
	}
	if esc {
		return d.t.esc[s:e], nil
	}
	return d.b[s:e], nil
}

// key reads a member's name and the colon after it (the name is valid until the next string is
// read).
func (d *rowDecoder) key() ([]byte, error) {
	k, err := d.text()
	if err == nil {
		err = d.expect(':')
	}
	return k, err
}

// members calls member for each member of the object at the current position, with its key
// (valid until the next call); member must consume the value.
func (d *rowDecoder) members(member func(key []byte) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.syntax("expected a member name")
		}
		key, err := d.key()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return d.syntax("expected , or }")
		}
	}
}

func (d *rowDecoder) page() (*RowPage, error) {
	p := &RowPage{}
	var haveDone, haveRecords bool
	err := d.members(func(key []byte) error {
		// Names match as encoding/json matches them to struct fields: case-insensitively.
		switch {
		case bytes.EqualFold(key, []byte("totalSize")):
			s, e, err := d.number()
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(string(d.b[s:e]))
			if err != nil {
				return fmt.Errorf("totalSize: %w", err)
			}
			p.TotalSize = n
		case bytes.EqualFold(key, []byte("done")):
			v, err := d.boolean()
			if err != nil {
				return err
			}
			p.Done, haveDone = v, true
		case bytes.EqualFold(key, []byte("nextRecordsUrl")):
			if d.peek() == 'n' {
				return d.literal("null")
			}
			url, err := d.text()
			p.NextRecordsURL = string(url)
			return err
		case bytes.EqualFold(key, []byte("records")):
			if d.peek() == 'n' {
				return d.literal("null") // haveRecords stays false
			}
			rows, err := d.records()
			if err != nil {
				return err
			}
			p.Rows, haveRecords = rows, true
		default:
			return d.skip(0)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.peek() != 0 {
		return nil, d.syntax("data after the result")
	}
	if !haveDone || !haveRecords {
		return nil, errors.New("missing done or records")
	}
	if !p.Done && p.NextRecordsURL == "" {
		return nil, errors.New("done is false but nextRecordsUrl is missing")
	}
	p.mem = d.mem
	return p, nil
}

func (d *rowDecoder) records() ([]Row, error) {
	if err := d.expect('['); err != nil {
		return nil, err
	}
	d.fields, d.bounds = d.fields[:0], d.bounds[:0] // a repeated records member replaces the first
	if d.peek() == ']' {
		d.pos++
		return []Row{}, nil
	}
	for {
		d.name = d.name[:0]
		d.row++
		d.ord = 0
		if d.peek() != '{' {
			return nil, d.syntax("expected a record object")
		}
		d.bounds = append(d.bounds, len(d.fields), d.pos)
		if err := d.object(0); err != nil {
			return nil, err
		}
		d.bounds = append(d.bounds, d.pos)
		switch d.peek() {
		case ',':
			d.pos++
			continue
		case ']':
			d.pos++
		default:
			return nil, d.syntax("expected , or ]")
		}
		break
	}
	m := d.mem
	if !d.inPlace {
		m = &rowMem{fields: slices.Clone(d.fields), rows: make([]Row, len(d.bounds)/3)}
		d.mem = m
	} else {
		m.fields, m.bounds = d.fields, d.bounds
		m.rows = slices.Grow(m.rows[:0], len(d.bounds)/3)[:len(d.bounds)/3]
	}
	fields, rows := m.fields, m.rows
	for i := range rows {
		b := d.bounds[3*i:]
		lo, hi := b[0], len(fields)
		if i+1 < len(rows) {
			hi = b[3]
		}
		rows[i] = Row{p: d.t, fields: fields[lo:hi:hi], start: uint32(b[1]), end: uint32(b[2])} //nolint:gosec // bodies are bounded by maxJSONBody
	}
	return rows, nil
}

// object flattens the members of the object at the current position into fields named after
// d.name (the prefix, with its trailing dot).
func (d *rowDecoder) object(depth int) error {
	if depth > maxRowDepth {
		return d.syntax("objects nested too deep")
	}
	prefix := len(d.name)
	// members, written out: a callback would cost an allocation per record.
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.syntax("expected a member name")
		}
		if err := d.nextMember(prefix, depth); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return d.syntax("expected , or }")
		}
	}
}

// attributesKey is the member every record object of Salesforce starts with, as sent.
const attributesKey = `"attributes"`

// nextMember reads the member (name and value) at the current position, a '"', of an object
// whose members' names start with d.name[:prefix].
func (d *rowDecoder) nextMember(prefix, depth int) error {
	if rest := d.b[d.pos:]; len(rest) > len(attributesKey) && string(rest[:len(attributesKey)]) == attributesKey {
		d.pos += len(attributesKey)
		if err := d.expect(':'); err != nil {
			return err
		}
		return d.skip(depth + 1)
	}
	if name, ok := d.guess(prefix); ok {
		if err := d.expect(':'); err != nil {
			return err
		}
		return d.value(name, depth)
	}
	key, err := d.key()
	if err != nil {
		return err
	}
	if string(key) == "attributes" {
		return d.skip(depth + 1)
	}
	name, err := d.intern(key, prefix)
	if err != nil {
		return err
	}
	return d.value(name, depth)
}

// guess reads the member name at the current position (a '"') when it is the name at this place
// of the previous record, compared with the body's bytes as sent: a name without escapes,
// closed by a quote, is that name. It leaves the position after the closing quote.
func (d *rowDecoder) guess(prefix int) (uint16, bool) {
	k := d.ord
	if k >= len(d.order) {
		return 0, false
	}
	i := d.order[k]
	ns, n := &d.names[i], d.t.names[i]
	if !ns.raw || ns.seen == d.row || len(n) < prefix || prefix > 0 && n[:prefix] != string(d.name[:prefix]) {
		return 0, false
	}
	key, b := n[prefix:], d.b[d.pos+1:]
	if len(b) <= len(key) || b[len(key)] != '"' || string(b[:len(key)]) != key {
		return 0, false
	}
	d.pos += len(key) + 2
	d.ord++
	ns.seen = d.row
	return i, true
}

// value reads the value of the member called t.names[name] of a record's object into fields.
func (d *rowDecoder) value(name uint16, depth int) error {
	f := rowField{name: name}
	switch c := d.peek(); {
	case c == '"':
		s, e, esc, err := d.str()
		if err != nil {
			return err
		}
		f.kind, f.start, f.end = ValueString, uint32(s), uint32(e) //nolint:gosec // bodies are bounded by maxJSONBody
		switch {
		case esc:
			f.flags = fieldEsc
		case d.plain:
			f.flags = fieldPlain
		}
	case c == 'n':
		if err := d.literal("null"); err != nil {
			return err
		}
	case c == 't' || c == 'f':
		s := d.pos
		if _, err := d.boolean(); err != nil {
			return err
		}
		f.kind, f.start, f.end = ValueBool, uint32(s), uint32(d.pos) //nolint:gosec // bounded
	case c == '-' || c >= '0' && c <= '9':
		s, e, err := d.number()
		if err != nil {
			return err
		}
		f.kind, f.start, f.end = ValueNumber, uint32(s), uint32(e) //nolint:gosec // bounded
	case c == '{':
		at := len(d.fields)
		d.fields = append(d.fields, rowField{name: name, kind: ValueObject, start: uint32(d.pos)}) //nolint:gosec // bounded
		d.name = append(append(d.name[:0], d.t.names[name]...), '.')
		if err := d.object(depth + 1); err != nil {
			return err
		}
		d.fields[at].end = uint32(d.pos) //nolint:gosec // bounded
		return nil
	case c == '[':
		s := d.pos
		if err := d.skip(depth + 1); err != nil {
			return err
		}
		f.kind, f.start, f.end = ValueObject, uint32(s), uint32(d.pos) //nolint:gosec // bounded
	default:
		return d.syntax("expected a value")
	}
	d.fields = append(d.fields, f)
	return nil
}

// intern returns the index of the flattened name d.name[:prefix] + key; a name the current row
// already has is an error (a map would keep only the last value).
func (d *rowDecoder) intern(key []byte, prefix int) (uint16, error) {
	// Records of a page have the same fields in the same order: the name at this place of the
	// previous record is the likely one, compared in place (without building the name).
	k := d.ord
	d.ord++
	if k < len(d.order) {
		i := d.order[k]
		if n := d.t.names[i]; len(n) == prefix+len(key) && n[prefix:] == string(key) && n[:prefix] == string(d.name[:prefix]) && d.names[i].seen != d.row {
			d.names[i].seen = d.row
			return i, nil
		}
	}
	d.name = append(d.name[:prefix], key...)
	i, err := d.lookup()
	if err != nil {
		return 0, err
	}
	if k < len(d.order) {
		d.order[k] = i
	} else {
		d.order = append(d.order, i)
	}
	return i, nil
}

// lookup is intern's slow path, through the map of names.
func (d *rowDecoder) lookup() (uint16, error) {
	if i, ok := d.index[string(d.name)]; ok {
		if d.names[i].seen == d.row {
			return 0, d.syntax(fmt.Sprintf("field %q twice in one record", d.name))
		}
		d.names[i].seen = d.row
		return i, nil
	}
	if len(d.t.names) > 0xffff {
		return 0, errors.New("too many distinct field names")
	}
	i := uint16(len(d.t.names)) //nolint:gosec // checked above
	s := string(d.name)
	d.t.names = append(d.t.names, s)
	d.names = append(d.names, nameState{seen: d.row, raw: !strings.ContainsFunc(s, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 })})
	d.index[s] = i
	return i, nil
}

// skip validates and skips the value at the current position.
func (d *rowDecoder) skip(depth int) error {
	if depth > maxRowDepth {
		return d.syntax("values nested too deep")
	}
	switch c := d.peek(); {
	case c == '"':
		_, _, _, err := d.str()
		return err
	case c == 'n':
		return d.literal("null")
	case c == 't' || c == 'f':
		_, err := d.boolean()
		return err
	case c == '-' || c >= '0' && c <= '9':
		_, _, err := d.number()
		return err
	case c == '{':
		return d.members(func([]byte) error { return d.skip(depth + 1) })
	case c == '[':
		d.pos++
		if d.peek() == ']' {
			d.pos++
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.pos++
			case ']':
				d.pos++
				return nil
			default:
				return d.syntax("expected , or ]")
			}
		}
	}
	return d.syntax("expected a value")
}

func (d *rowDecoder) literal(lit string) error {
	if !bytes.HasPrefix(d.b[d.pos:], []byte(lit)) {
		return d.syntax("expected " + lit)
	}
	d.pos += len(lit)
	return nil
}

func (d *rowDecoder) boolean() (bool, error) {
	switch d.peek() {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	}
	return false, d.syntax("expected true or false")
}

// number scans a JSON number and returns its bounds.
func (d *rowDecoder) number() (start, end int, err error) {
	d.ws()
	b, i := d.b, d.pos
	start = i
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		d.pos = i
		return 0, 0, d.syntax("expected a number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			d.pos = i
			return 0, 0, d.syntax("expected a digit after the decimal point")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.pos = i
			return 0, 0, d.syntax("expected a digit in the exponent")
		}
	}
	d.pos = i
	return start, i, nil
}

// str scans the string at the current position. A string with neither escapes nor invalid
// UTF-8 is returned as its bounds in the body; any other is decoded into t.esc (esc true).
func (d *rowDecoder) str() (start, end int, esc bool, err error) {
	if d.peek() != '"' {
		return 0, 0, false, d.syntax("expected a string")
	}
	b := d.b
	start = d.pos + 1
	i := start + jsonenc.Plain(b[start:])
	if i < len(b) && b[i] == '"' {
		d.pos, d.plain = i+1, true
		return start, i, false, nil
	}
	d.plain = false
	ascii := true
	for i < len(b) {
		c := b[i]
		if c == '"' {
			if ascii || utf8.Valid(b[start:i]) {
				d.pos = i + 1
				return start, i, false, nil
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	if i >= len(b) {
		d.pos = i
		return 0, 0, false, d.syntax("unterminated string")
	}
	return d.unquote(start)
}

// unquote decodes the string starting at body offset start into t.esc, as encoding/json does.
func (d *rowDecoder) unquote(start int) (int, int, bool, error) {
	b := d.b
	out := d.t.esc
	s := len(out)
	for i := start; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.t.esc = out
			return s, len(out), true, nil
		case c < 0x20:
			d.pos = i
			return 0, 0, false, d.syntax("control character in string")
		case c == '\\':
			if i+1 >= len(b) {
				d.pos = i
				return 0, 0, false, d.syntax("unterminated escape")
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
				i += 2
			case 'b':
				out, i = append(out, '\b'), i+2
			case 'f':
				out, i = append(out, '\f'), i+2
			case 'n':
				out, i = append(out, '\n'), i+2
			case 'r':
				out, i = append(out, '\r'), i+2
			case 't':
				out, i = append(out, '\t'), i+2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					d.pos = i
					return 0, 0, false, d.syntax("invalid \\u escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok := rune(-1), false
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok = hex4(b, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				d.pos = i
				return 0, 0, false, d.syntax("invalid escape")
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				out = append(out, "\ufffd"...)
			} else {
				out = append(out, b[i:i+n]...)
			}
			i += n
		}
	}
	d.pos = len(b)
	return 0, 0, false, d.syntax("unterminated string")
}

// hex4 decodes the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// ObjectJSON returns an object or array value as encoding/json writes the decoded value
// (members sorted by name, as json.Marshal writes a map): what a Record value of the same field
// is marshalled to.
func ObjectJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
