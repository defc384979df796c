package shape

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// jsonSafe[c] is true for ASCII bytes that need no escaping inside a JSON string.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, so the line is
// always valid UTF-8 (Loki rejects lines that are not).
func appendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs attention (the common case).
		for i+8 <= len(s) && safe8(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := decodeRune(s, i)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript consumers; escape them as
		// encoding/json does.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// safe8 reports whether none of the eight bytes of x is a control character, '"', '\\' or
// non-ASCII (SWAR: a zero byte of v shows as a set high bit of (v-lsb) &^ v).
func safe8(x uint64) bool {
	ctl := (x - lsb*0x20) &^ x
	quote := x ^ (lsb * '"')
	back := x ^ (lsb * '\\')
	return (ctl|(quote-lsb)&^quote|(back-lsb)&^back|x)&msb == 0
}

// isJSONNumber reports whether v is a number in JSON syntax.
func isJSONNumber(v []byte) bool {
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
		if string(v) == "true" || string(v) == "false" {
			return append(dst, v...)
		}
	}
	return appendJSONString(dst, v)
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
