package logql

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Stream is what a receiver holds for one stream: its labels, and the names of the structured
// metadata and of the JSON line fields (as Loki's json parser names them) of its entries.
type Stream struct {
	Labels   map[string]string
	Metadata map[string]bool
	Fields   map[string]bool
}

// String names the stream by its labels.
func (s Stream) String() string {
	names := make([]string, 0, len(s.Labels))
	for n := range s.Labels {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%q", n, s.Labels[n])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// builtin are names every query may use: Loki's own.
var builtin = map[string]bool{"__error__": true, "__error_details__": true, "__line__": true, "__timestamp__": true, "__stream_shard__": true}

var invalidLabelChar = regexp.MustCompile(`[^A-Za-z0-9_]`)

// JSONFields adds to fields the names Loki's json parser gives the keys of a JSON object line:
// nested objects' keys joined to their parent's with _, every character that is not a letter,
// digit or _ replaced by _. It reports false for a line that is not a JSON object.
func JSONFields(line string, fields map[string]bool) bool {
	var obj map[string]any
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		return false
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			name := prefix + invalidLabelChar.ReplaceAllString(k, "_")
			if sub, ok := v.(map[string]any); ok {
				walk(name+"_", sub)
				continue
			}
			if _, isArray := v.([]any); isArray {
				continue // Loki's json parser skips arrays
			}
			fields[name] = true
		}
	}
	walk("", obj)
	return true
}

// Matches reports whether a stream with these labels is selected (an absent label is empty).
func (s Selector) Matches(labels map[string]string) (bool, error) {
	for _, m := range s.Matchers {
		v := labels[m.Name]
		var ok bool
		switch m.Op {
		case "=":
			ok = v == m.Value
		case "!=":
			ok = v != m.Value
		case "=~", "!~":
			re, err := regexp.Compile(`^(?:` + m.Value + `)$`)
			if err != nil {
				return false, fmt.Errorf("matcher %s%s%q: %w", m.Name, m.Op, m.Value, err)
			}
			ok = re.MatchString(v) == (m.Op == "=~")
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// Check returns what is wrong with q against the shipped streams: a selector that selects none
// of them, and every name used after a selector that one of the streams it selects does not
// have (as a label, structured metadata, a JSON field after a json stage, or a name the pipeline
// defines).
func Check(q Query, streams []Stream) []string {
	var problems []string
	for _, sel := range q.Selectors {
		var matched []Stream
		for _, st := range streams {
			ok, err := sel.Matches(st.Labels)
			if err != nil {
				return append(problems, err.Error())
			}
			if ok {
				matched = append(matched, st)
			}
		}
		if len(matched) == 0 {
			problems = append(problems, fmt.Sprintf("selector %s selects no stream sf2loki shipped", sel))
			continue
		}
		for _, st := range matched {
			for _, r := range sel.Refs {
				if !st.has(r, sel.Defined) {
					problems = append(problems, fmt.Sprintf("%s %q is not in stream %s", r.Where, r.Name, st))
				}
			}
		}
	}
	return problems
}

func (st Stream) has(r Ref, defined []string) bool {
	if builtin[r.Name] || slices.Contains(defined, r.Name) || st.Metadata[r.Name] {
		return true
	}
	if _, ok := st.Labels[r.Name]; ok {
		return true
	}
	return r.AfterJSON && st.Fields[r.Name]
}

// String writes the selector back as LogQL.
func (s Selector) String() string {
	parts := make([]string, len(s.Matchers))
	for i, m := range s.Matchers {
		parts[i] = fmt.Sprintf("%s%s%q", m.Name, m.Op, m.Value)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
