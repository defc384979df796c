package salesforce

import (
	"strconv"
	"strings"
	"time"
)

// This file is the SOQL subset's lexer and parser. It produces a syntax
// tree; names are resolved against the schema in soql_exec.go. Syntax
// errors are MALFORMED_QUERY with Salesforce's positioned message.

type tokKind int

const (
	tkEOF tokKind = iota
	tkIdent
	tkString
	tkNumber
	tkDateTime
	tkDate
	tkComma
	tkLParen
	tkRParen
	tkOp
)

type token struct {
	kind tokKind
	text string // as written
	val  string // decoded string literal
	num  float64
	t    time.Time
	pos  int
}

func (t token) describe() string {
	if t.kind == tkEOF {
		return "<EOF>"
	}
	return t.text
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

func lex(src string) ([]token, *apiError) {
	var toks []token
	i := 0
	malformed := func(pos int, detail string) *apiError {
		return soqlError(CodeMalformedQuery, src, pos, detail)
	}
	for {
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
			i++
		}
		if i >= len(src) {
			toks = append(toks, token{kind: tkEOF, pos: i})
			return toks, nil
		}
		c := src[i]
		start := i
		switch {
		case c == ',':
			toks = append(toks, token{kind: tkComma, text: ",", pos: i})
			i++
		case c == '(':
			toks = append(toks, token{kind: tkLParen, text: "(", pos: i})
			i++
		case c == ')':
			toks = append(toks, token{kind: tkRParen, text: ")", pos: i})
			i++
		case c == '=':
			toks = append(toks, token{kind: tkOp, text: "=", pos: i})
			i++
		case c == '!':
			if i+1 < len(src) && src[i+1] == '=' {
				toks = append(toks, token{kind: tkOp, text: "!=", pos: i})
				i += 2
			} else {
				return nil, malformed(i, "line 1:"+itoa(i)+" no viable alternative at character '!'")
			}
		case c == '<' || c == '>':
			op := string(c)
			if i+1 < len(src) && (src[i+1] == '=' || (c == '<' && src[i+1] == '>')) {
				op += string(src[i+1])
			}
			if op == "<>" {
				op = "!="
			}
			toks = append(toks, token{kind: tkOp, text: src[i : i+len(op)], pos: i})
			toks[len(toks)-1].text = op
			i += len(op)
		case c == '\'':
			var b strings.Builder
			i++
			closed := false
			for i < len(src) {
				ch := src[i]
				if ch == '\'' {
					closed = true
					i++
					break
				}
				if ch == '\\' {
					if i+1 >= len(src) {
						break
					}
					e := src[i+1]
					switch e {
					case '\'', '"', '\\':
						b.WriteByte(e)
					case 'n':
						b.WriteByte('\n')
					case 'r':
						b.WriteByte('\r')
					case 't':
						b.WriteByte('\t')
					case 'b':
						b.WriteByte('\b')
					case 'f':
						b.WriteByte('\f')
					case '%', '_':
						b.WriteByte('\\') // kept escaped: meaningful to LIKE only
						b.WriteByte(e)
					default:
						return nil, malformed(i, "Invalid string literal '"+src[start:min(len(src), i+2)]+"'. Illegal character sequence '\\"+string(e)+"' in string literal.")
					}
					i += 2
					continue
				}
				b.WriteByte(ch)
				i++
			}
			if !closed {
				return nil, malformed(start, "line 1:"+itoa(start)+" mismatched character '<EOF>' expecting '''")
			}
			toks = append(toks, token{kind: tkString, text: src[start:i], val: b.String(), pos: start})
		case isDigit(c) || (c == '-' || c == '+') && i+1 < len(src) && isDigit(src[i+1]):
			if t, n, err := lexDateTime(src, i); err != nil || n > 0 {
				if err != nil {
					return nil, err
				}
				toks = append(toks, t)
				i += n
				continue
			}
			j := i + 1
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			if j < len(src) && src[j] == '.' && j+1 < len(src) && isDigit(src[j+1]) {
				j++
				for j < len(src) && isDigit(src[j]) {
					j++
				}
			}
			if j < len(src) && isIdentStart(src[j]) {
				return nil, malformed(j, "line 1:"+itoa(j)+" no viable alternative at character '"+string(src[j])+"'")
			}
			n, err := strconv.ParseFloat(src[i:j], 64)
			if err != nil {
				return nil, malformed(i, "invalid number "+src[i:j])
			}
			toks = append(toks, token{kind: tkNumber, text: src[i:j], num: n, pos: i})
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(src) {
				if isIdentChar(src[j]) {
					j++
				} else if src[j] == '.' && j+1 < len(src) && isIdentStart(src[j+1]) {
					j += 2
				} else {
					break
				}
			}
			// Date literals with a parameter: LAST_N_DAYS:7.
			if j < len(src) && src[j] == ':' && j+1 < len(src) && isDigit(src[j+1]) {
				j++
				for j < len(src) && isDigit(src[j]) {
					j++
				}
			}
			toks = append(toks, token{kind: tkIdent, text: src[i:j], pos: i})
			i = j
		default:
			return nil, malformed(i, "line 1:"+itoa(i)+" no viable alternative at character '"+string(c)+"'")
		}
	}
}

