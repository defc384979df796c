package shape

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/netip"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// fieldOp is one value transform resolved for one field.
type fieldOp struct {
	op   Op
	mode MaskMode
	re   *regexp.Regexp
	repl []byte
}

// dropRule is a drop_row transform resolved for one type.
type dropRule struct {
	reason string // "drop_row:<name>"
	conds  []cond
}

// cond is one drop_row condition: the value of field name matches glob.
type cond struct {
	name string
	glob string
}

// hasher computes salted hashes without allocating per value.
type hasher struct {
	mac hash.Hash
	sum []byte
	hex []byte
}

func newHasher(salt []byte) *hasher {
	return &hasher{mac: hmac.New(sha256.New, salt), sum: make([]byte, 0, sha256.Size), hex: make([]byte, sha256.Size*2)}
}

// hash returns the hex HMAC-SHA256 of v (valid until the next call).
func (h *hasher) hash(v []byte) []byte {
	h.mac.Reset()
	h.mac.Write(v)
	h.sum = h.mac.Sum(h.sum[:0])
	hex.Encode(h.hex, h.sum)
	return h.hex
}

// apply runs one op on a value and returns the new value and kind. The result is valid until the
// next call: it may be v itself, the hasher's buffer or *scratch.
//
// A mask writes into *scratch and keeps there the buffer it wrote, grown as it needed: scratch
// only ever holds memory a mask appended to, never a value the op returned unchanged, which is
// the record's own bytes or the source's buffer (Record.Use) and must not be written by the next
// mask.
func (o *fieldOp) apply(h *hasher, v []byte, kind Kind, scratch *[]byte) ([]byte, Kind) {
	switch o.op {
	case OpHash:
		if len(v) == 0 || kind == Null {
			return v, kind
		}
		return h.hash(v), String
	case OpMask:
		if len(v) == 0 || kind == Null {
			return v, kind
		}
		if o.mode == MaskIP {
			out, changed := maskIPs((*scratch)[:0], v)
			*scratch = out[:0]
			if changed {
				return out, String
			}
			return v, kind
		}
		out := mask((*scratch)[:0], v, o.mode)
		*scratch = out[:0]
		return out, String
	case OpRegexReplace:
		if kind == Null {
			return v, kind
		}
		return o.re.ReplaceAll(v, o.repl), String
	}
	return v, kind
}

// mask appends the masked form of v to dst.
func mask(dst, v []byte, mode MaskMode) []byte {
	switch mode {
	case MaskEmail:
		if out, ok := maskEmail(dst, v); ok {
			return out
		}
	case MaskFull:
	default: // auto
		if out, ok := maskEmail(dst, v); ok {
			return out
		}
		if out, ok := maskIP(dst, v); ok {
			return out
		}
	}
	return maskFull(dst, v)
}

func maskFull(dst, v []byte) []byte {
	for n := utf8.RuneCount(v); n > 0; n-- {
		dst = append(dst, '*')
	}
	return dst
}

// maskEmail masks local@domain as l***@domain.
func maskEmail(dst, v []byte) ([]byte, bool) {
	at := bytes.LastIndexByte(v, '@')
	if at <= 0 || at == len(v)-1 || bytes.IndexByte(v[at+1:], '.') < 0 || bytes.ContainsAny(v, " \t\r\n<>,;") {
		return dst, false
	}
	_, n := utf8.DecodeRune(v)
	dst = append(dst, v[:n]...)
	dst = append(dst, "***"...)
	return append(dst, v[at:]...), true
}

// maskIPs is MaskIP: an address is masked (maskIP), and so is each address of a list of them
// separated by commas and spaces (an X-Forwarded-For chain); a value holding no address at all
// ("Salesforce.com IP", "unknown") is not an address to hide and is left alone (changed false);
// any other value with an address inside is masked in full, so no address leaks from text the
// mode does not understand.
func maskIPs(dst, v []byte) (out []byte, changed bool) {
	if out, ok := maskIP(dst, v); ok {
		return out, true
	}
	start, list := len(dst), true
	for rest := v; len(rest) > 0 && list; {
		sep := bytes.IndexAny(rest, ", ")
		item := rest
		if sep >= 0 {
			item = rest[:sep]
		}
		if len(item) > 0 {
			if dst, list = maskIP(dst, item); !list {
				break
			}
		} else if sep < 0 {
			break
		}
		if sep < 0 {
			rest = nil
			continue
		}
		dst = append(dst, rest[sep])
		rest = rest[sep+1:]
	}
	if list && len(dst) > start {
		return dst, true
	}
	dst = dst[:start]
	if !containsIP(v) {
		return dst, false
	}
	return maskFull(dst, v), true
}

// containsIP reports whether v holds an IP address: a run of digits and dots that is an IPv4
// address, or a run of hex digits, dots and colons that is an address.
func containsIP(v []byte) bool {
	v4 := func(c byte) bool { return c >= '0' && c <= '9' || c == '.' }
	any := func(c byte) bool { return v4(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == ':' }
	for _, in := range []func(byte) bool{v4, any} {
		for i := 0; i < len(v); {
			if !in(v[i]) {
				i++
				continue
			}
			j := i
			for j < len(v) && in(v[j]) {
				j++
			}
			if tok := bytes.Trim(v[i:j], ".:"); len(tok) >= 2 {
				if _, ok := maskIP(nil, tok); ok {
					return true
				}
			}
			i = j
		}
	}
	return false
}

// maskIP zeroes the host part of an IPv4 (last octet) or IPv6 (all but /48) address.
func maskIP(dst, v []byte) ([]byte, bool) {
	if a, ok := parseIPv4(v); ok {
		for i := 0; i < 3; i++ {
			dst = strconv.AppendUint(dst, uint64(a[i]), 10)
			dst = append(dst, '.')
		}
		return append(dst, '0'), true
	}
	if len(v) > 64 {
		return dst, false
	}
	addr, err := netip.ParseAddr(string(v))
	if err != nil {
		return dst, false
	}
	bits := 48
	if addr.Is4() || addr.Is4In6() {
		bits = 24
		addr = addr.Unmap()
	}
	p, err := addr.WithZone("").Prefix(bits)
	if err != nil {
		return dst, false
	}
	return p.Addr().AppendTo(dst), true
}

// parseIPv4 parses dotted-quad IPv4 without allocating (netip.ParseAddr needs a string).
func parseIPv4(v []byte) ([4]byte, bool) {
	var a [4]byte
	part, n, digits := 0, 0, 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == '.' {
			if digits == 0 || part > 3 || (digits > 1 && v[i-digits] == '0') {
				return a, false
			}
			a[part] = byte(n)
			part, n, digits = part+1, 0, 0
			continue
		}
		c := v[i]
		if c < '0' || c > '9' || digits == 3 {
			return a, false
		}
		n = n*10 + int(c-'0')
		digits++
		if n > 255 {
			return a, false
		}
	}
	return a, part == 4
}
