package shape

import (
	"bytes"
	"encoding/binary"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unsafe"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
	"github.com/sf2loki/sf2loki/loki"
)

// Shaper is the compiled shaping configuration. It is immutable and safe for concurrent use;
// each stream makes its own Plans.
type Shaper struct {
	opts       Options
	transforms []compiled
	types      map[string]*TypeRule // by lower-cased type
	static     []loki.Label
	aliases    map[string]string
	fieldOps   bool      // a hash, mask or regex_replace transform exists
	lines      *linePool // shared by the Shapers With makes
}

// compiled is a transform with its regular expression compiled.
type compiled struct {
	Transform
	index int
	re    *regexp.Regexp
}

// New validates opts and returns a Shaper. The error joins every *OptionError found.
func New(opts Options) (*Shaper, error) {
	if err := Validate(opts); err != nil {
		return nil, err
	}
	s := &Shaper{opts: opts, types: map[string]*TypeRule{}, aliases: mergeAliases(opts.CategoryAliases), lines: &linePool{}}
	s.opts.Salt = slices.Clone(opts.Salt)
	for i, t := range opts.Transforms {
		c := compiled{Transform: t, index: i}
		if t.Op == OpRegexReplace {
			c.re = regexp.MustCompile(t.Pattern) // validated above
		}
		if t.Op == OpHash || t.Op == OpMask || t.Op == OpRegexReplace {
			s.fieldOps = true
		}
		s.transforms = append(s.transforms, c)
	}
	for i := range opts.Types {
		tr := opts.Types[i]
		s.types[strings.ToLower(tr.Type)] = &tr
	}
	static := map[string]string{"job": DefaultJob, "service_name": DefaultJob}
	maps.Copy(static, opts.Labels)
	return s.WithMap(static), nil
}

// WithMap is With of the labels of a map, in the order of their names.
func (s *Shaper) WithMap(labels map[string]string) *Shaper {
	out := make([]loki.Label, 0, len(labels))
	for _, n := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, loki.Label{Name: n, Value: labels[n]})
	}
	return s.With(out...)
}

// With returns a Shaper that adds labels to the static labels (for example org and sf_org_id
// for one org's sources); a label of the same name is replaced.
func (s *Shaper) With(labels ...loki.Label) *Shaper {
	c := *s
	c.static = slices.Concat(s.static, labels)
	return &c
}