// lexDateTime recognizes YYYY-MM-DD and YYYY-MM-DDThh:mm:ss[.fff](Z|±hh:mm)
// at i. It returns n == 0 when the text is not a date at all.
func lexDateTime(src string, i int) (token, int, *apiError) {
	s := src[i:]
	digits := func(from, n int) bool {
		if from+n > len(s) {
			return false
		}
		for k := from; k < from+n; k++ {
			if !isDigit(s[k]) {
				return false
			}
		}
		return true
	}
	isDate := digits(0, 4) && len(s) > 4 && s[4] == '-' && digits(5, 2) && len(s) > 7 && s[7] == '-' && digits(8, 2)
	if !isDate {
		return token{}, 0, nil
	}
	bad := func(n int, why string) (token, int, *apiError) {
		end := n
		for end < len(s) && !strings.ContainsRune(" \t\r\n),", rune(s[end])) {
			end++
		}
		return token{}, 0, soqlError(CodeMalformedQuery, src, i, "line 1:"+itoa(i)+" invalid date/time literal '"+s[:end]+"': "+why)
	}
	n := 10
	if len(s) == n || s[n] != 'T' {
		d, err := time.Parse("2006-01-02", s[:10])
		if err != nil {
			return bad(n, "no such date")
		}
		if n < len(s) && isIdentChar(s[n]) {
			return bad(n, "unexpected character after date")
		}
		return token{kind: tkDate, text: s[:10], t: d, pos: i}, 10, nil
	}
	isTime := digits(11, 2) && len(s) > 13 && s[13] == ':' && digits(14, 2) && len(s) > 16 && s[16] == ':' && digits(17, 2)
	if !isTime {
		return bad(n, "expected hh:mm:ss")
	}
	n = 19
	if n < len(s) && s[n] == '.' {
		n++
		k := n
		for n < len(s) && isDigit(s[n]) {
			n++
		}
		if n == k {
			return bad(n, "missing fractional seconds")
		}
	}
	switch {
	case n < len(s) && s[n] == 'Z':
		n++
	case n < len(s) && (s[n] == '+' || s[n] == '-'):
		if digits(n+1, 2) && n+3 < len(s) && s[n+3] == ':' && digits(n+4, 2) {
			n += 6
		} else {
			return bad(n, "time zone offset must be Z or ±hh:mm")
		}
	default:
		return bad(n, "missing time zone (Z or ±hh:mm)")
	}
	if n < len(s) && (isIdentChar(s[n]) || s[n] == '.' || s[n] == ':') {
		return bad(n, "unexpected character after time zone")
	}
	t, err := time.Parse(time.RFC3339Nano, s[:n])
	if err != nil {
		return bad(n, "no such date/time")
	}
	return token{kind: tkDateTime, text: s[:n], t: t.UTC().Truncate(time.Millisecond), pos: i}, n, nil
}

// Syntax tree.

type selKind int

const (
	selField  selKind = iota // a field path
	selFields                // FIELDS(ALL|STANDARD|CUSTOM)
	selCount                 // COUNT()
	selAgg                   // COUNT(f), MIN(f), MAX(f), COUNT_DISTINCT(f)
)

