// Package jsonenc writes JSON string literals into a caller's buffer without allocating: the one
// escaping shared by the Loki push encoder, the shaper's log lines and the Pub/Sub event decoder.
//
// The escaping is encoding/json's with HTML escaping off: '"' and '\\' are backslash-escaped,
// '\n', '\r' and '\t' get their short escapes, other control characters (below U+0020) become
// \u00XX ('\b' and '\f' included, which encoding/json writes as \b and \f), U+2028 and U+2029
// become \u2028 and \u2029 (they break JavaScript consumers), and '<', '>', '&' and U+007F are
// kept as they are. A byte that is not part of valid UTF-8 is replaced by U+FFFD (JSON text must
// be UTF-8), written as the Replacement says.
//
// Plain and Classify tell a scanner which bytes of its input that escaping would touch, so
// that a value with none of them is copied as it is.
package jsonenc

import (
	"math/bits"
	"unicode/utf8"
)

// Replacement says how a byte that is not part of valid UTF-8 is written.
type Replacement uint8

const (
	// EscapedFFFD writes the six-byte escape \ufffd, as encoding/json does: what the Loki push
	// body and the Pub/Sub event JSON carry.
	EscapedFFFD Replacement = iota
	// LiteralFFFD writes the character U+FFFD itself (three bytes of UTF-8): for text that people
	// read as it is stored, such as the shaper's log lines, where the escape would show as six
	// characters.
	LiteralFFFD
)

const hexDigits = "0123456789abcdef"

// safe marks the bytes that need no attention inside a JSON string: ASCII that is not escaped.
var safe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s to dst as a quoted JSON string and returns the extended buffer.
func AppendString[S ~string | ~[]byte](dst []byte, s S, r Replacement) []byte {
	dst = append(dst, '"')
	i := Plain(s)
	if i == len(s) { // the common case: one copy
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i < len(s) {
		// Eight bytes at a time while none needs attention (the common case); a word that has
		// one leads straight to its first such byte.
		for i+8 <= len(s) {
			if m := attention8(load8(s, i)); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
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
		ru, n := decodeRune(s, i)
		if ru == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			if r == LiteralFFFD {
				dst = append(dst, "\ufffd"...)
			} else {
				dst = append(dst, `\ufffd`...)
			}
			i++
			start = i
			continue
		}
		if ru == '\u2028' || ru == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[ru&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// StringLen returns len(AppendString(nil, s, r)) without building the string.
func StringLen[S ~string | ~[]byte](s S, r Replacement) int {
	invalid := 5 // `\ufffd` in place of one byte
	if r == LiteralFFFD {
		invalid = 2 // "\ufffd" is three bytes of UTF-8
	}
	n := 2 + len(s)
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs attention (the common case); a word that has
		// one leads straight to its first such byte.
		for i+8 <= len(s) {
			if m := attention8(load8(s, i)); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if !safe[c] {
				switch c {
				case '"', '\\', '\n', '\r', '\t':
					n++
				default:
					n += 5
				}
			}
			i++
			continue
		}
		ru, size := decodeRune(s, i)
		switch {
		case ru == utf8.RuneError && size == 1:
			n += invalid
		case ru == '\u2028' || ru == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}

// Plain returns the length of the longest prefix of s that needs no attention, inside a JSON
// string written or read: no '"', '\\', control character or non-ASCII byte. It looks at eight
// bytes at a time, then byte by byte through a table (field values are mostly short).
func Plain[S ~string | ~[]byte](s S) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if m := attention8(load8(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(s) && safe[s[i]] {
		i++
	}
	return i
}

// load8 reads the eight bytes of s at i as a little-endian word.
func load8[S ~string | ~[]byte](s S, i int) uint64 {
	w := s[i : i+8] // one bounds check for the eight bytes, which the compiler loads as one word
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// attention8 returns the high bits of those bytes of x (little-endian) that are a control
// character, '"', '\\' or non-ASCII; zero when none is (SWAR: a zero byte of v shows as a set
// high bit of (v-lsb) &^ v). A borrow can also flag a byte above a flagged one, never below, so
// the lowest set bit always marks the first byte that needs attention.
func attention8(x uint64) uint64 {
	ctl := (x - lsb*0x20) &^ x
	quote := x ^ (lsb * '"')
	back := x ^ (lsb * '\\')
	return (ctl | (quote-lsb)&^quote | (back-lsb)&^back | x) & msb
}

// decodeRune decodes the rune of s at i like utf8.DecodeRune, for strings and byte slices alike.
func decodeRune[S ~string | ~[]byte](s S, i int) (rune, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	end := min(len(s), i+utf8.UTFMax)
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], s[i:end])
	return utf8.DecodeRune(buf[:n])
}
