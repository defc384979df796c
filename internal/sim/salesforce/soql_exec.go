package salesforce

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// This file resolves a parsed query against the schema (INVALID_TYPE,
// INVALID_FIELD, ...), applies Salesforce's rules (FIELDS() limit, Big
// Object restrictions, aggregates) and executes it.

const emptyBigObjectID = "000000000000000AAA"

type execCtx struct {
	o       *Org
	user    *user
	now     time.Time
	tooling bool
	all     bool // queryAll: cursors page through /queryAll/<locator>
	version string
	verNum  float64
}

// resolved is a field path resolved against an object: either a field of
// the object itself or, through a reference field, a field of its target.
type resolved struct {
	path   string
	f      *fieldDef
	rel    *fieldDef // reference field on the queried object; nil for direct fields
	target *object
	big    bool // the queried object is a Big Object
}

func (r *resolved) key() string {
	if r.rel == nil {
		return strings.ToLower(r.f.Name)
	}
	return strings.ToLower(r.rel.RelName + "." + r.f.Name)
}

func (c *execCtx) get(res *resolved, rec *record) any {
	if res.rel == nil {
		if res.big && res.f.Name == "Id" && c.o.opts.BigObjectEmptyIDs {
			return emptyBigObjectID
		}
		return rec.vals[res.f.Name]
	}
	ref, _ := rec.vals[res.rel.Name].(string)
	t := c.o.byID[to15(ref)]
	if t == nil || t.obj != res.target {
		return nil
	}
	return t.vals[res.f.Name]
}

func noSuchColumn(q *query, pos int, field, entity string) *apiError {
	return soqlError(CodeInvalidField, q.src, pos, "No such column '"+field+"' on entity '"+entity+
		"'. If you are attempting to use a custom field, be sure to append the '__c' after the custom field name. Please reference your WSDL or the describe call for the appropriate names.")
}

func (c *execCtx) resolve(q *query, obj *object, path string, pos int) (*resolved, *apiError) {
	segs := strings.Split(path, ".")
	if len(segs) > 1 && strings.EqualFold(segs[0], obj.name) {
		segs = segs[1:]
	}
	switch len(segs) {
	case 1:
		f := obj.byLower[strings.ToLower(segs[0])]
		if f == nil || !c.user.perms.canSee(obj, f) {
			return nil, noSuchColumn(q, pos, segs[0], obj.name)
		}
		return &resolved{path: path, f: f, big: obj.isBig()}, nil
	case 2:
		rel := obj.rels[strings.ToLower(segs[0])]
		target := (*object)(nil)
		if rel != nil {
			target = c.o.objectByName(rel.RefTo)
		}
		if rel == nil || target == nil {
			return nil, soqlError(CodeInvalidField, q.src, pos, "Didn't understand relationship '"+segs[0]+
				"' in field path. If you are attempting to use a custom relationship, be sure to append the '__r' after the custom relationship name. Please reference your WSDL or the describe call for the appropriate names.")
		}
		f := target.byLower[strings.ToLower(segs[1])]
		if f == nil || !c.user.perms.canSee(target, f) {
			return nil, noSuchColumn(q, pos+len(segs[0])+1, segs[1], target.name)
		}
		return &resolved{path: path, f: f, rel: rel, target: target, big: obj.isBig()}, nil
	}
	return nil, soqlError(CodeInvalidField, q.src, pos, "Didn't understand relationship '"+strings.Join(segs[:len(segs)-1], ".")+
		"' in field path. If you are attempting to use a custom relationship, be sure to append the '__r' after the custom relationship name. Please reference your WSDL or the describe call for the appropriate names.")
}

// outCol is one key of an output record: a direct field, or a nested
// relationship object with its own fields.
type outCol struct {
	res    *resolved   // direct field
	rel    *fieldDef   // relationship (nested object)
	target *object     // relationship target
	sub    []*resolved // nested fields, in select order
}

type sortKey struct {
	res       *resolved
	desc      bool
	nullsLast bool
}

type aggCol struct {
	fn    string // COUNT, MIN, MAX, COUNT_DISTINCT; "" = grouped field
	res   *resolved
	key   string
	group int // index into plan.groups for grouped fields
}

