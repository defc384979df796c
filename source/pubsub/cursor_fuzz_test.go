package pubsub_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// FuzzDecodeCursor feeds arbitrary stored values (the versioned object and the Python bare
// string) to the Pub/Sub cursor decoder. It must never panic; a refused value wraps
// source.ErrCursor; an accepted one has a replay id or a LatestAt, and encodes to a value that
// decodes to the same replay id and times.
func FuzzDecodeCursor(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, id, ok, err := pubsub.DecodeCursor(raw)
		if err != nil {
			if !errors.Is(err, source.ErrCursor) {
				t.Fatalf("decode %q: %v does not wrap source.ErrCursor", raw, err)
			}
			return
		}
		if !ok {
			return
		}
		if len(id) == 0 && c.LatestAt.IsZero() {
			t.Fatalf("%q decoded to an empty replay id without a LatestAt", raw)
		}
		enc := pubsub.EncodeCursor(c)
		back, backID, ok, err := pubsub.DecodeCursor(enc)
		if err != nil || !ok {
			t.Fatalf("%q decoded, but its encoding %s does not (%v)", raw, enc, err)
		}
		if !bytes.Equal(backID, id) || !back.AdvancedAt.Equal(c.AdvancedAt) || !back.LastEventAt.Equal(c.LastEventAt) ||
			!back.LatestAt.Equal(c.LatestAt) {
			t.Fatalf("%q decoded to %+v, its encoding %s to %+v", raw, c, enc, back)
		}
	})
}
