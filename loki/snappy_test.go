package loki

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/golang/snappy"
)

// TestSnappyByPiecesIsOneBlock: a body compressed piece by piece is one snappy block that an
// independent decoder (golang/snappy, as Loki uses) reads back byte for byte, for bodies shorter
// than a piece, of exactly one, and of several with a short last one.
func TestSnappyByPiecesIsOneBlock(t *testing.T) {
	var src bytes.Buffer
	for i := 0; src.Len() < 3*snappyPiece+12345; i++ {
		fmt.Fprintf(&src, `{"EVENT_TYPE":"API","REQUEST_ID":"4exLFFQZ%08d","ROWS":%d}`, i, i*7%1000)
		if i%97 == 0 {
			src.Write(bytes.Repeat([]byte{byte(i)}, i%300)) // runs and odd bytes
		}
	}
	var piece []byte
	for _, n := range []int{0, 1, 100, snappyPiece, snappyPiece + 1, src.Len()} {
		raw := src.Bytes()[:n]
		enc := appendSnappy(nil, raw, &piece)
		dec, err := snappy.Decode(nil, enc)
		if err != nil || !bytes.Equal(dec, raw) {
			t.Fatalf("%d bytes: decoded %d bytes, err %v", n, len(dec), err)
		}
		if n > 2*snappyPiece && len(enc) > n/2 {
			t.Fatalf("%d bytes compressed to %d: pieces compress much worse than expected", n, len(enc))
		}
	}
	if cap(piece) > snappyPiece*2 {
		t.Fatalf("working memory %d bytes for pieces of %d", cap(piece), snappyPiece)
	}
}
