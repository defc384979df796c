package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The YAML library reports a syntax error at the line where the enclosing block starts (for a
// mis-indented key deep in sink.loki, line 1) and gives no structured position. This file finds
// the damaged line itself: the file is fed to the parser one line at a time, so when it fails we
// know how far it read, and the shortest prefix of the file that still fails ends at the damaged
// line. The message names that line and the key path it sits under (never the line's text: it
// may hold a secret).

// lineReader hands the parser at most one line per Read.
type lineReader struct {
	data     []byte
	consumed int
}

func (r *lineReader) Read(p []byte) (int, error) {
	rest := r.data[r.consumed:]
	if len(rest) == 0 {
		return 0, io.EOF
	}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i+1]
	}
	n := copy(p, rest)
	r.consumed += n
	return n, nil
}

// lines is how many lines the parser has read, the last one possibly in part.
func (r *lineReader) lines() int {
	read := r.data[:r.consumed]
	n := bytes.Count(read, []byte{'\n'})
	if len(read) > 0 && read[len(read)-1] != '\n' {
		n++
	}
	return n
}

// parseYAML decodes the first document of data into a node tree. A syntax error comes back
// as an error naming the damaged line and the key path above it.
func parseYAML(data []byte) (*yaml.Node, error) {
	r := &lineReader{data: data}
	var doc yaml.Node
	err := yaml.NewDecoder(r).Decode(&doc)
	if err == nil || errors.Is(err, io.EOF) {
		return &doc, err
	}
	reported, msg := problem(err)
	if reported == 0 {
		return nil, errors.New(msg) // not a syntax error (an unknown anchor, say)
	}
	lines := splitLines(data)
	line := damagedLine(lines, r.lines(), reported)
	where := fmt.Sprintf("line %d", line)
	if p := keyPathAt(lines, line); p != "" {
		where += ", at " + p
	}
	return nil, fmt.Errorf("%s: %s%s", where, msg, indentHint(lines, line))
}

// problem splits the parser's message into the line it names (0 if none) and the rest.
func problem(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				return n, rest[i+2:]
			}
		}
	}
	return 0, msg
}

// damagedLine returns the first line of the file such that the file up to it cannot be parsed.
// read is how far the parser read (the file up to it fails); reported is the line the parser
// named (where the enclosing construct starts, counted from 0 or 1 depending on the kind of
// error, or where it gave up). Probes parse at most a few times the file in all.
func damagedLine(lines [][]byte, read, reported int) int {
	if read <= 0 {
		return 0
	}
	budget, spent := 0, 0
	for _, l := range lines {
		budget += 4 * len(l)
	}
	fails := func(n int) bool {
		prefix := bytes.Join(lines[:n], nil)
		spent += len(prefix)
		var doc yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(prefix)).Decode(&doc)
		return err != nil && !errors.Is(err, io.EOF)
	}
	// Usually the damage is where the parser stopped reading: one parse shows it.
	if read == 1 || !fails(read-1) {
		return read
	}
	// Otherwise an unclosed quote or bracket swallowed the lines after it; the parser often
	// names the line it starts on.
	for _, r := range []int{reported, reported + 1} {
		if r >= 1 && r < read-1 && fails(r) && (r == 1 || !fails(r-1)) {
			return r
		}
	}
	good, bad := 0, read-1
	for bad-good > 1 && spent < budget {
		mid := (good + bad) / 2
		if fails(mid) {
			bad = mid
		} else {
			good = mid
		}
	}
	return bad
}

// splitLines splits data after each newline.
func splitLines(data []byte) [][]byte {
	return bytes.SplitAfter(data, []byte{'\n'})
}

// lineShape is what keyPathAt needs to know of a line: where its key starts, whether it opens a
// list entry ("- key: value"), and the key.
type lineShape struct {
	indent int // column of the first character
	keyCol int // column of the key (after "- " for a list entry)
	item   bool
	key    string
	header bool // a key with no value on its line: a section or list follows
	blank  bool // empty or a comment
}

