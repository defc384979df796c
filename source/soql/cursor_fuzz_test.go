package soql

import (
	"errors"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/source"
)

// FuzzDecodeCursor feeds arbitrary stored values to the SOQL cursor decoder, for a standard
// object (keyed on Id) and a Big Object (keyed on EventIdentifier). It must never panic; a
// refused value wraps source.ErrCursor (the source then resets the key and counts it); an
// accepted one encodes to a value that decodes to the same state.
func FuzzDecodeCursor(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, tc := range []struct {
			field string
			kind  keyKind
		}{{"LoginTime", byID}, {"EventDate", byEventIdentifier}} {
			st, ok, err := decodeCursor(raw, tc.field, tc.kind)
			if err != nil {
				if !errors.Is(err, source.ErrCursor) {
					t.Fatalf("%s: decode %q: %v does not wrap source.ErrCursor", tc.field, raw, err)
				}
				continue
			}
			if !ok {
				continue
			}
			enc := encodeCursor(tc.field, tc.kind, st.pos, st.from, newWindow(st.seen), st.maxID)
			back, ok, err := decodeCursor(enc, tc.field, tc.kind)
			if err != nil || !ok {
				t.Fatalf("%s: %q decoded, but its encoding %s does not (%v)", tc.field, raw, enc, err)
			}
			if !back.pos.ts.Equal(st.pos.ts) || back.pos.key != st.pos.key || back.maxID != st.maxID ||
				(back.from == nil) != (st.from == nil) || (st.from != nil && (!back.from.ts.Equal(st.from.ts) || back.from.key != st.from.key)) {
				t.Fatalf("%s: %q decoded to %+v, its encoding %s to %+v", tc.field, raw, st, enc, back)
			}
			if want := dedup(st.seen); !slices.Equal(back.seen, want) {
				t.Fatalf("%s: seen %x came back as %x", tc.field, want, back.seen)
			}
		}
	})
}

// dedup keeps the first of repeated hashes, as the window does.
func dedup(hs []uint64) []uint64 {
	seen := map[uint64]bool{}
	var out []uint64
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
