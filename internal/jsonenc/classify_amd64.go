//go:build !purego

package jsonenc

// classify64 is Classify of the 64 bytes at b (len(b) >= 64), in assembly.
func classify64(b []byte) (quote, other uint64) {
	_ = b[63]
	return classify64SSE2(&b[0])
}

//go:noescape
func classify64SSE2(p *byte) (quote, other uint64)
