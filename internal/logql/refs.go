// Package logql reads what a LogQL query refers to: its stream selectors and, after each, the
// labels, structured metadata and parsed fields its pipeline and grouping use. It understands the
// subset sf2loki's Grafana content pack (deploy/grafana/content) is written in and refuses
// anything else, so that the pack's test can check every name against what sf2loki ships
// instead of silently skipping what it does not read. It is not a LogQL implementation.
package logql

import (
	"fmt"
	"regexp"
	"strings"
)

// Query is the references of one query.
type Query struct {
	Selectors []Selector
}

// Selector is one stream selector and what the query uses of its streams.
type Selector struct {
	Matchers []Matcher
	// Refs are the names used after the selector (label filters, unwrap, line_format, grouping),
	// in order, each marked with whether a json stage came before it.
	Refs []Ref
	// Defined are names the pipeline creates (label_format), available to later stages.
	Defined []string
}

// Matcher is one label matcher of a stream selector.
type Matcher struct {
	Name, Op, Value string
}

// Ref is one name a query uses.
type Ref struct {
	Name string
	// AfterJSON says a json stage parsed the line before the use: the name may be a field of
	// the JSON line (nested keys joined with _, invalid characters replaced by _).
	AfterJSON bool
	// Where says how the name is used (filter, unwrap, line_format, by).
	Where string
}

// Variables are the Grafana variables the content pack uses and what they stand for when the
// query is read: an "all" value for template variables, a duration for the interval macros.
var Variables = map[string]string{
	"$__interval": "5m", "$__auto": "5m", "$__range": "1h", "$__rate_interval": "5m", "${__interval}": "5m",
	"${org}": ".*", "$org": ".*",
}

// Parse reads the references of expr (Grafana variables are replaced per Variables first).
func Parse(expr string) (Query, error) {
	for _, k := range sortedKeys(Variables) {
		expr = strings.ReplaceAll(expr, k, Variables[k])
	}
	if i := strings.IndexByte(expr, '$'); i >= 0 {
		return Query{}, fmt.Errorf("unknown variable at %q", excerpt(expr[i:]))
	}
	var q Query
	groupings, err := groupingRefs(expr)
	if err != nil {
		return Query{}, err
	}
	for i := 0; i < len(expr); {
		switch expr[i] {
		case '"', '`':
			j, err := skipString(expr, i)
			if err != nil {
				return Query{}, err
			}
			i = j
		case '{':
			sel, next, err := parseSelector(expr, i)
			if err != nil {
				return Query{}, err
			}
			q.Selectors = append(q.Selectors, sel)
			i = next
		default:
			i++
		}
	}
	if len(q.Selectors) == 0 {
		return Query{}, fmt.Errorf("no stream selector")
	}
	for i := range q.Selectors {
		for _, g := range groupings {
			q.Selectors[i].Refs = append(q.Selectors[i].Refs, Ref{Name: g, AfterJSON: q.Selectors[i].hasJSON(), Where: "by"})
		}
	}
	return q, nil
}

func (s Selector) hasJSON() bool {
	for _, d := range s.Defined {
		if d == jsonMark {
			return true
		}
	}
	return false
}

// jsonMark is recorded in Defined when the pipeline has a json stage.
const jsonMark = "\x00json"

var groupingRE = regexp.MustCompile(`\b(by|without)\s*\(([^)]*)\)`)

// groupingRefs returns the label names of every by (...) and without (...) clause.
func groupingRefs(expr string) ([]string, error) {
	var out []string
	for _, m := range groupingRE.FindAllStringSubmatch(stripStrings(expr), -1) {
		for _, n := range strings.Split(m[2], ",") {
			n = strings.TrimSpace(n)
			if !identRE.MatchString(n) {
				return nil, fmt.Errorf("%s (...) holds %q, not a label name", m[1], n)
			}
			out = append(out, n)
		}
	}
	return out, nil
}

var (
	identRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	matcherRE = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)
)

// parseSelector reads the selector starting at expr[i] == '{' and its pipeline, returning the
// index after the pipeline.
func parseSelector(expr string, i int) (Selector, int, error) {
	end := strings.IndexByte(expr[i:], '}')
	if end < 0 {
		return Selector{}, 0, fmt.Errorf("unclosed selector at %q", excerpt(expr[i:]))
	}
	var sel Selector
	for _, part := range splitTop(expr[i+1:i+end], ',') {
		m := matcherRE.FindStringSubmatch(part)
		if m == nil {
			return Selector{}, 0, fmt.Errorf("matcher %q is not name op \"value\"", part)
		}
		sel.Matchers = append(sel.Matchers, Matcher{Name: m[1], Op: m[2], Value: unquote(m[3])})
	}
	if len(sel.Matchers) == 0 {
		return Selector{}, 0, fmt.Errorf("empty selector")
	}
	start := i + end + 1
	stop := pipelineEnd(expr, start)
	if err := sel.parsePipeline(expr[start:stop]); err != nil {
		return Selector{}, 0, err
	}
	return sel, stop, nil
}

