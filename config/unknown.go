package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxUnknownShown is how many unknown keys of one mapping are reported one by one.
const maxUnknownShown = 10

// unknownKey is a key of a mapping that its section does not have.
type unknownKey struct {
	key  string
	line int
}

// scope is a mapping being decoded: the decoder keeps the chain of them, so an unknown key can be
// recognised as a key of an enclosing section (indented too far) or of a section inside this
// one (not indented far enough).
type scope struct {
	fields []*field
	path   string
}

// home is the section an unknown key belongs to by name.
type home struct {
	path   string // key path of the section ("" = the top level)
	header string // the section's key as written in this mapping, for "indent them under"
	line   int    // line of that key, 0 when the section is not in this mapping
	up     bool   // the section encloses this mapping: the keys are indented too far
}

// reportUnknown reports the unknown keys of one mapping. Keys that belong to a section one
// level in or out are almost always an indentation slip, so they get one message per section
// with the fix; the rest are reported one by one with a suggestion, at most maxUnknownShown.
func (l *loader) reportUnknown(n *yaml.Node, fields []*field, path string, valid []string, unknown []unknownKey) {
	type group struct {
		home home
		keys []unknownKey
	}
	var groups []*group
	byHome := map[string]*group{}
	var rest []unknownKey
	for _, u := range unknown {
		h, ok := l.homeOf(u, n, fields, path)
		if !ok {
			rest = append(rest, u)
			continue
		}
		g := byHome[h.path]
		if g == nil {
			g = &group{home: h}
			byHome[h.path] = g
			groups = append(groups, g)
		}
		g.keys = append(g.keys, u)
	}
	for _, g := range groups {
		l.errs.add(path, "%s", misplacedMessage(path, g.home, g.keys))
	}
	for i, u := range rest {
		if i == maxUnknownShown {
			l.errs.add(path, "%d more unknown keys here (lines %d-%d)", len(rest)-i, u.line, rest[len(rest)-1].line)
			break
		}
		msg := fmt.Sprintf("unknown key (line %d)", u.line)
		if s := suggest(u.key, valid); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else {
			msg += "; valid keys here: " + strings.Join(valid, ", ")
		}
		l.errs.add(join(path, shortKey(u.key)), "%s", msg)
	}
}

// homeOf finds the section u belongs to by name: a section of this mapping (preferring the
// closest one written above the key), else the nearest enclosing section.
func (l *loader) homeOf(u unknownKey, n *yaml.Node, fields []*field, path string) (home, bool) {
	var best home
	found := 0
	for _, f := range fields {
		if (f.kind != kindStruct && f.kind != kindStructList) || !hasKey(f.children, u.key) {
			continue
		}
		h := home{path: join(path, f.key), header: f.key}
		if f.kind == kindStructList {
			h.path += "[]"
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Value == f.key && k.Line < u.line {
				h.line = k.Line
			}
		}
		switch {
		case found == 0, h.line > best.line:
			best = h
		}
		found++
	}
	if found == 1 || (found > 1 && best.line > 0) {
		return best, true
	}
	for i := len(l.scopes) - 2; i >= 0; i-- {
		if s := l.scopes[i]; hasKey(s.fields, u.key) {
			return home{path: s.path, up: true}, true
		}
	}
	return home{}, false
}

// hasKey reports whether a section has the key (a secret's <key>_file included).
func hasKey(fields []*field, key string) bool {
	base, isFile := strings.CutSuffix(key, "_file")
	for _, f := range fields {
		if f.key == key || (isFile && f.kind == kindSecret && f.key == base) {
			return true
		}
	}
	return false
}

// misplacedMessage is the one message for the keys of a mapping that belong to another section.
func misplacedMessage(path string, h home, keys []unknownKey) string {
	names := make([]string, 0, 3)
	for _, k := range keys[:min(3, len(keys))] {
		names = append(names, shortKey(k.key))
	}
	list := strings.Join(names, ", ")
	if len(keys) > 3 {
		list += fmt.Sprintf(" and %d more", len(keys)-3)
	}
	lines := fmt.Sprintf("line %d", keys[0].line)
	if last := keys[len(keys)-1].line; last != keys[0].line {
		lines = fmt.Sprintf("lines %d-%d", keys[0].line, last)
	}
	subject, pron := "keys "+list+" ("+lines+") belong", "them"
	if len(keys) == 1 {
		subject, pron = "key "+list+" ("+lines+") belongs", "it"
	}
	msg := fmt.Sprintf("%s to %s, not %s: ", subject, sectionName(h.path), sectionName(path))
	switch {
	case h.up && h.path == "":
		msg += fmt.Sprintf("indent %s less, level with the other top-level keys", pron)
	case h.up:
		msg += fmt.Sprintf("indent %s less, level with the other keys of %s", pron, h.path)
	case h.line > 0:
		msg += fmt.Sprintf("indent %s under %q (line %d)", pron, h.header+":", h.line)
	default:
		msg += fmt.Sprintf("add %q above %s and indent %s under it", h.header+":", pron, pron)
	}
	return msg
}

// sectionName names a section in a message.
func sectionName(path string) string {
	if path == "" {
		return "the top level"
	}
	if p, ok := strings.CutSuffix(path, "[]"); ok {
		return "an entry of " + p
	}
	return path
}