func shapeOf(line []byte) lineShape {
	s := strings.TrimRight(string(line), "\r\n")
	trimmed := strings.TrimLeft(s, " \t")
	sh := lineShape{indent: len(s) - len(trimmed)}
	if trimmed == "" || strings.HasPrefix(trimmed, "#") {
		sh.blank = true
		return sh
	}
	sh.keyCol = sh.indent
	for strings.HasPrefix(trimmed, "- ") || trimmed == "-" {
		sh.item = true
		rest := strings.TrimLeft(strings.TrimPrefix(trimmed, "-"), " ")
		sh.keyCol += len(trimmed) - len(rest)
		trimmed = rest
	}
	if i := strings.Index(trimmed, ":"); i > 0 && (i+1 == len(trimmed) || trimmed[i+1] == ' ') {
		if k := strings.Trim(trimmed[:i], `"' `); k != "" && !strings.ContainsAny(k, "{}[],&*!|>%@`") {
			sh.key = k
			rest := strings.TrimSpace(trimmed[i+1:])
			sh.header = rest == "" || strings.HasPrefix(rest, "#") || (strings.HasPrefix(rest, "&") && !strings.Contains(rest, " "))
		}
	}
	return sh
}

// keyPathAt returns the dotted key path of the key on the 1-based line n, read from indentation
// alone (the file does not parse): the key itself when the line has one, under the keys of the
// less indented lines above it. List entries show as [].
func keyPathAt(lines [][]byte, n int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	target := shapeOf(lines[n-1])
	if target.blank {
		return ""
	}
	var segs []string
	if target.key != "" {
		segs = append(segs, shortKey(target.key))
	}
	col := target.keyCol
	if target.item {
		segs = append([]string{"[]"}, segs...)
		col = target.indent
	}
	for i := n - 2; i >= 0 && col > 0; i-- {
		sh := shapeOf(lines[i])
		if sh.blank {
			continue
		}
		switch {
		case sh.item && sh.keyCol == col:
			// an earlier key of the same list entry; the entry itself is the parent
			segs = append([]string{"[]"}, segs...)
			col = sh.indent
		case sh.keyCol < col && sh.header:
			segs = append([]string{shortKey(sh.key)}, segs...)
			col = sh.keyCol
			if sh.item {
				segs = append([]string{"[]"}, segs...)
				col = sh.indent
			}
		}
	}
	return strings.ReplaceAll(strings.Join(segs, "."), ".[]", "[]")
}

// indentHint adds advice when the damaged line starts at a column none of the lines above it
// allows: the previous key's column (a sibling), deeper after a section header (a child), or
// the column of a section above (closing sections).
func indentHint(lines [][]byte, n int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	here := shapeOf(lines[n-1])
	if here.blank {
		return ""
	}
	if strings.Contains(string(lines[n-1][:here.indent]), "\t") {
		return "; indent with spaces, not tabs"
	}
	prevIdx := n - 2
	for prevIdx >= 0 && shapeOf(lines[prevIdx]).blank {
		prevIdx--
	}
	if prevIdx < 0 {
		return ""
	}
	prev := shapeOf(lines[prevIdx])
	if prev.header && here.indent > prev.keyCol {
		return ""
	}
	allowed := map[int]bool{0: true, prev.keyCol: true, prev.indent: true}
	col := min(prev.keyCol, prev.indent)
	for i := prevIdx - 1; i >= 0 && col > 0; i-- {
		sh := shapeOf(lines[i])
		if sh.blank || sh.keyCol >= col {
			continue
		}
		allowed[sh.keyCol], allowed[sh.indent] = true, true
		col = min(sh.keyCol, sh.indent)
	}
	if allowed[here.indent] {
		return ""
	}
	return fmt.Sprintf("; check the indentation: the line starts at column %d, where no key above it does", here.indent+1)
}