// pipelineEnd is where the pipeline after a selector ends: a range, an unbalanced ')' or ',',
// or the end of the query.
func pipelineEnd(expr string, i int) int {
	depth := 0
	for i < len(expr) {
		switch c := expr[i]; c {
		case '"', '`':
			j, err := skipString(expr, i)
			if err != nil {
				return len(expr)
			}
			i = j
			continue
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return i
			}
			depth--
		case '[', ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

var (
	lineFilterRE  = regexp.MustCompile(`^\s*(?:(?:\|=|\|~|!=|!~)\s*(?:"(?:[^"\\]|\\.)*"|` + "`[^`]*`" + `)\s*)*$`)
	lineFormatRE  = regexp.MustCompile(`\{\{-?\s*\.([A-Za-z_][A-Za-z0-9_]*)`)
	wrappedRE     = regexp.MustCompile(`^(duration|duration_seconds|bytes)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)
	labelFormatRE = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*$`)
)

// parsePipeline reads the stages after a selector.
func (s *Selector) parsePipeline(p string) error {
	stages := splitTop(p, '|')
	if strings.TrimSpace(stages[0]) != "" && !lineFilterRE.MatchString(stages[0]) {
		return fmt.Errorf("%q after a selector is not a line filter", strings.TrimSpace(stages[0]))
	}
	json := false
	for _, st := range stages[1:] {
		st = strings.TrimSpace(st)
		word, rest, _ := strings.Cut(st, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(st, "=") || strings.HasPrefix(st, "~"):
			if !lineFilterRE.MatchString("|" + st) {
				return fmt.Errorf("line filter %q", st)
			}
		case st == "json":
			json = true
			s.Defined = append(s.Defined, jsonMark)
		case word == "json" || word == "logfmt" || word == "regexp" || word == "pattern" || st == "logfmt":
			return fmt.Errorf("stage %q is outside the subset this reader knows (json without parameters)", st)
		case word == "unwrap":
			name := rest
			if m := wrappedRE.FindStringSubmatch(rest); m != nil {
				name = m[2]
			}
			if !identRE.MatchString(name) {
				return fmt.Errorf("unwrap %q", rest)
			}
			s.Refs = append(s.Refs, Ref{Name: name, AfterJSON: json, Where: "unwrap"})
		case word == "line_format":
			for _, m := range lineFormatRE.FindAllStringSubmatch(rest, -1) {
				s.Refs = append(s.Refs, Ref{Name: m[1], AfterJSON: json, Where: "line_format"})
			}
		case word == "label_format":
			for _, part := range splitTop(rest, ',') {
				m := labelFormatRE.FindStringSubmatch(part)
				if m == nil {
					return fmt.Errorf("label_format %q", part)
				}
				if strings.HasPrefix(m[2], `"`) || strings.HasPrefix(m[2], "`") {
					for _, t := range lineFormatRE.FindAllStringSubmatch(m[2], -1) {
						s.Refs = append(s.Refs, Ref{Name: t[1], AfterJSON: json, Where: "label_format"})
					}
				} else if identRE.MatchString(m[2]) {
					s.Refs = append(s.Refs, Ref{Name: m[2], AfterJSON: json, Where: "label_format"})
				} else {
					return fmt.Errorf("label_format %q", part)
				}
				s.Defined = append(s.Defined, m[1])
			}
		case word == "keep" || word == "drop":
			for _, n := range splitTop(rest, ',') {
				if n = strings.TrimSpace(n); !identRE.MatchString(n) {
					return fmt.Errorf("%s %q", word, n)
				}
				if word == "keep" {
					s.Refs = append(s.Refs, Ref{Name: n, AfterJSON: json, Where: word})
				}
			}
		case st == "decolorize":
		default:
			refs, err := filterRefs(st)
			if err != nil {
				return err
			}
			for _, r := range refs {
				s.Refs = append(s.Refs, Ref{Name: r, AfterJSON: json, Where: "filter"})
			}
		}
	}
	return nil
}

var filterTokenRE = regexp.MustCompile(`\s*(?:("(?:[^"\\]|\\.)*"|` + "`[^`]*`" + `)|(=~|!~|!=|==|>=|<=|=|>|<)|([A-Za-z_][A-Za-z0-9_]*)|([0-9][0-9.]*[A-Za-z]*)|([(),]))`)

// filterRefs reads a label filter expression (name op value, joined by and, or and commas) and
// returns the names it tests.
func filterRefs(st string) ([]string, error) {
	var refs []string
	rest := st
	expectOp := false
	for strings.TrimSpace(rest) != "" {
		m := filterTokenRE.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return nil, fmt.Errorf("label filter %q: cannot read %q", st, excerpt(rest))
		}
		switch {
		case m[4] >= 0: // an operator
			if !expectOp {
				return nil, fmt.Errorf("label filter %q: an operator without a name before it", st)
			}
			expectOp = false
		case m[6] >= 0: // a word
			w := rest[m[6]:m[7]]
			if w == "and" || w == "or" {
				break
			}
			if expectOp {
				return nil, fmt.Errorf("label filter %q: %q is not followed by an operator", st, refs[len(refs)-1])
			}
			refs = append(refs, w)
			expectOp = true
		}
		rest = rest[m[1]:]
	}
	if expectOp {
		return nil, fmt.Errorf("stage %q is not a label filter this reader knows", st)
	}
	return refs, nil
}

// splitTop splits s at sep outside strings, parentheses and braces.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '`':
			j, err := skipString(s, i)
			if err != nil {
				return append(out, s[last:])
			}
			i = j - 1
		case c == '(' || c == '{':
			depth++
		case c == ')' || c == '}':
			depth--
		case c == sep && depth == 0:
			out = append(out, s[last:i])
			last = i + 1
		}
	}
	return append(out, s[last:])
}

// skipString returns the index after the string literal starting at s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case q == '"' && s[j] == '\\':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %q", excerpt(s[i:]))
}

// stripStrings blanks out string literals (so that words inside them are not read as syntax).
func stripStrings(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		if b[i] == '"' || b[i] == '`' {
			j, err := skipString(s, i)
			if err != nil {
				return string(b)
			}
			for k := i + 1; k < j-1; k++ {
				b[k] = ' '
			}
			i = j - 1
		}
	}
	return string(b)
}

func unquote(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(s)
}

func excerpt(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Longest first, so ${org} is replaced before $org.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && len(keys[j]) > len(keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
