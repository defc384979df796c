package jsonenc

// Classify marks, in the first min(64, len(b)) bytes of b, the quotes ('"') and the other bytes
// that need attention inside a JSON string ('\\', control characters and non-ASCII bytes, as
// Plain stops at): bit j of quote is set when b[j] is '"', bit j of other when b[j] is one of the
// others. It lets a scanner find a quoted value's end and learn whether the value is plain in one
// pass over a block, instead of a call per value. On amd64 the 64 bytes of a whole block are
// compared sixteen at a time (SSE2, which every amd64 processor has).
func Classify(b []byte) (quote, other uint64) {
	if len(b) >= 64 {
		return classify64(b[:64])
	}
	for j, c := range b {
		switch {
		case c == '"':
			quote |= 1 << j
		case !safe[c]:
			other |= 1 << j
		}
	}
	return quote, other
}

// classify64Generic is Classify of 64 bytes a word at a time: the portable version of the
// assembly, and what the tests hold the assembly to.
func classify64Generic(b []byte) (quote, other uint64) {
	_ = b[63]
	for j := 0; j < 64; j += 8 {
		x := load8(b, j)
		quote |= gather8(equal8(x, '"')) << j
		other |= gather8(equal8(x, '\\')|^printable8(x)&msb) << j
	}
	return quote, other
}

// equal8 sets the high bit of exactly those bytes of x that equal c (no borrow between bytes:
// the low seven bits are added first, then the high bit is folded in).
func equal8(x uint64, c byte) uint64 {
	v := x ^ lsb*uint64(c)
	t := (v&^msb + lsb*0x7f) | v
	return ^t & msb
}

// printable8 sets the high bit of exactly those bytes of x in 0x20-0x7f.
func printable8(x uint64) uint64 {
	return (x&^msb + lsb*0x60) &^ x & msb
}

// gather8 moves the high bit of byte j of m to bit j of the result (m has no other bits set).
func gather8(m uint64) uint64 {
	return (m >> 7) * 0x0102040810204080 >> 56
}