type plan struct {
	q         *query
	obj       *object
	cols      []*outCol
	where     func(*record) bool
	order     []sortKey
	aggregate bool
	countOnly bool
	groups    []*resolved
	aggCols   []aggCol
	limit     int // -1: none
	offset    int
}

var objectNotSupported = ". If you are attempting to use a custom object, be sure to append the '__c' after the entity name. Please reference your WSDL or the describe call for the appropriate names."

// compile resolves and validates q for the requesting user.
func (c *execCtx) compile(q *query) (*plan, *apiError) {
	obj := c.o.objectByName(q.object)
	if obj == nil || !obj.onSurface(c.tooling) || !c.user.perms.canRead(obj) {
		return nil, soqlError(CodeInvalidType, q.src, q.objectPos, "sObject type '"+q.object+"' is not supported"+objectNotSupported)
	}
	if !obj.queryable() {
		return nil, soqlError(CodeInvalidType, q.src, q.objectPos, "entity type "+obj.name+" does not support query")
	}
	p := &plan{q: q, obj: obj, limit: -1}
	if q.hasLimit {
		p.limit = q.limit
	}
	if q.hasOffset {
		if q.offset > 2000 {
			return nil, newAPIError(http.StatusBadRequest, CodeNumberOutsideRange, "Maximum SOQL offset allowed is 2000")
		}
		p.offset = q.offset
	}

	// Select list.
	seen := map[string]bool{}
	var selected []*resolved
	addSel := func(res *resolved, pos int) *apiError {
		if seen[res.key()] {
			name := res.f.Name
			if res.rel != nil {
				name = res.rel.RelName + "." + res.f.Name
			}
			return newAPIError(http.StatusBadRequest, CodeInvalidField, "duplicate field selected: "+name)
		}
		seen[res.key()] = true
		selected = append(selected, res)
		return nil
	}
	for _, it := range q.items {
		switch it.kind {
		case selCount, selAgg:
			p.aggregate = true
		}
	}
	if len(q.groupBy) > 0 {
		p.aggregate = true
	}
	aggN := 0
	for _, it := range q.items {
		switch it.kind {
		case selFields:
			if c.verNum < 51 {
				return nil, p.malformed(it.pos, "unexpected token: 'FIELDS'")
			}
			if p.aggregate {
				return nil, p.malformed(it.pos, "FIELDS() cannot be used in an aggregate query")
			}
			if it.arg != "STANDARD" && (!q.hasLimit || q.limit > FieldsFunctionMaxLimit) {
				return nil, p.malformed(it.pos, "The SOQL FIELDS function must have a LIMIT of at most 200")
			}
			for _, f := range obj.fields {
				if it.arg == "CUSTOM" && !f.Custom || it.arg == "STANDARD" && f.Custom || !c.user.perms.canSee(obj, f) {
					continue
				}
				if err := addSel(&resolved{path: f.Name, f: f, big: obj.isBig()}, it.pos); err != nil {
					return nil, err
				}
			}
		case selField:
			res, err := c.resolve(q, obj, it.path, it.pos)
			if err != nil {
				return nil, err
			}
			if err := addSel(res, it.pos); err != nil {
				return nil, err
			}
		case selCount:
			if len(q.items) > 1 || len(q.groupBy) > 0 {
				return nil, p.malformed(it.pos, "COUNT() must be the only element in the SELECT list")
			}
			p.countOnly = true
		case selAgg:
			res, err := c.resolve(q, obj, it.path, it.pos)
			if err != nil {
				return nil, err
			}
			if it.fn != "COUNT" && it.fn != "COUNT_DISTINCT" && !res.f.Type.sortable() {
				return nil, soqlError(CodeInvalidField, q.src, it.pos, "field "+res.f.Name+" does not support aggregate operator "+it.fn)
			}
			// Salesforce numbers only the aggregates without an alias.
			key := it.alias
			if key == "" {
				key = "expr" + itoa(aggN)
				aggN++
			}
			p.aggCols = append(p.aggCols, aggCol{fn: it.fn, res: res, key: key})
		}
	}
	if !p.aggregate {
		for _, res := range selected {
			p.addCol(res)
		}
	}

	if q.where != nil {
		pred, err := c.compileExpr(p, q.where)
		if err != nil {
			return nil, err
		}
		p.where = pred
	}

	if p.aggregate {
		if err := c.compileAggregate(p, selected); err != nil {
			return nil, err
		}
	}

	for _, ob := range q.orderBy {
		res, err := c.resolve(q, obj, ob.path, ob.pos)
		if err != nil {
			return nil, err
		}
		if !res.f.Type.sortable() {
			return nil, soqlError(CodeInvalidField, q.src, ob.pos, "field '"+res.f.Name+"' can not be sorted in a query call")
		}
		if p.aggregate && p.groupIndex(res) < 0 {
			return nil, p.malformed(ob.pos, "Ordered field must be grouped or aggregated: "+ob.path)
		}
		p.order = append(p.order, sortKey{res: res, desc: ob.desc, nullsLast: ob.nullsGiven && ob.nullsLast})
	}

	if obj.isBig() {
		if err := c.checkBigObject(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *plan) malformed(pos int, detail string) *apiError {
	return soqlError(CodeMalformedQuery, p.q.src, pos, detail)
}

func (p *plan) addCol(res *resolved) {
	if res.rel == nil {
		p.cols = append(p.cols, &outCol{res: res})
		return
	}
	for _, c := range p.cols {
		if c.rel == res.rel {
			c.sub = append(c.sub, res)
			return
		}
	}
	p.cols = append(p.cols, &outCol{rel: res.rel, target: res.target, sub: []*resolved{res}})
}

func (p *plan) groupIndex(res *resolved) int {
	for i, g := range p.groups {
		if g.key() == res.key() {
			return i
		}
	}
	return -1
}

func (c *execCtx) compileAggregate(p *plan, selected []*resolved) *apiError {
	q := p.q
	for _, g := range q.groupBy {
		res, err := c.resolve(q, p.obj, g.path, g.pos)
		if err != nil {
			return err
		}
		if !res.f.Type.groupable() {
			return soqlError(CodeInvalidField, q.src, g.pos, "field '"+res.f.Name+"' can not be grouped in a query call")
		}
		p.groups = append(p.groups, res)
	}
	// Output columns in select order: grouped fields and aggregates.
	var cols []aggCol
	aggI := 0
	selI := 0
	for _, it := range q.items {
		switch it.kind {
		case selField:
			res := selected[selI]
			selI++
			gi := p.groupIndex(res)
			if gi < 0 {
				return p.malformed(it.pos, "Field must be grouped or aggregated: "+it.path)
			}
			cols = append(cols, aggCol{res: res, key: res.f.Name, group: gi})
		case selAgg:
			cols = append(cols, p.aggCols[aggI])
			aggI++
		}
	}
	p.aggCols = cols
	return nil
}

func typeMismatch(q *query, pos int, field, typ string, quoted bool) *apiError {
	should := "should not"
	if quoted {
		should = "should"
	}
	return soqlError(CodeInvalidField, q.src, pos, "value of filter criterion for field '"+field+"' must be of type "+typ+" and "+should+" be enclosed in quotes")
}

// litValue is a literal checked and converted for one field's type.
type litValue struct {
	null       bool
	s          string // lower-cased for text, 15-char for ids
	n          float64
	t          time.Time
	isRange    bool
	start, end time.Time
	b          bool
}

func (c *execCtx) checkLiteral(q *query, res *resolved, l literal) (litValue, *apiError) {
	if l.kind == litNull {
		return litValue{null: true}, nil
	}
	f := res.f
	switch f.Type {
	case typeDateTime, typeDate:
		typ := "dateTime"
		want := litDateTime
		if f.Type == typeDate {
			typ, want = "date", litDate
		}
		switch l.kind {
		case want:
			return litValue{t: l.t}, nil
		case litDateKeyword:
			s, e := l.dateRange(c.now)
			return litValue{isRange: true, start: s, end: e}, nil
		}
		return litValue{}, typeMismatch(q, l.pos, f.Name, typ, false)
	case typeInt, typeDouble:
		if l.kind != litNumber {
			typ := "double"
			if f.Type == typeInt {
				typ = "integer"
			}
			return litValue{}, typeMismatch(q, l.pos, f.Name, typ, false)
		}
		return litValue{n: l.n}, nil
	case typeBoolean:
		if l.kind != litBool {
			return litValue{}, typeMismatch(q, l.pos, f.Name, "boolean", false)
		}
		return litValue{b: l.b}, nil
	case typeID, typeReference:
		if l.kind != litString {
			return litValue{}, typeMismatch(q, l.pos, f.Name, "id", true)
		}
		id, ok := normalizeID(l.s)
		if !ok {
			return litValue{}, newAPIError(http.StatusBadRequest, CodeInvalidQueryFilter, "invalid ID field: "+l.s)
		}
		return litValue{s: to15(id)}, nil
	default:
		if l.kind != litString {
			return litValue{}, typeMismatch(q, l.pos, f.Name, "string", true)
		}
		return litValue{s: l.s}, nil
	}
}

// compareValue orders a (non-nil) field value against a literal.
func compareValue(f *fieldDef, v any, lv litValue) int {
	switch x := v.(type) {
	case time.Time:
		return x.Compare(lv.t)
	case int64:
		return cmpFloat(float64(x), lv.n)
	case float64:
		return cmpFloat(x, lv.n)
	case bool:
		if x == lv.b {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	case string:
		if f.Type == typeID || f.Type == typeReference {
			return strings.Compare(to15(x), lv.s)
		}
		return foldCompare(x, lv.s)
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// foldCompare compares two strings ignoring ASCII case, without allocating.
func foldCompare(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := a[i], b[i]
		if ca >= 'A' && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if cb >= 'A' && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	return cmpFloat(float64(len(a)), float64(len(b)))
}

func opResult(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default:
		return c >= 0
	}
}

func (c *execCtx) matchOne(res *resolved, rec *record, op string, lv litValue) bool {
	v := c.get(res, rec)
	if lv.null || v == nil {
		isEq := lv.null == (v == nil)
		switch op {
		case "=":
			return isEq
		case "!=":
			return !isEq
		}
		return false
	}
	if lv.isRange {
		t, _ := v.(time.Time)
		in := !t.Before(lv.start) && t.Before(lv.end)
		switch op {
		case "=":
			return in
		case "!=":
			return !in
		case "<":
			return t.Before(lv.start)
		case "<=":
			return t.Before(lv.end)
		case ">":
			return !t.Before(lv.end)
		default:
			return !t.Before(lv.start)
		}
	}
	return opResult(op, compareValue(res.f, v, lv))
}

func (c *execCtx) compileExpr(p *plan, e expr) (func(*record) bool, *apiError) {
	q := p.q
	switch x := e.(type) {
	case *boolExpr:
		preds := make([]func(*record) bool, 0, len(x.terms))
		for _, t := range x.terms {
			pr, err := c.compileExpr(p, t)
			if err != nil {
				return nil, err
			}
			preds = append(preds, pr)
		}
		if x.and {
			return func(r *record) bool {
				for _, pr := range preds {
					if !pr(r) {
						return false
					}
				}
				return true
			}, nil
		}
		return func(r *record) bool {
			for _, pr := range preds {
				if pr(r) {
					return true
				}
			}
			return false
		}, nil
	case *notExpr:
		pr, err := c.compileExpr(p, x.e)
		if err != nil {
			return nil, err
		}
		return func(r *record) bool { return !pr(r) }, nil
	case *cmpExpr:
		res, err := c.filterField(q, p.obj, x.path, x.pos)
		if err != nil {
			return nil, err
		}
		lv, err := c.checkLiteral(q, res, x.lit)
		if err != nil {
			return nil, err
		}
		if res.f.Type == typeBoolean && x.op != "=" && x.op != "!=" {
			return nil, soqlError(CodeInvalidField, q.src, x.opPos, "invalid operator on boolean field: "+res.f.Name)
		}
		if lv.null && x.op != "=" && x.op != "!=" {
			return nil, soqlError(CodeMalformedQuery, q.src, x.opPos, "invalid operator for null: "+x.op)
		}
		op := x.op
		return func(r *record) bool { return c.matchOne(res, r, op, lv) }, nil
	case *inExpr:
		res, err := c.filterField(q, p.obj, x.path, x.pos)
		if err != nil {
			return nil, err
		}
		lvs := make([]litValue, 0, len(x.lits))
		for _, l := range x.lits {
			lv, err := c.checkLiteral(q, res, l)
			if err != nil {
				return nil, err
			}
			lvs = append(lvs, lv)
		}
		not := x.not
		return func(r *record) bool {
			for _, lv := range lvs {
				if c.matchOne(res, r, "=", lv) {
					return !not
				}
			}
			return not
		}, nil
	case *likeExpr:
		res, err := c.filterField(q, p.obj, x.path, x.pos)
		if err != nil {
			return nil, err
		}
		if x.lit.kind != litString {
			return nil, typeMismatch(q, x.lit.pos, res.f.Name, "string", true)
		}
		if !res.f.Type.stringLike() || res.f.Type == typeID || res.f.Type == typeReference {
			return nil, soqlError(CodeInvalidField, q.src, x.pos, "invalid operator on "+res.f.Type.describeName()+" field: LIKE")
		}
		pat := x.lit.s
		return func(r *record) bool {
			s, ok := c.get(res, r).(string)
			return ok && likeMatch(s, pat)
		}, nil
	}
	return nil, newAPIError(http.StatusBadRequest, CodeMalformedQuery, "unsupported expression")
}

func (c *execCtx) filterField(q *query, obj *object, path string, pos int) (*resolved, *apiError) {
	res, err := c.resolve(q, obj, path, pos)
	if err != nil {
		return nil, err
	}
	if !res.f.Type.filterable() {
		return nil, soqlError(CodeInvalidField, q.src, pos, "field '"+res.f.Name+"' can not be filtered in a query call")
	}
	return res, nil
}

// likeMatch implements SOQL LIKE: case-insensitive, % and _ wildcards,
// \% and \_ literal.
func likeMatch(s, pat string) bool {
	type tok struct {
		c    byte
		kind int // 0 literal, 1 any-one, 2 any-many
	}
	var toks []tok
	for i := 0; i < len(pat); i++ {
		ch := pat[i]
		switch {
		case ch == '\\' && i+1 < len(pat):
			i++
			toks = append(toks, tok{c: lower(pat[i])})
		case ch == '%':
			toks = append(toks, tok{kind: 2})
		case ch == '_':
			toks = append(toks, tok{kind: 1})
		default:
			toks = append(toks, tok{c: lower(ch)})
		}
	}
	// Iterative wildcard matching with backtracking on the last %.
	si, ti := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		if ti < len(toks) && toks[ti].kind == 2 {
			starT, starS = ti, si
			ti++
			continue
		}
		if ti < len(toks) && (toks[ti].kind == 1 || toks[ti].c == lower(s[si])) {
			si++
			ti++
			continue
		}
		if starT >= 0 {
			ti = starT + 1
			starS++
			si = starS
			continue
		}
		return false
	}
	for ti < len(toks) && toks[ti].kind == 2 {
		ti++
	}
	return ti == len(toks)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// conjuncts flattens a pure AND tree; ok is false if it contains OR or NOT.
func conjuncts(e expr) ([]expr, bool) {
	switch x := e.(type) {
	case *boolExpr:
		if !x.and {
			return nil, false
		}
		var out []expr
		for _, t := range x.terms {
			sub, ok := conjuncts(t)
			if !ok {
				return nil, false
			}
			out = append(out, sub...)
		}
		return out, true
	case *notExpr:
		return nil, false
	}
	return []expr{e}, true
}

func bigErr(msg string) *apiError {
	return newAPIError(http.StatusBadRequest, CodeBigObjectUnsupported, msg)
}

// checkBigObject enforces Salesforce's documented Big Object query rules.
func (c *execCtx) checkBigObject(p *plan) *apiError {
	strict := c.o.opts.BigObjectMode == BigObjectStrict
	if p.aggregate || p.countOnly {
		return bigErr("Aggregate functions not supported")
	}
	if p.q.hasOffset {
		return bigErr("OFFSET is not supported on big objects")
	}
	for i, k := range p.order {
		name := k.res.f.Name
		if i == 0 {
			if k.res.rel != nil || name != "EventDate" {
				return bigErr("Unsupported order by field: " + k.res.path + ". Order by must start with the index field EventDate")
			}
			if !k.desc {
				return bigErr("Unsupported order direction on filter column EventDate: ASCENDING")
			}
			continue
		}
		if strict {
			return bigErr("Unsupported order by field: " + k.res.path + ". Only EventDate DESC is supported")
		}
	}
	if p.q.where == nil || !strict {
		return nil
	}
	terms, ok := conjuncts(p.q.where)
	if !ok {
		return bigErr("Disjunctions and negations are not supported in big object filters")
	}
	dateEq, dateRange, ident := false, false, false
	for _, t := range terms {
		var path, op string
		switch x := t.(type) {
		case *cmpExpr:
			path, op = x.path, x.op
		case *inExpr:
			if x.not {
				return bigErr("Operator NOT IN is not supported on big object fields")
			}
			path, op = x.path, "="
		case *likeExpr:
			return bigErr("Operator LIKE is not supported on big object fields")
		}
		res, err := c.resolve(p.q, p.obj, path, 0)
		if err != nil {
			return err
		}
		if res.rel != nil || (res.f.Name != "EventDate" && res.f.Name != "EventIdentifier") {
			return bigErr("Filter on field " + path + " is not supported: only the index fields EventDate and EventIdentifier can be filtered")
		}
		if op == "!=" {
			return bigErr("Operator != is not supported on big object fields")
		}
		if res.f.Name == "EventIdentifier" {
			ident = true
		} else if op == "=" {
			dateEq = true
		} else {
			dateRange = true
		}
	}
	if ident && (!dateEq || dateRange) {
		return bigErr("EventIdentifier can only be filtered together with an equality filter on EventDate")
	}
	return nil
}

// execute returns the matching records in result order (LIMIT/OFFSET applied).
func (c *execCtx) execute(p *plan) []*record {
	var rows []*record
	onlyDaily := p.aggregate && p.obj.name == "EventLogFile" && p.where == nil
	for _, r := range p.obj.records {
		if !r.visibleAt.IsZero() && r.visibleAt.After(c.now) {
			continue
		}
		// Salesforce quirk: an unfiltered aggregate over
		// EventLogFile under-reports; the simulator counts Daily files only.
		if onlyDaily && r.vals["Interval"] != "Daily" {
			continue
		}
		if p.where != nil && !p.where(r) {
			continue
		}
		rows = append(rows, r)
	}
	keys := p.order
	if p.obj.isBig() {
		// Index order: EventDate DESC, then EventIdentifier.
		ed := &resolved{f: p.obj.byLower["eventdate"], big: true}
		ei := &resolved{f: p.obj.byLower["eventidentifier"], big: true}
		if len(keys) == 0 {
			keys = []sortKey{{res: ed, desc: true}}
		}
		keys = append(keys[:len(keys):len(keys)], sortKey{res: ei})
	}
	if len(keys) > 0 && !p.aggregate {
		sort.SliceStable(rows, func(i, j int) bool {
			for _, k := range keys {
				if d := c.compareRecords(k, rows[i], rows[j]); d != 0 {
					return d < 0
				}
			}
			return false
		})
	}
	if p.aggregate || p.countOnly {
		return rows
	}
	if p.offset > 0 {
		if p.offset >= len(rows) {
			rows = nil
		} else {
			rows = rows[p.offset:]
		}
	}
	if p.limit >= 0 && len(rows) > p.limit {
		rows = rows[:p.limit]
	}
	if p.obj.isBig() && len(rows) > c.o.opts.BigObjectMaxRows {
		rows = rows[:c.o.opts.BigObjectMaxRows]
	}
	return rows
}

func (c *execCtx) compareRecords(k sortKey, a, b *record) int {
	va, vb := c.get(k.res, a), c.get(k.res, b)
	d := compareAny(k.res.f, va, vb, k.nullsLast)
	if k.desc && va != nil && vb != nil {
		d = -d
	}
	return d
}

// compareAny orders two field values; nil sorts first unless nullsLast.
func compareAny(f *fieldDef, a, b any, nullsLast bool) int {
	if a == nil || b == nil {
		if a == nil && b == nil {
			return 0
		}
		if (a == nil) != nullsLast {
			return -1
		}
		return 1
	}
	switch x := a.(type) {
	case time.Time:
		return x.Compare(b.(time.Time))
	case int64:
		return cmpFloat(float64(x), toFloat(b))
	case float64:
		return cmpFloat(x, toFloat(b))
	case bool:
		y := b.(bool)
		if x == y {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	case string:
		y, _ := b.(string)
		if f.Type == typeID || f.Type == typeReference {
			return strings.Compare(to15(x), to15(y))
		}
		return foldCompare(x, y)
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// aggRow is one output row of an aggregate query.
type aggRow struct {
	vals []any // parallel to plan.aggCols
}

func (c *execCtx) aggregate(p *plan, rows []*record) []aggRow {
	type group struct {
		keyVals  []any
		counts   []int
		mins     []any
		maxs     []any
		distinct []map[string]bool
	}
	var order []*group
	byKey := map[string]*group{}
	for _, r := range rows {
		kv := make([]any, len(p.groups))
		var kb strings.Builder
		for i, g := range p.groups {
			kv[i] = c.get(g, r)
			fmt.Fprint(&kb, normKey(kv[i]), "\x00")
		}
		g := byKey[kb.String()]
		if g == nil {
			n := len(p.aggCols)
			g = &group{keyVals: kv, counts: make([]int, n), mins: make([]any, n), maxs: make([]any, n), distinct: make([]map[string]bool, n)}
			byKey[kb.String()] = g
			order = append(order, g)
		}
		for i, a := range p.aggCols {
			if a.fn == "" {
				continue
			}
			v := c.get(a.res, r)
			if v == nil {
				continue
			}
			g.counts[i]++
			if g.mins[i] == nil || compareAny(a.res.f, v, g.mins[i], false) < 0 {
				g.mins[i] = v
			}
			if g.maxs[i] == nil || compareAny(a.res.f, v, g.maxs[i], false) > 0 {
				g.maxs[i] = v
			}
			if a.fn == "COUNT_DISTINCT" {
				if g.distinct[i] == nil {
					g.distinct[i] = map[string]bool{}
				}
				g.distinct[i][fmt.Sprint(normKey(v))] = true
			}
		}
	}
	if len(p.groups) == 0 && len(order) == 0 {
		n := len(p.aggCols)
		order = append(order, &group{counts: make([]int, n), mins: make([]any, n), maxs: make([]any, n), distinct: make([]map[string]bool, n)})
	}
	keys := make([]sortKey, 0, len(p.order)+len(p.groups))
	keys = append(keys, p.order...)
	for _, g := range p.groups {
		keys = append(keys, sortKey{res: g})
	}
	sort.SliceStable(order, func(i, j int) bool {
		for _, k := range keys {
			gi := p.groupIndex(k.res)
			a, b := order[i].keyVals[gi], order[j].keyVals[gi]
			d := compareAny(k.res.f, a, b, k.nullsLast)
			if k.desc && a != nil && b != nil {
				d = -d
			}
			if d != 0 {
				return d < 0
			}
		}
		return false
	})
	out := make([]aggRow, 0, len(order))
	for _, g := range order {
		row := aggRow{vals: make([]any, len(p.aggCols))}
		for i, a := range p.aggCols {
			switch a.fn {
			case "":
				row.vals[i] = g.keyVals[a.group]
			case "COUNT":
				row.vals[i] = int64(g.counts[i])
			case "COUNT_DISTINCT":
				row.vals[i] = int64(len(g.distinct[i]))
			case "MIN":
				row.vals[i] = g.mins[i]
			case "MAX":
				row.vals[i] = g.maxs[i]
			}
		}
		out = append(out, row)
	}
	if p.offset > 0 {
		if p.offset >= len(out) {
			out = nil
		} else {
			out = out[p.offset:]
		}
	}
	if p.limit >= 0 && len(out) > p.limit {
		out = out[:p.limit]
	}
	return out
}

func normKey(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ToLower(x)
	case time.Time:
		return x.UnixMilli()
	}
	return v
}
