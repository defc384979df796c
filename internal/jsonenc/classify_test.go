package jsonenc

import (
	"math/rand/v2"
	"testing"
)

// classifyBytes is Classify byte by byte: the definition the fast versions are held to.
func classifyBytes(b []byte) (quote, other uint64) {
	for j, c := range b[:min(64, len(b))] {
		if c == '"' {
			quote |= 1 << j
		} else if Plain([]byte{c}) == 0 {
			other |= 1 << j
		}
	}
	return quote, other
}

func TestClassifyMarksEveryByteValueAtEveryPosition(t *testing.T) {
	for _, fill := range []byte{'a', '"', 0, 0xff} {
		for pos := range 64 {
			for c := range 256 {
				b := make([]byte, 64)
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				wantQ, wantO := classifyBytes(b)
				if q, o := Classify(b); q != wantQ || o != wantO {
					t.Fatalf("Classify, byte %#x at %d among %#x: quote %064b other %064b, want %064b %064b", c, pos, fill, q, o, wantQ, wantO)
				}
				if q, o := classify64Generic(b); q != wantQ || o != wantO {
					t.Fatalf("generic, byte %#x at %d among %#x: quote %064b other %064b, want %064b %064b", c, pos, fill, q, o, wantQ, wantO)
				}
			}
		}
	}
}

func TestClassifyRandomBlocksAndShortTails(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\"\\,\n\r\x00\x1f\x20\x7f\x80\xc3\xa9\xe2\x80\xa8aZ09#!")
	for range 200000 {
		n := rng.IntN(80)
		b := make([]byte, n)
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		wantQ, wantO := classifyBytes(b)
		if q, o := Classify(b); q != wantQ || o != wantO {
			t.Fatalf("Classify(%q): quote %064b other %064b, want %064b %064b", b, q, o, wantQ, wantO)
		}
		if n >= 64 {
			if q, o := classify64Generic(b); q != wantQ || o != wantO {
				t.Fatalf("generic(%q): quote %064b other %064b, want %064b %064b", b, q, o, wantQ, wantO)
			}
		}
	}
}

func TestClassifyReadsOnlyItsBlock(t *testing.T) {
	// A block's quotes and others past the 64th byte are not its own.
	b := make([]byte, 128)
	for i := range b {
		b[i] = '"'
	}
	for i := range 64 {
		b[i] = 'x'
	}
	if q, o := Classify(b); q != 0 || o != 0 {
		t.Fatalf("Classify of 64 plain bytes followed by quotes: quote %064b other %064b, want none", q, o)
	}
}

func BenchmarkClassify(b *testing.B) {
	buf := []byte(`"API","20261202000000.000","fkl2VMMNyUARqxULbsZfe7","00D00ZDGX3V`)
	b.SetBytes(64)
	for b.Loop() {
		Classify(buf)
	}
}

func BenchmarkClassifyGeneric(b *testing.B) {
	buf := []byte(`"API","20261202000000.000","fkl2VMMNyUARqxULbsZfe7","00D00ZDGX3V`)
	b.SetBytes(64)
	for b.Loop() {
		classify64Generic(buf)
	}
}