type selectItem struct {
	kind  selKind
	fn    string // upper-case aggregate function
	path  string
	arg   string // ALL / STANDARD / CUSTOM
	alias string
	pos   int
}

type litKind int

const (
	litString litKind = iota
	litNumber
	litDateTime
	litDate
	litNull
	litBool
	litDateKeyword // TODAY, LAST_N_DAYS:n, ...: a range resolved at execution
)

type literal struct {
	kind litKind
	s    string
	n    float64
	t    time.Time
	b    bool
	kw   string // upper-case keyword for litDateKeyword
	kwN  int
	pos  int
}

type expr interface{ exprPos() int }

type boolExpr struct {
	and   bool
	terms []expr
	pos   int
}

type notExpr struct {
	e   expr
	pos int
}

type cmpExpr struct {
	path  string
	pos   int
	op    string // = != < <= > >=
	opPos int
	lit   literal
}

type inExpr struct {
	path string
	pos  int
	not  bool
	lits []literal
}

type likeExpr struct {
	path string
	pos  int
	lit  literal
}

func (e *boolExpr) exprPos() int { return e.pos }
func (e *notExpr) exprPos() int  { return e.pos }
func (e *cmpExpr) exprPos() int  { return e.pos }
func (e *inExpr) exprPos() int   { return e.pos }
func (e *likeExpr) exprPos() int { return e.pos }

type pathRef struct {
	path string
	pos  int
}

type orderItem struct {
	path       string
	pos        int
	desc       bool
	nullsLast  bool
	nullsGiven bool
}

type query struct {
	src       string
	items     []selectItem
	object    string
	objectPos int
	where     expr
	groupBy   []pathRef
	orderBy   []orderItem
	limit     int
	hasLimit  bool
	offset    int
	hasOffset bool
}

var reserved = map[string]bool{
	"SELECT": true, "FROM": true, "WHERE": true, "AND": true, "OR": true, "NOT": true, "IN": true,
	"LIKE": true, "GROUP": true, "BY": true, "ORDER": true, "LIMIT": true, "OFFSET": true, "NULL": true,
	"TRUE": true, "FALSE": true, "HAVING": true, "INCLUDES": true, "EXCLUDES": true, "WITH": true,
	"USING": true, "TYPEOF": true, "ASC": true, "DESC": true, "NULLS": true, "FOR": true,
}

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tkEOF {
		p.i++
	}
	return t
}
func isKw(t token, kw string) bool { return t.kind == tkIdent && strings.EqualFold(t.text, kw) }

func (p *parser) unexpected(t token) *apiError {
	return soqlError(CodeMalformedQuery, p.src, t.pos, "unexpected token: '"+t.describe()+"'")
}

func (p *parser) expectKw(kw string) *apiError {
	t := p.next()
	if !isKw(t, kw) {
		return p.unexpected(t)
	}
	return nil
}

func (p *parser) expect(k tokKind) (token, *apiError) {
	t := p.next()
	if t.kind != k {
		return t, p.unexpected(t)
	}
	return t, nil
}

func (p *parser) fieldPath() (pathRef, *apiError) {
	t := p.next()
	if t.kind != tkIdent || reserved[strings.ToUpper(t.text)] || strings.Contains(t.text, ":") {
		return pathRef{}, p.unexpected(t)
	}
	return pathRef{path: t.text, pos: t.pos}, nil
}

