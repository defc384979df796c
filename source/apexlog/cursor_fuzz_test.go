package apexlog

import (
	"errors"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/source"
)

// FuzzDecodeCursor feeds arbitrary stored values to the ApexLog cursor decoder. It must never
// panic; a refused value wraps source.ErrCursor (Open then starts from the lookback and counts
// a cursor_reset); an accepted one is a state Open can use and encodes to a cursor that decodes
// to the same state.
func FuzzDecodeCursor(f *testing.F) {
	f.Add([]byte(`{"v":1,"start_time":"2026-03-01T10:00:00.000+0000","last_id":"07L000000000001AAA"}`))
	f.Add([]byte(`{"v":1,"start_time":"2026-03-01T10:00:00.000Z","last_id":"07L000000000001AAA","from_ts":"2026-03-01T09:55:00.000Z","seen":"AAAAAAAB","max_id":"07L000000000009AAA"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		st, ok, err := decodeCursor(raw)
		if err != nil {
			if !errors.Is(err, source.ErrCursor) {
				t.Fatalf("decode %q: %v does not wrap source.ErrCursor", raw, err)
			}
			return
		}
		if !ok {
			return
		}
		enc := cursorLayout.Encode(st)
		back, ok, err := decodeCursor(enc)
		if err != nil || !ok {
			t.Fatalf("%q decoded, but its encoding %s does not (%v)", raw, enc, err)
		}
		if !back.Pos.TS.Equal(st.Pos.TS) || back.Pos.Key != st.Pos.Key || back.MaxID != st.MaxID ||
			(back.From == nil) != (st.From == nil) || (st.From != nil && (!back.From.TS.Equal(st.From.TS) || back.From.Key != st.From.Key)) {
			t.Fatalf("%q decoded to %+v, its encoding %s to %+v", raw, st, enc, back)
		}
		if want := dedup(st.Seen); !slices.Equal(back.Seen, want) {
			t.Fatalf("seen %x came back as %x", want, back.Seen)
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
