package jsonenc

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// pieces are the inputs that need attention, mixed into the random strings.
var pieces = []string{"a", "é", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f",
	"\u2028", "\u2029", "\xff", "\xc3", "\xed\xa0\x80", "\xef\xbf\xbd", "日本", "<", ">", "&", " ",
	"abcdefghij", "\U0001F600", "\xf0\x9f\x98"}

// randomStrings returns n strings: a third random bytes, the rest random runs of pieces.
func randomStrings(n int) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]string, n)
	for i := range out {
		var b []byte
		if i%3 == 0 {
			b = make([]byte, rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
		} else {
			for j := rng.IntN(30); j > 0; j-- {
				b = append(b, pieces[rng.IntN(len(pieces))]...)
			}
		}
		out[i] = string(b)
	}
	return out
}

// reference is the documented escaping built from encoding/json one rune (or invalid byte) at a
// time, so that its \b and \f can be told apart from an escaped backslash followed by b or f.
func reference(s string, r Replacement) string {
	var out strings.Builder
	out.WriteByte('"')
	for i := 0; i < len(s); {
		ru, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case ru == utf8.RuneError && n == 1 && r == LiteralFFFD:
			out.WriteString("\ufffd")
		case ru == '\b':
			out.WriteString(`\u0008`)
		case ru == '\f':
			out.WriteString(`\u000c`)
		default:
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s[i : i+n]); err != nil {
				panic(err)
			}
			out.Write(bytes.TrimSuffix(bytes.TrimSuffix(bytes.TrimPrefix(b.Bytes(), []byte{'"'}), []byte{'\n'}), []byte{'"'}))
		}
		i += n
	}
	out.WriteByte('"')
	return out.String()
}

func TestAppendStringIsEncodingJSONWithoutHTMLEscaping(t *testing.T) {
	for _, r := range []Replacement{EscapedFFFD, LiteralFFFD} {
		for _, s := range randomStrings(20000) {
			want := reference(s, r)
			if got := AppendString(nil, s, r); string(got) != want {
				t.Fatalf("replacement %d, %q: got %s, want %s", r, s, got, want)
			}
			if got := AppendString(nil, []byte(s), r); string(got) != want {
				t.Fatalf("replacement %d, []byte %q: got %s, want %s", r, s, got, want)
			}
		}
	}
}

func TestAppendStringAppends(t *testing.T) {
	if got := AppendString([]byte("x:"), "a\"b", EscapedFFFD); string(got) != `x:"a\"b"` {
		t.Fatalf("got %s", got)
	}
}

func TestStringLenIsTheAppendedLength(t *testing.T) {
	for _, r := range []Replacement{EscapedFFFD, LiteralFFFD} {
		for _, s := range randomStrings(20000) {
			if got, want := StringLen(s, r), len(AppendString(nil, s, r)); got != want {
				t.Fatalf("replacement %d, %q: StringLen %d, appended %d", r, s, got, want)
			}
		}
	}
}

func TestJSONStringRoundTrips(t *testing.T) {
	for _, r := range []Replacement{EscapedFFFD, LiteralFFFD} {
		for _, s := range randomStrings(5000) {
			out := AppendString(nil, s, r)
			var back string
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("invalid JSON for %q: %s (%v)", s, out, err)
			}
			if want := strings.ToValidUTF8(s, "\ufffd"); back != want && strings.ReplaceAll(back, "\ufffd", "") != strings.ReplaceAll(want, "\ufffd", "") {
				t.Fatalf("round trip of %q gave %q", s, back)
			}
		}
	}
}