// parseSOQL parses one SOQL statement of the supported subset.
func parseSOQL(src string) (*query, *apiError) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	q := &query{src: src}
	if err := p.expectKw("SELECT"); err != nil {
		return nil, err
	}
	for {
		it, err := p.selectItem()
		if err != nil {
			return nil, err
		}
		q.items = append(q.items, it)
		if p.peek().kind != tkComma {
			break
		}
		p.next()
	}
	if err := p.expectKw("FROM"); err != nil {
		return nil, err
	}
	obj := p.next()
	if obj.kind != tkIdent || reserved[strings.ToUpper(obj.text)] || strings.ContainsAny(obj.text, ".:") {
		return nil, p.unexpected(obj)
	}
	q.object, q.objectPos = obj.text, obj.pos
	if isKw(p.peek(), "WHERE") {
		p.next()
		e, err := p.condExpr()
		if err != nil {
			return nil, err
		}
		q.where = e
	}
	if isKw(p.peek(), "GROUP") {
		p.next()
		if err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			f, err := p.fieldPath()
			if err != nil {
				return nil, err
			}
			q.groupBy = append(q.groupBy, f)
			if p.peek().kind != tkComma {
				break
			}
			p.next()
		}
	}
	if isKw(p.peek(), "ORDER") {
		p.next()
		if err := p.expectKw("BY"); err != nil {
			return nil, err
		}
		for {
			f, err := p.fieldPath()
			if err != nil {
				return nil, err
			}
			it := orderItem{path: f.path, pos: f.pos}
			if t := p.peek(); isKw(t, "ASC") || isKw(t, "DESC") {
				p.next()
				it.desc = isKw(t, "DESC")
			}
			if isKw(p.peek(), "NULLS") {
				p.next()
				t := p.next()
				if !isKw(t, "FIRST") && !isKw(t, "LAST") {
					return nil, p.unexpected(t)
				}
				it.nullsGiven, it.nullsLast = true, isKw(t, "LAST")
			}
			q.orderBy = append(q.orderBy, it)
			if p.peek().kind != tkComma {
				break
			}
			p.next()
		}
	}
	if isKw(p.peek(), "LIMIT") {
		p.next()
		t := p.next()
		if t.kind != tkNumber || strings.ContainsAny(t.text, ".+-") {
			return nil, p.unexpected(t)
		}
		q.limit, q.hasLimit = int(t.num), true
	}
	if isKw(p.peek(), "OFFSET") {
		p.next()
		t := p.next()
		if t.kind != tkNumber || strings.ContainsAny(t.text, ".+-") {
			return nil, p.unexpected(t)
		}
		q.offset, q.hasOffset = int(t.num), true
	}
	if t := p.peek(); t.kind != tkEOF {
		return nil, p.unexpected(t)
	}
	return q, nil
}

func (p *parser) selectItem() (selectItem, *apiError) {
	t := p.peek()
	if t.kind != tkIdent {
		return selectItem{}, p.unexpected(p.next())
	}
	up := strings.ToUpper(t.text)
	if p.toks[p.i+1].kind == tkLParen {
		p.next()
		p.next()
		switch up {
		case "FIELDS":
			a := p.next()
			arg := strings.ToUpper(a.text)
			if a.kind != tkIdent || (arg != "ALL" && arg != "STANDARD" && arg != "CUSTOM") {
				return selectItem{}, p.unexpected(a)
			}
			if _, err := p.expect(tkRParen); err != nil {
				return selectItem{}, err
			}
			return selectItem{kind: selFields, arg: arg, pos: t.pos}, nil
		case "COUNT", "MIN", "MAX", "COUNT_DISTINCT":
			it := selectItem{kind: selAgg, fn: up, pos: t.pos}
			if up == "COUNT" && p.peek().kind == tkRParen {
				p.next()
				it.kind = selCount
				return it, nil
			}
			f, err := p.fieldPath()
			if err != nil {
				return selectItem{}, err
			}
			it.path = f.path
			if _, err := p.expect(tkRParen); err != nil {
				return selectItem{}, err
			}
			if a := p.peek(); a.kind == tkIdent && !reserved[strings.ToUpper(a.text)] && !strings.Contains(a.text, ".") {
				p.next()
				it.alias = a.text
			}
			return it, nil
		default:
			return selectItem{}, soqlError(CodeMalformedQuery, p.src, t.pos, "Unknown function: "+t.text)
		}
	}
	f, err := p.fieldPath()
	if err != nil {
		return selectItem{}, err
	}
	return selectItem{kind: selField, path: f.path, pos: f.pos}, nil
}

// condExpr parses conditions joined by one kind of connector: SOQL refuses
// to mix AND and OR without parentheses.
func (p *parser) condExpr() (expr, *apiError) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if !isKw(t, "AND") && !isKw(t, "OR") {
		return first, nil
	}
	and := isKw(t, "AND")
	be := &boolExpr{and: and, terms: []expr{first}, pos: first.exprPos()}
	for {
		t := p.peek()
		if isKw(t, "AND") && and || isKw(t, "OR") && !and {
			p.next()
			e, err := p.unary()
			if err != nil {
				return nil, err
			}
			be.terms = append(be.terms, e)
			continue
		}
		if isKw(t, "AND") || isKw(t, "OR") {
			return nil, p.unexpected(t)
		}
		return be, nil
	}
}

