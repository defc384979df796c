package loki

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Label is one name/value pair: a stream label or a structured-metadata field.
type Label struct {
	Name  string
	Value string
}

// Labels is an immutable stream label set, sorted by name, with its canonical
// string form computed once at construction. The zero value is the empty set,
// whose string form is "{}".
//
// Build a Labels once per distinct stream and reuse it for every entry of that
// stream: the client groups entries by the precomputed string, so reuse keeps
// grouping allocation-free.
//
// A Labels is one pointer: copies share the set, so every entry of a batch
// carries 8 bytes of labels rather than the pairs' slice and the string.
type Labels struct {
	s *labelSet
}

type labelSet struct {
	pairs []Label
	str   string
}

// pairs returns the labels in name order.
func (l Labels) pairs() []Label {
	if l.s == nil {
		return nil
	}
	return l.s.pairs
}

// NewLabels returns the label set made of pairs. Pairs with an empty value are
// dropped (Loki treats an empty value as an absent label); when a name occurs
// more than once, the last pair wins. The pairs slice is not retained.
func NewLabels(pairs ...Label) Labels {
	ps := make([]Label, 0, len(pairs))
	for i, p := range pairs {
		if laterHasName(pairs[i+1:], p.Name) {
			continue
		}
		if p.Value == "" {
			continue
		}
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Label) int { return cmp.Compare(a.Name, b.Name) })
	if len(ps) == 0 {
		return Labels{}
	}
	return Labels{s: &labelSet{pairs: ps, str: formatLabels(ps)}}
}

func laterHasName(rest []Label, name string) bool {
	for _, q := range rest {
		if q.Name == name {
			return true
		}
	}
	return false
}

// LabelsFromMap returns the label set made of the map's entries, dropping empty
// values.
func LabelsFromMap(m map[string]string) Labels {
	ps := make([]Label, 0, len(m))
	for k, v := range m {
		ps = append(ps, Label{Name: k, Value: v})
	}
	return NewLabels(ps...)
}

// With returns a new label set: l with pairs added, a pair replacing an
// existing label of the same name (an empty value removes it).
func (l Labels) With(pairs ...Label) Labels {
	all := make([]Label, 0, len(l.pairs())+len(pairs))
	all = append(all, l.pairs()...)
	all = append(all, pairs...)
	return NewLabels(all...)
}

// String returns the canonical form, e.g. {event_type="Login", job="sf2loki"}:
// names sorted, values double-quoted with Go escapes (the form Prometheus
// prints and both Loki and VictoriaLogs parse).
func (l Labels) String() string {
	if l.s == nil {
		return "{}"
	}
	return l.s.str
}

// Len returns the number of labels.
func (l Labels) Len() int { return len(l.pairs()) }

// At returns the i-th label in name order.
func (l Labels) At(i int) Label { return l.pairs()[i] }

// Get returns the value of the label called name, and whether it is present.
func (l Labels) Get(name string) (string, bool) {
	ps := l.pairs()
	i, ok := slices.BinarySearchFunc(ps, name, func(p Label, n string) int { return cmp.Compare(p.Name, n) })
	if !ok {
		return "", false
	}
	return ps[i].Value, true
}

// Map returns the labels as a new map.
func (l Labels) Map() map[string]string {
	m := make(map[string]string, len(l.pairs()))
	for _, p := range l.pairs() {
		m[p.Name] = p.Value
	}
	return m
}

func formatLabels(ps []Label) string {
	if len(ps) == 0 {
		return "{}"
	}
	n := 2
	for _, p := range ps {
		n += len(p.Name) + len(p.Value) + 6
	}
	buf := make([]byte, 0, n)
	buf = append(buf, '{')
	for i, p := range ps {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = append(buf, p.Name...)
		buf = append(buf, '=')
		buf = strconv.AppendQuote(buf, p.Value)
	}
	buf = append(buf, '}')
	return string(buf)
}

// ParseLabels reads a label set in the canonical form String writes (names unquoted, values
// Go-quoted, pairs separated by commas, in braces), in any order and spacing. It is the
// inverse of String for the dead-letter file.
func ParseLabels(s string) (Labels, error) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return Labels{}, fmt.Errorf("labels %q: not enclosed in braces", s)
	}
	t = strings.TrimSpace(t[1 : len(t)-1])
	var pairs []Label
	for t != "" {
		name, rest, ok := strings.Cut(t, "=")
		name = strings.TrimSpace(name)
		if !ok || nameProblem(name) != "" {
			return Labels{}, fmt.Errorf("labels %q: expected name=\"value\" at %q", s, t)
		}
		rest = strings.TrimSpace(rest)
		q, err := strconv.QuotedPrefix(rest)
		if err != nil || q[0] != '"' {
			return Labels{}, fmt.Errorf("labels %q: the value of %s is not double-quoted", s, name)
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return Labels{}, fmt.Errorf("labels %q: the value of %s: %w", s, name, err)
		}
		pairs = append(pairs, Label{Name: name, Value: v})
		t = strings.TrimSpace(rest[len(q):])
		if t != "" {
			if t[0] != ',' {
				return Labels{}, fmt.Errorf("labels %q: expected a comma after the value of %s", s, name)
			}
			t = strings.TrimSpace(t[1:])
		}
	}
	return NewLabels(pairs...), nil
}