func TestAppendStringDoesNotAllocate(t *testing.T) {
	s := strings.Repeat(`{"a":"b\n<é>","c":"\xff\u2028"}`, 20)
	bs := []byte(s)
	dst := make([]byte, 0, 4*len(s))
	for _, r := range []Replacement{EscapedFFFD, LiteralFFFD} {
		if n := testing.AllocsPerRun(100, func() { dst = AppendString(dst[:0], s, r) }); n != 0 {
			t.Errorf("AppendString(string) allocates %v times", n)
		}
		if n := testing.AllocsPerRun(100, func() { dst = AppendString(dst[:0], bs, r) }); n != 0 {
			t.Errorf("AppendString([]byte) allocates %v times", n)
		}
		if n := testing.AllocsPerRun(100, func() { _ = StringLen(s, r) }); n != 0 {
			t.Errorf("StringLen allocates %v times", n)
		}
	}
}

func TestAttention8(t *testing.T) {
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 8; pos++ {
			var x uint64
			for i := 0; i < 8; i++ {
				c := uint64('a')
				if i == pos {
					c = uint64(b)
				}
				x |= c << (8 * i)
			}
			want := b < 0x80 && safe[b]
			if got := attention8(x) == 0; got != want {
				t.Fatalf("attention8 with byte %#x at %d: safe = %v, want %v", b, pos, got, want)
			}
		}
	}
	// The lowest flagged byte is the first that needs attention, whatever follows it.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var w [8]byte
		for i := range w {
			w[i] = " a\"\\\x00\x1f\x7f\x80\xff~"[rng.IntN(10)]
		}
		first := 8
		for i, c := range w {
			if c >= 0x80 || !safe[c] {
				first = i
				break
			}
		}
		x := load8(w[:], 0)
		if got := bits.TrailingZeros64(attention8(x)) >> 3; got != first {
			t.Fatalf("attention8(%q) flags byte %d first, want %d", w, got, first)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, p := range pieces {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range []Replacement{EscapedFFFD, LiteralFFFD} {
			got := AppendString(nil, s, r)
			if want := reference(s, r); string(got) != want {
				t.Fatalf("replacement %d, %q: got %s, want %s", r, s, got, want)
			}
			if n := StringLen(s, r); n != len(got) {
				t.Fatalf("replacement %d, %q: StringLen %d, appended %d", r, s, n, len(got))
			}
		}
	})
}

// benchInputs are what the callers escape: a shaped EventLogFile line (the Loki encoder's input,
// a quote every few bytes) and a field value (the shaper's input, mostly nothing to escape).
var benchInputs = []struct{ name, s string }{
	{"line", `{"EVENT_TYPE":"API","TIMESTAMP":"20260630010000.000","REQUEST_ID":"4exLFFQZ1234567890","ORGANIZATION_ID":"00Dxx0000001gEH",` +
		`"USER_ID":"005xx000001Sv6R","RUN_TIME":123,"CPU_TIME":45,"URI":"/services/data/v62.0/query","SESSION_KEY":"abcdefghijklmnop",` +
		`"QUERY":"SELECT Id, Name FROM Account WHERE CreatedDate > 2026-01-01T00:00:00Z","CLIENT_NAME":"DataLoader, v62",` +
		`"USER_AGENT":"Mozilla/5.0 (X11; Linux x86_64) \"été\"","CLIENT_IP":"10.1.2.3"}`},
	{"value", "SELECT Id, Name FROM Account WHERE CreatedDate > 2026-01-01T00:00:00Z"},
}

func BenchmarkAppendString(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			v := []byte(in.s)
			dst := make([]byte, 0, 2*len(v))
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for b.Loop() {
				dst = AppendString(dst[:0], v, LiteralFFFD)
			}
		})
	}
}

func BenchmarkAppendStringString(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(in.s))
			b.SetBytes(int64(len(in.s)))
			b.ReportAllocs()
			for b.Loop() {
				dst = AppendString(dst[:0], in.s, EscapedFFFD)
			}
		})
	}
}

func BenchmarkStringLen(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.s)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n += StringLen(in.s, EscapedFFFD)
			}
			if n == 0 {
				b.Fatal("no length")
			}
		})
	}
}
