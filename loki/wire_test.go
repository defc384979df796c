package loki

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestWireAppendsMatchProtowire: the encoder's own varint, tag, string and bytes appends write
// what protowire writes, at every varint length's edges and for random values.
func TestWireAppendsMatchProtowire(t *testing.T) {
	values := []uint64{0, 1, 0x7f, math.MaxUint64, math.MaxInt64}
	for shift := 7; shift < 64; shift += 7 {
		values = append(values, 1<<shift-1, 1<<shift, 1<<shift+1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		values = append(values, r.Uint64()>>r.IntN(64))
	}
	prefix := []byte("prefix")
	for _, v := range values {
		if got, want := appendVarint(bytes.Clone(prefix), v), protowire.AppendVarint(bytes.Clone(prefix), v); !bytes.Equal(got, want) {
			t.Fatalf("varint %d: % x, protowire % x", v, got, want)
		}
	}
	for _, num := range []protowire.Number{1, 2, 3, 15, 16, 2047, 2048, protowire.MaxValidNumber} {
		for _, typ := range []protowire.Type{protowire.VarintType, protowire.BytesType, protowire.Fixed64Type} {
			if got, want := appendTag(nil, num, typ), protowire.AppendTag(nil, num, typ); !bytes.Equal(got, want) {
				t.Fatalf("tag %d/%d: % x, protowire % x", num, typ, got, want)
			}
		}
	}
	for _, n := range []int{0, 1, 127, 128, 300, 16384, 70000} {
		s := string(bytes.Repeat([]byte{'x'}, n))
		if got, want := appendBytes(bytes.Clone(prefix), s), protowire.AppendString(bytes.Clone(prefix), s); !bytes.Equal(got, want) {
			t.Fatalf("string of %d bytes differs from protowire's", n)
		}
		if got, want := appendBytes(bytes.Clone(prefix), []byte(s)), protowire.AppendBytes(bytes.Clone(prefix), []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("bytes of %d differ from protowire's", n)
		}
	}
}