// PromotedLabelNames returns the names of every label a type promotes, sorted: the Loki
// client's label guard must allow them (loki.LabelOptions.ExtraAllowed).
func (s *Shaper) PromotedLabelNames() []string {
	var out []string
	for _, tr := range s.types {
		for _, f := range tr.Labels {
			out = append(out, LabelName(f))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Category returns the event category of a type, object or topic name with this Shaper's
// aliases (see the package function Category).
func (s *Shaper) Category(name string) string { return categoryWith(name, s.aliases) }

// Schema describes the records a Plan shapes.
type Schema struct {
	// Source is the source's name, the source label (eventlogfile, soql, apexlog, pubsub).
	Source string
	// Type is the event type or object name: it selects the per-type rules and is the
	// event_type label.
	Type string
	// Fields are the field names records have, in order (an EventLogFile header, a SOQL
	// field list). Records may deviate (a ragged row's _extra field): such records take a
	// slower path, with the same result.
	Fields []string
	// Labels are further per-stream labels (sf_org_id, org); they win over the static labels.
	Labels []loki.Label
	// LineField, when set, makes that field's value the line verbatim (an ApexLog body)
	// instead of a JSON object; every other field is then sent as structured metadata.
	LineField string
}

// Plan shapes the records of one Schema. It holds reusable buffers: use it from one goroutine.
type Plan struct {
	typ         string
	names       []string
	follows     []string // a source's column slice whose records have names (Record.Columns)
	rules       []*fieldRules
	byName      map[string]*fieldRules // field name → rules
	drops       []dropRule
	dropIdx     [][]int // per drop rule, per condition: schema position or -1
	sampleAll   bool
	sampleLimit uint64
	sampleField string
	sampleIdx   int
	typeSeed    uint64
	base        loki.Labels
	promoted    []string // label names, in promotion order
	labelCache  map[string]loki.Labels
	lineField   string
	omitEmpty   bool
	sh          *Shaper
	h           *hasher

	// What appendObject does with a record that has the schema's fields in order: the kept
	// columns with their member names, and apart from them the few that are promoted or
	// metadata, so that the hot loop reads one small value per column and no rules.
	objCols   []objCol
	labelCols []labelCol
	metaCols  []metaCol

	chunk     []byte     // lines handed out so far; the next row is shaped after them
	cur       *lineChunk // the chunk of chunk (lines.go)
	handed    int32      // lines handed out in cur, not yet added to its count (lines.go)
	last      *lineChunk // the chunk of the last entry handed out; nil when skipped or its own
	keysLen   int        // the JSON member names of every schema field, with separators
	scratch   []byte     // mask output: only ever memory a mask appended to (fieldOp.apply)
	keyBuf    []byte     // label cache key
	promoVals [][]byte   // promoted values of the current row
	metaRefs  []metaRef  // metadata of the current row
	scrub     []scrubPair
	scrubBuf  []byte
	repl      []byte
	metaChunk []loki.Label
}

// fieldRules is what happens to one field.
type fieldRules struct {
	ops   []fieldOp
	drop  bool
	meta  string // structured-metadata name, "" when not metadata
	label int    // index into Plan.promoted, -1 when not promoted
	line  bool   // the LineField
	// member is the JSON member name between separators: `","NAME":"`. A member is written
	// from it in one copy: from offset 0 after a plain string value (whose closing quote it
	// supplies), from 1 after any other value, from 2 first; without its last byte when the
	// value is not a plain string.
	member []byte
	hashes bool // one of ops is a hash
}

// objCol is a kept (not dropped) schema column of an aligned record: its position and its
// fieldRules.member.
type objCol struct {
	idx    int
	member []byte
}

// labelCol is a kept schema column whose value is promoted to label Plan.promoted[label].
type labelCol struct{ idx, label int }

// metaCol is a kept schema column whose value is sent as structured metadata named name.
type metaCol struct {
	idx  int
	name string
}

type metaRef struct {
	name       string
	start, end int
}

// maxLabelCache bounds the distinct promoted-label sets cached per Plan; beyond it label sets
// are built per record (correct, only slower).
const maxLabelCache = 4096

// metaChunkSize is how many metadata pairs are allocated at once and handed out as slices.
const metaChunkSize = 1024

// lineChunkSize is how many bytes of lines are allocated at once. A row is shaped straight into
// the chunk, and its entry's line and metadata values are strings over the bytes written: no
// copy of the line and no allocation per row. A chunk is never written again where it was
// handed out, so the strings stay immutable, until every entry over it is released (Lines): then
// it is reused; an entry never released leaves its chunk to the collector.
const lineChunkSize = 64 << 10

// Plan resolves the rules for records of schema.
func (s *Shaper) Plan(schema Schema) *Plan {
	p := &Plan{
		typ: schema.Type, names: slices.Clone(schema.Fields), byName: map[string]*fieldRules{},
		lineField: schema.LineField, omitEmpty: s.opts.OmitEmpty, sh: s, sampleIdx: -1,
		labelCache: map[string]loki.Labels{},
	}
	tr := s.types[strings.ToLower(schema.Type)]
	if tr != nil {
		p.promoted = make([]string, len(tr.Labels))
		for i, f := range tr.Labels {
			p.promoted[i] = LabelName(f)
		}
		p.promoVals = make([][]byte, len(tr.Labels))
	}
	if s.needsHasher() {
		p.h = newHasher(s.opts.Salt)
	}
	p.rules = make([]*fieldRules, len(p.names))
	for i, n := range p.names {
		fr := p.rulesFor(n)
		p.rules[i] = fr
		p.keysLen += len(fr.member) - 2
		if fr.drop {
			continue
		}
		p.objCols = append(p.objCols, objCol{idx: i, member: fr.member})
		if fr.label >= 0 {
			p.labelCols = append(p.labelCols, labelCol{idx: i, label: fr.label})
		}
		if fr.meta != "" {
			p.metaCols = append(p.metaCols, metaCol{idx: i, name: fr.meta})
		}
	}
	for _, c := range s.transforms {
		if c.Op != OpDropRow || !c.appliesTo(schema.Type) {
			continue
		}
		name := c.Name
		if name == "" {
			name = "drop_row_" + itoa(c.index)
		}
		d := dropRule{reason: dropRowPrefix + name}
		idx := make([]int, 0, len(c.Match))
		for _, f := range slices.Sorted(maps.Keys(c.Match)) {
			d.conds = append(d.conds, cond{name: f, glob: c.Match[f]})
			idx = append(idx, p.position(f))
		}
		p.drops = append(p.drops, d)
		p.dropIdx = append(p.dropIdx, idx)
	}
	p.sampleAll = true
	if tr != nil && tr.SampleRate > 0 && tr.SampleRate < 1 {
		p.sampleAll = false
		p.sampleLimit = uint64(tr.SampleRate * (1 << 63) * 2)
		p.sampleField = tr.SampleField
		if p.sampleField != "" {
			p.sampleIdx = p.position(p.sampleField)
		}
		p.typeSeed = fnv1a(fnvOffset, []byte(strings.ToLower(schema.Type)))
	}
	labels := slices.Concat(s.static, []loki.Label{{Name: "source", Value: schema.Source}, {Name: "event_type", Value: schema.Type}}, schema.Labels)
	p.base = loki.NewLabels(labels...)
	return p
}

func (s *Shaper) needsHasher() bool {
	for _, c := range s.transforms {
		if c.Op == OpHash {
			return true
		}
	}
	return false
}

// position returns the schema position of a field (case-insensitive), or -1.
func (p *Plan) position(name string) int {
	for i, n := range p.names {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// rulesFor computes (once per name) what happens to the field called name.
func (p *Plan) rulesFor(name string) *fieldRules {
	if r, ok := p.byName[name]; ok {
		return r
	}
	s := p.sh
	member := append(jsonenc.AppendString([]byte(`",`), name, jsonenc.LiteralFFFD), ':', '"')
	r := &fieldRules{label: -1, member: append(make([]byte, 0, len(member)+window), member...)}
	for _, c := range s.transforms {
		if c.Op == OpDropRow || !c.appliesTo(p.typ) || !matchAnyName(c.Fields, name) {
			continue
		}
		switch c.Op {
		case OpDropField:
			r.drop = true
		case OpHash, OpMask:
			r.hashes = r.hashes || c.Op == OpHash
			mode := c.Mode
			if mode == "" {
				mode = MaskAuto
			}
			r.ops = append(r.ops, fieldOp{op: c.Op, mode: mode})
		case OpRegexReplace:
			r.ops = append(r.ops, fieldOp{op: c.Op, re: c.re, repl: []byte(c.Replacement)})
		}
	}
	tr := s.types[strings.ToLower(p.typ)]
	switch {
	case p.lineField != "":
		r.line = strings.EqualFold(name, p.lineField)
		if !r.line {
			r.meta = metadataName(name)
		}
	case matchAnyName(s.opts.Metadata, name) || tr != nil && matchAnyName(tr.Metadata, name):
		r.meta = metadataName(name)
	}
	if tr != nil {
		for i, f := range tr.Labels {
			if strings.EqualFold(f, name) {
				r.label = i
				r.meta = "" // a label is not repeated as metadata
			}
		}
	}
	if r.line {
		r.label = -1
	}
	p.byName[name] = r
	return r
}

// metadataName turns a field name into a structured-metadata name: characters outside
// [A-Za-z0-9_] become '_' (LogUser.Username → LogUser_Username), as Loki would normalise them.
func metadataName(name string) string {
	if strings.IndexFunc(name, func(r rune) bool { return !isNameChar(r) }) < 0 {
		return name
	}
	return strings.Map(func(r rune) rune {
		if isNameChar(r) {
			return r
		}
		return '_'
	}, name)
}

func isNameChar(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// Labels returns the stream labels of records without promoted fields (the stream's base set).
func (p *Plan) Labels() loki.Labels { return p.base }

// SkipSampled is the skip reason of a record sampled out.
const SkipSampled = "sampled"

// dropRowPrefix starts the skip reason of a record a drop_row rule dropped: "drop_row:<name>".
const dropRowPrefix = "drop_row:"

// DropRule returns the name of the drop_row rule a skip reason Shape returned names.
func DropRule(skip string) (string, bool) { return strings.CutPrefix(skip, dropRowPrefix) }

// Shape turns r into an entry. When the record is dropped (a drop_row rule matched, or it was
// sampled out) skip names why ("drop_row:<name>", "sampled") and the entry is zero: the source
// emits a Skip record so the cursor still advances.
//
// Order: drop_row rules are evaluated first, on the values as the source read them (so a rule
// is written against what Salesforce sends, and dropped records cost nothing more); then
// sampling, on the sample field's original value or the record id; then the field transforms in
// configured order; then routing. r is modified (transformed values) and may be Reset after.
func (p *Plan) Shape(r *Record) (e loki.Entry, skip string) {
	skip = p.ShapeTo(r, &e)
	return e, skip
}

// ShapeTo is Shape writing the entry into *e, which it overwrites whole (zero when the record is
// dropped), for a source that keeps the entry in a record of its own: an entry is 80 bytes, and
// a copy of it read back right after it was written costs more than its instructions.
func (p *Plan) ShapeTo(r *Record, e *loki.Entry) (skip string) {
	p.last = nil
	aligned := p.aligned(r)
	for i := range p.drops {
		if p.dropMatches(r, aligned, i) {
			*e = loki.Entry{}
			return p.drops[i].reason
		}
	}
	if !p.sampleAll && !p.sampled(r, aligned) {
		*e = loki.Entry{}
		return SkipSampled
	}
	if p.sh.fieldOps {
		p.transform(r, aligned)
	}
	out := p.lineBuf(r)
	metas := p.metaRefs[:0]
	for i := range p.promoVals {
		p.promoVals[i] = nil
	}
	if p.lineField == "" {
		out, metas = p.appendObject(out, metas, r, aligned)
	} else {
		lineIdx := -1
		for i := range r.fields {
			fr := p.fieldRules(r, aligned, i)
			if fr.drop {
				continue
			}
			v := r.Value(i)
			if fr.label >= 0 {
				p.promoVals[fr.label] = v
			}
			if fr.line {
				lineIdx = i
				continue
			}
			if fr.meta != "" && len(v) > 0 && r.fields[i].kind != Null {
				metas = append(metas, metaRef{name: fr.meta, start: i})
			}
		}
		if lineIdx >= 0 {
			out = append(out, validUTF8(p.scratch, r.Value(lineIdx))...)
		}
	}
	lineLen := len(out)
	for k := range metas {
		v := validUTF8(p.scratch, r.Value(metas[k].start))
		metas[k].start = len(out)
		out = append(out, v...)
		metas[k].end = len(out)
	}
	all := p.handOut(out)
	*e = loki.Entry{Timestamp: r.Time, Line: all[:lineLen], Labels: p.labels()}
	if len(metas) > 0 {
		sortMeta(metas)
		if len(p.metaChunk) < len(metas) {
			p.metaChunk = make([]loki.Label, max(metaChunkSize, len(metas)))
		}
		md := p.metaChunk[:len(metas):len(metas)]
		p.metaChunk = p.metaChunk[len(metas):]
		for k, m := range metas {
			md[k] = loki.Label{Name: m.name, Value: all[m.start:m.end]}
		}
		e.Metadata = md
	}
	p.metaRefs = metas
	return ""
}

// appendObject appends r's JSON object line to out and the record's metadata fields to metas
// (as field indexes), noting the promoted values. It is the hot loop of the EventLogFile
// pipeline: a member and a plain value take one copy each.
func (p *Plan) appendObject(out []byte, metas []metaRef, r *Record, aligned bool) ([]byte, []metaRef) {
	if !aligned {
		return p.appendObjectByName(out, metas, r)
	}
	fields := r.fields[:len(p.names)]
	for _, c := range p.labelCols {
		f := &fields[c.idx]
		p.promoVals[c.label] = r.buf[f.start:f.end:f.end]
	}
	for _, c := range p.metaCols {
		if f := &fields[c.idx]; f.end > f.start && f.kind != Null {
			metas = append(metas, metaRef{name: c.name, start: c.idx})
		}
	}
	out = append(out, '{')
	from := 2 // where the next member starts in objCol.member: no separator yet
	for k := range p.objCols {
		c := &p.objCols[k]
		f := &fields[c.idx]
		n := int(f.end - f.start)
		if p.omitEmpty && n == 0 {
			continue
		}
		if f.plain && f.kind == String {
			out = appendWindow(out, c.member[from:], len(c.member)-from)
			out = appendWindow(out, r.buf[f.start:], n)
			from = 0 // the next member closes the string
			continue
		}
		out = appendWindow(out, c.member[from:], len(c.member)-1-from)
		out = appendJSONValue(out, f.kind, r.buf[f.start:f.end:f.end])
		from = 1
	}
	if from == 0 {
		out = append(out, '"')
	}
	return append(out, '}'), metas
}

// appendObjectByName is appendObject of a record whose fields are not the schema's in order:
// each field's rules are found by its name.
func (p *Plan) appendObjectByName(out []byte, metas []metaRef, r *Record) ([]byte, []metaRef) {
	out = append(out, '{')
	from := 2 // where the next member starts in fieldRules.member: no separator yet
	for i := range r.fields {
		fr := p.rulesFor(r.fields[i].name)
		if fr.drop {
			continue
		}
		f := &r.fields[i]
		v := r.buf[f.start:f.end:f.end]
		if fr.label >= 0 {
			p.promoVals[fr.label] = v
		}
		if fr.meta != "" && len(v) > 0 && f.kind != Null {
			metas = append(metas, metaRef{name: fr.meta, start: i})
		}
		if p.omitEmpty && len(v) == 0 {
			continue
		}
		if f.plain && f.kind == String {
			out = appendWindow(out, fr.member[from:], len(fr.member)-from)
			out = appendWindow(out, r.buf[f.start:], len(v))
			from = 0 // the next member closes the string
			continue
		}
		out = appendWindow(out, fr.member[from:], len(fr.member)-1-from)
		out = appendJSONValue(out, f.kind, v)
		from = 1
	}
	if from == 0 {
		out = append(out, '"')
	}
	return append(out, '}'), metas
}

// lineBuf returns an empty buffer, in the current chunk, with room for r's line as it is likely
// to be written (every value and member name once, plus the JSON punctuation); a new chunk is
// started when the current one has not that much left. Escapes may still outgrow it: then
// append moves the line to memory of its own, which handOut takes as it is.
func (p *Plan) lineBuf(r *Record) []byte {
	need := len(r.buf) + p.keysLen + 2*len(r.fields) + 2 + window
	if cap(p.chunk)-len(p.chunk) < need {
		p.newChunk(need)
	}
	return p.chunk[len(p.chunk):len(p.chunk)]
}

// handOut returns the shaped bytes as a string without copying them and makes sure they are
// never written again: when they lie in the current chunk, the chunk's next row starts after
// them.
func (p *Plan) handOut(out []byte) string {
	if len(out) == 0 {
		return ""
	}
	if free := p.chunk[len(p.chunk):cap(p.chunk)]; len(free) > 0 && unsafe.SliceData(free) == unsafe.SliceData(out) {
		p.chunk = p.chunk[:len(p.chunk)+len(out)]
		p.handed++
		p.last = p.cur
	}
	return unsafe.String(unsafe.SliceData(out), len(out))
}

func (p *Plan) fieldRules(r *Record, aligned bool, i int) *fieldRules {
	if aligned {
		return p.rules[i]
	}
	return p.rulesFor(r.fields[i].name)
}

// MinScrubBytes is the shortest hashed value that is also replaced inside other fields; shorter
// values are too common to identify anyone and would garble unrelated text.
const MinScrubBytes = 6

// transform applies the field transforms in place. A hashed field's original value is then
// also replaced, by the same hash, wherever it appears inside another field (USER_ID inside
// USER_ID_DERIVED, an e-mail inside a URI), so a hashed value never leaves in clear.
func (p *Plan) transform(r *Record, aligned bool) {
	scrub, buf := p.scrub[:0], p.scrubBuf[:0]
	for i := range r.fields {
		fr := p.fieldRules(r, aligned, i)
		if fr.drop || len(fr.ops) == 0 {
			continue
		}
		orig := r.Value(i)
		origStart := len(buf)
		if fr.hashes && len(orig) >= MinScrubBytes && r.fields[i].kind != Null {
			buf = append(buf, orig...)
		}
		v, kind := orig, r.fields[i].kind
		for j := range fr.ops {
			var nv []byte
			nv, kind = fr.ops[j].apply(p.h, v, kind, &p.scratch)
			r.set(i, kind, nv)
			v = r.Value(i)
		}
		if len(buf) > origStart {
			origEnd := len(buf)
			buf = append(buf, v...)
			scrub = append(scrub, scrubPair{origStart, origEnd, len(buf)})
		}
	}
	p.scrub, p.scrubBuf = scrub, buf
	if len(scrub) == 0 {
		return
	}
	for i := range r.fields {
		fr := p.fieldRules(r, aligned, i)
		if fr.drop || fr.hashes || r.fields[i].kind == Null {
			continue
		}
		for _, sp := range scrub {
			orig, hashed := buf[sp.start:sp.mid], buf[sp.mid:sp.end]
			if v := r.Value(i); bytes.Contains(v, orig) {
				p.repl = appendReplaceAll(p.repl[:0], v, orig, hashed)
				r.set(i, String, p.repl)
			}
		}
	}
}

// appendReplaceAll appends s with every occurrence of old replaced by new.
func appendReplaceAll(dst, s, old, new []byte) []byte {
	for {
		i := bytes.Index(s, old)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, new...)
		s = s[i+len(old):]
	}
}

// scrubPair is a hashed field's original value (scrubBuf[start:mid]) and its hash [mid:end].
type scrubPair struct{ start, mid, end int }

// aligned reports whether r has exactly the schema's fields in order (the fast path).
func (p *Plan) aligned(r *Record) bool {
	if len(r.fields) != len(p.names) {
		return false
	}
	if p.follows != nil && r.Follows(p.follows) {
		return true
	}
	for i := range r.fields {
		if r.fields[i].name != p.names[i] {
			return false
		}
	}
	if r.cols != nil && r.ncols == len(r.fields) {
		// The record's columns are the plan's: rows with the same template follow them too.
		p.follows = unsafe.Slice(r.cols, r.ncols)
	}
	return true
}

// value returns the original value of a field by schema position or name.
func (p *Plan) value(r *Record, aligned bool, pos int, name string) []byte {
	if aligned {
		if pos < 0 {
			return nil
		}
		return r.Value(pos)
	}
	v, _ := r.Lookup(name)
	return v
}

func (p *Plan) dropMatches(r *Record, aligned bool, i int) bool {
	d := &p.drops[i]
	for j, c := range d.conds {
		if !globMatch(c.glob, p.value(r, aligned, p.dropIdx[i][j], c.name)) {
			return false
		}
	}
	return true
}

// UsesID reports whether Shape reads a record's ID: only to sample it, when its type keeps a
// fraction of its records. A source may leave the ID empty otherwise.
func (p *Plan) UsesID() bool { return !p.sampleAll }

// sampled reports whether the record is kept by its type's sample rate.
func (p *Plan) sampled(r *Record, aligned bool) bool {
	var key []byte
	if p.sampleField != "" {
		key = p.value(r, aligned, p.sampleIdx, p.sampleField)
	}
	if len(key) == 0 {
		key = r.ID
	}
	return mix64(fnv1a(p.typeSeed, key)) < p.sampleLimit
}

// labels returns the label set of the current row, cached per distinct promoted values.
func (p *Plan) labels() loki.Labels {
	if len(p.promoted) == 0 {
		return p.base
	}
	// Each value is prefixed by its length: values are any bytes, so no separator could tell
	// ("a\xff", "b") from ("a", "\xffb").
	k := p.keyBuf[:0]
	for _, v := range p.promoVals {
		k = binary.AppendUvarint(k, uint64(len(v)))
		k = append(k, v...)
	}
	p.keyBuf = k
	if l, ok := p.labelCache[string(k)]; ok {
		return l
	}
	pairs := make([]loki.Label, len(p.promoted))
	for i, n := range p.promoted {
		pairs[i] = loki.Label{Name: n, Value: string(validUTF8(nil, p.promoVals[i]))}
	}
	l := p.base.With(pairs...)
	if len(p.labelCache) < maxLabelCache {
		p.labelCache[string(k)] = l
	}
	return l
}

// sortMeta sorts metadata by name (insertion sort: a handful of pairs).
func sortMeta(m []metaRef) {
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && m[j].name < m[j-1].name; j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv1a(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// mix64 is splitmix64's finaliser: FNV's low bits are weak, and the sample decision compares
// the whole word.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// window is how many bytes appendWindow moves at once.
const window = 32

// appendWindow appends src[:n] to out. When n is at most window and both src and out have that
// many bytes of capacity, it moves window bytes in two fixed-size moves and keeps n of them: no
// call, where a short append calls memmove. A member name is allocated with window bytes of
// capacity beyond it, and a line's buffer with as many beyond its likely length, for this; a value
// is read from its record's buffer, whose capacity runs on past the row when the CSV reader's
// buffer holds it. The bytes moved past n are overwritten by whatever is appended next.
func appendWindow(out, src []byte, n int) []byte {
	o := len(out)
	if n > window || cap(src) < window || cap(out)-o < window {
		return append(out, src[:n]...)
	}
	d, s := out[o:o+window], src[:window]
	*(*[16]byte)(d) = *(*[16]byte)(s)
	*(*[16]byte)(d[16:]) = *(*[16]byte)(s[16:])
	return out[:o+n]
}
