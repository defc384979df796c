package soql

import (
	"errors"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// FuzzDecodeCursor feeds arbitrary stored values to the SOQL cursor decoder, for a standard
// object (keyed on Id) and a Big Object (keyed on EventIdentifier). It must never panic; a
// refused value wraps source.ErrCursor (the source then resets the key and counts it); an
// accepted one encodes to a value that decodes to the same state.
func FuzzDecodeCursor(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, tc := range []struct {
			field string
			kind  keyset.Kind
		}{{"LoginTime", keyset.ByID}, {"EventDate", keyset.ByEventIdentifier}} {
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
			enc := cursorLayout(tc.field, tc.kind).Encode(st)
			back, ok, err := decodeCursor(enc, tc.field, tc.kind)
			if err != nil || !ok {
				t.Fatalf("%s: %q decoded, but its encoding %s does not (%v)", tc.field, raw, enc, err)
			}
			if !back.Pos.TS.Equal(st.Pos.TS) || back.Pos.Key != st.Pos.Key || back.MaxID != st.MaxID ||
				(back.From == nil) != (st.From == nil) || (st.From != nil && (!back.From.TS.Equal(st.From.TS) || back.From.Key != st.From.Key)) {
				t.Fatalf("%s: %q decoded to %+v, its encoding %s to %+v", tc.field, raw, st, enc, back)
			}
			if want := dedup(st.Seen); !slices.Equal(back.Seen, want) {
				t.Fatalf("%s: seen %x came back as %x", tc.field, want, back.Seen)
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
