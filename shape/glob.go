package shape

import (
	"errors"
	"unicode/utf8"
)

// Globs: '*' matches any run of characters (including none), '?' one character, '[abc]',
// '[a-z]' and '[^a-z]' (or '[!a-z]') one character of (or not of) a class, '\x' the character x.
// Unlike path.Match, '/' is an ordinary character. Matching works on bytes with '?' and classes
// consuming whole UTF-8 characters.

var errBadGlob = errors.New("malformed glob pattern (unclosed [ or trailing \\)")

// checkGlob returns an error for a malformed pattern.
func checkGlob(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 >= len(p) {
				return errBadGlob
			}
			i++
		case '[':
			end, ok := classEnd(p, i)
			if !ok {
				return errBadGlob
			}
			i = end
		}
	}
	return nil
}

// classEnd returns the index of the ']' closing the class opened at p[i].
func classEnd(p string, i int) (int, bool) {
	j := i + 1
	if j < len(p) && (p[j] == '^' || p[j] == '!') {
		j++
	}
	if j < len(p) && p[j] == ']' { // a leading ] is literal
		j++
	}
	for ; j < len(p); j++ {
		switch p[j] {
		case '\\':
			j++
		case ']':
			return j, true
		}
	}
	return 0, false
}

// globMatch reports whether s matches the whole pattern p. A malformed pattern matches nothing
// (patterns are checked at configuration time).
func globMatch[S ~string | ~[]byte](p string, s S) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				_, n := decodeRune(s, si)
				pi++
				si += n
				continue
			case '[':
				end, ok := classEnd(p, pi)
				if !ok {
					return false
				}
				r, n := decodeRune(s, si)
				if classMatch(p[pi+1:end], r) {
					pi = end + 1
					si += n
					continue
				}
			case '\\':
				if pi+1 < len(p) && p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			default:
				if c == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Backtrack: let the last '*' swallow one more byte.
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

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

// classMatch reports whether r is in the class body (between [ and ]).
func classMatch(body string, r rune) bool {
	neg := false
	if len(body) > 0 && (body[0] == '^' || body[0] == '!') {
		neg, body = true, body[1:]
	}
	in := false
	for i := 0; i < len(body); {
		lo, n := classChar(body, i)
		i += n
		hi := lo
		if i+1 < len(body) && body[i] == '-' {
			hi, n = classChar(body, i+1)
			i += 1 + n
		}
		if lo <= r && r <= hi {
			in = true
		}
	}
	return in != neg
}

func classChar(body string, i int) (rune, int) {
	if body[i] == '\\' && i+1 < len(body) {
		r, n := utf8.DecodeRuneInString(body[i+1:])
		return r, n + 1
	}
	return utf8.DecodeRuneInString(body[i:])
}