func (p *parser) unary() (expr, *apiError) {
	t := p.peek()
	if isKw(t, "NOT") {
		p.next()
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &notExpr{e: e, pos: t.pos}, nil
	}
	if t.kind == tkLParen {
		p.next()
		e, err := p.condExpr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tkRParen); err != nil {
			return nil, err
		}
		return e, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (expr, *apiError) {
	f, err := p.fieldPath()
	if err != nil {
		return nil, err
	}
	t := p.next()
	switch {
	case t.kind == tkOp:
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		return &cmpExpr{path: f.path, pos: f.pos, op: t.text, opPos: t.pos, lit: lit}, nil
	case isKw(t, "IN") || isKw(t, "NOT"):
		not := isKw(t, "NOT")
		if not {
			if err := p.expectKw("IN"); err != nil {
				return nil, err
			}
		}
		if _, err := p.expect(tkLParen); err != nil {
			return nil, err
		}
		e := &inExpr{path: f.path, pos: f.pos, not: not}
		for {
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			e.lits = append(e.lits, lit)
			if p.peek().kind == tkComma {
				p.next()
				continue
			}
			if _, err := p.expect(tkRParen); err != nil {
				return nil, err
			}
			return e, nil
		}
	case isKw(t, "LIKE"):
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		return &likeExpr{path: f.path, pos: f.pos, lit: lit}, nil
	}
	return nil, p.unexpected(t)
}

var dateKeywords = map[string]bool{
	"TODAY": true, "YESTERDAY": true, "TOMORROW": true, "LAST_N_DAYS": true, "NEXT_N_DAYS": true,
	"N_DAYS_AGO": true, "LAST_N_HOURS": true,
}

func (p *parser) literal() (literal, *apiError) {
	t := p.next()
	l := literal{pos: t.pos}
	switch t.kind {
	case tkString:
		l.kind, l.s = litString, t.val
	case tkNumber:
		l.kind, l.n = litNumber, t.num
	case tkDateTime:
		l.kind, l.t = litDateTime, t.t
	case tkDate:
		l.kind, l.t = litDate, t.t
	case tkIdent:
		up := strings.ToUpper(t.text)
		switch up {
		case "NULL":
			l.kind = litNull
		case "TRUE", "FALSE":
			l.kind, l.b = litBool, up == "TRUE"
		default:
			name, arg, hasArg := strings.Cut(up, ":")
			if !dateKeywords[name] {
				return l, p.unexpected(t)
			}
			needsArg := strings.Contains(name, "_N_")
			if needsArg != hasArg {
				return l, soqlError(CodeMalformedQuery, p.src, t.pos, "line 1:"+itoa(t.pos)+" invalid date literal "+t.text)
			}
			l.kind, l.kw = litDateKeyword, name
			if hasArg {
				l.kwN, _ = strconv.Atoi(arg)
			}
		}
	default:
		return l, p.unexpected(t)
	}
	return l, nil
}

// dateRange resolves a date keyword to [start, end) at now (UTC days).
func (l literal) dateRange(now time.Time) (time.Time, time.Time) {
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	switch l.kw {
	case "YESTERDAY":
		return today.Add(-day), today
	case "TOMORROW":
		return today.Add(day), today.Add(2 * day)
	case "LAST_N_DAYS":
		return today.Add(-time.Duration(l.kwN) * day), today.Add(day)
	case "NEXT_N_DAYS":
		return today.Add(day), today.Add(time.Duration(l.kwN+1) * day)
	case "N_DAYS_AGO":
		d := today.Add(-time.Duration(l.kwN) * day)
		return d, d.Add(day)
	case "LAST_N_HOURS":
		return now.Add(-time.Duration(l.kwN) * time.Hour), now.Add(time.Millisecond)
	default: // TODAY
		return today, today.Add(day)
	}
}
