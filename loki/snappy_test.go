package loki

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

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

// appendSnappy appends the snappy block of src to dst, compressing snappyPiece bytes at a time
// in *piece: the whole-body form of what a push's encode produces piece by piece.
func appendSnappy(dst, src []byte, piece *[]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(src)))
	for len(src) > 0 {
		n := min(len(src), snappyPiece)
		dst = appendSnappyPiece(dst, src[:n], piece)
		src = src[n:]
	}
	return dst
}

// TestEncodeByPiecesIsTheWholeBody: a push's body, encoded and compressed a piece at a time,
// is byte for byte the compression of the whole encoding (protobuf: the snappy block of the
// whole, which golang/snappy decodes back; JSON with gzip: a gzip stream of the whole; plain
// JSON: the whole), for bodies of less than a piece, about one, and several.
func TestEncodeByPiecesIsTheWholeBody(t *testing.T) {
	for _, n := range []int{1, 40, 2600, 12000} { // entries of ~400 bytes: up to ~4.6 MiB
		es := randomEntries(newRand(uint64(n)), time.Now(), n)
		es[n/2].Line = strings.Repeat("é", DefaultMaxLineBytes) // a truncated line, a large entry
		for _, enc := range []struct {
			name string
			mod  func(*Options)
		}{
			{"protobuf", nil},
			{"json+gzip", func(o *Options) { o.Encoding = EncodingJSON; o.Gzip = true }},
			{"json", func(o *Options) { o.Encoding = EncodingJSON }},
		} {
			c := newClient(t, nil, enc.mod)
			p := &push{c: c, entries: es, res: &Result{Outcomes: make([]Outcome, len(es))}, s: c.getScratch()}
			p.prepare()
			items := p.s.items
			var whole []byte
			if c.opts.Encoding == EncodingJSON {
				whole = p.appendJSON(nil, items)
			} else {
				whole = p.appendProto(nil, items)
			}
			w := p.encode(0, len(items))
			var got []byte
			switch enc.name {
			case "protobuf":
				var piece []byte
				if want := appendSnappy(nil, whole, &piece); !bytes.Equal(w.b, want) {
					t.Errorf("%d entries, %s: body of %d bytes differs from the whole's snappy block of %d", n, enc.name, len(w.b), len(want))
				}
				var err error
				if got, err = snappy.Decode(nil, w.b); err != nil {
					t.Fatalf("%d entries, %s: %v", n, enc.name, err)
				}
				if l, _ := binary.Uvarint(w.b); int(l) != len(whole) {
					t.Errorf("%d entries: block length %d, encoding %d", n, l, len(whole))
				}
			case "json+gzip":
				zr, err := gzip.NewReader(bytes.NewReader(w.b))
				if err != nil {
					t.Fatal(err)
				}
				if got, err = io.ReadAll(zr); err != nil {
					t.Fatalf("%d entries, %s: %v", n, enc.name, err)
				}
			default:
				got = w.b
			}
			if !bytes.Equal(got, whole) {
				t.Errorf("%d entries, %s: decoded %d bytes, the whole encoding is %d", n, enc.name, len(got), len(whole))
			}
			if p.res.EncodedBytes != int64(len(whole)) {
				t.Errorf("%d entries, %s: EncodedBytes %d, want %d", n, enc.name, p.res.EncodedBytes, len(whole))
			}
			if cap(p.s.raw) > 2*snappyPiece {
				t.Errorf("%d entries, %s: %d bytes of encoding held for pieces of %d", n, enc.name, cap(p.s.raw), snappyPiece)
			}
			w.release()
			c.putScratch(p.s)
		}
	}
}
