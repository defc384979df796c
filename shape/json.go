package shape

import (
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
)

// isJSONNumber reports whether v is a number in JSON syntax.
func isJSONNumber(v []byte) bool {
	// Most values of a Number column are integers without a sign: one compare a digit.
	if len(v) > 0 && v[0]-'1' < 9 {
		i := 1
		for i < len(v) && v[i]-'0' < 10 {
			i++
		}
		if i == len(v) {
			return true
		}
	}
	return isJSONNumberSyntax(v)
}

// isJSONNumberSyntax is isJSONNumber's whole grammar: sign, integer, fraction, exponent.
func isJSONNumberSyntax(v []byte) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	if i >= len(v) {
		return false
	}
	switch {
	case v[i] == '0':
		i++
	case v[i] >= '1' && v[i] <= '9':
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		d := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		d := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(v)
}

// appendJSONValue appends a field value according to its kind.
func appendJSONValue(dst []byte, kind Kind, v []byte) []byte {
	switch kind {
	case Null:
		return append(dst, "null"...)
	case Number:
		if isJSONNumber(v) {
			return append(dst, v...)
		}
	case Bool:
		switch string(v) {
		case "true", "false":
			return append(dst, v...)
		case "1": // EventLogFile writes Boolean columns as 1 and 0
			return append(dst, "true"...)
		case "0":
			return append(dst, "false"...)
		}
	}
	// Invalid UTF-8 becomes U+FFFD itself, not its escape: the line is what people read, and
	// metadata values carry the same character (validUTF8).
	return jsonenc.AppendString(dst, v, jsonenc.LiteralFFFD)
}

// validUTF8 returns v with invalid UTF-8 replaced by U+FFFD (appending to scratch when needed).
func validUTF8(scratch, v []byte) []byte {
	if utf8.Valid(v) {
		return v
	}
	out := scratch[:0]
	for len(v) > 0 {
		r, n := utf8.DecodeRune(v)
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\ufffd"...)
		} else {
			out = append(out, v[:n]...)
		}
		v = v[n:]
	}
	return out
}
