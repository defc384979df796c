package apexlog

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// FuzzDecodeCursor feeds arbitrary stored values to the ApexLog cursor decoding Open does
// (source.DecodeCursor, then check). It must never panic; a refused value wraps
// source.ErrCursor (Open then starts from the lookback and counts a cursor_reset); an accepted
// one is a position Open can use and encodes to the same cursor.
func FuzzDecodeCursor(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		var c cursor
		ok, err := source.DecodeCursor(raw, 1, &c)
		if err == nil && ok {
			err = c.check()
		}
		if err != nil {
			if !errors.Is(err, source.ErrCursor) {
				t.Fatalf("decode %q: %v does not wrap source.ErrCursor", raw, err)
			}
			return
		}
		if !ok {
			return
		}
		ts, err := salesforce.ParseDateTime(c.StartTime)
		if err != nil {
			t.Fatalf("%q passed check with start_time %q: %v", raw, c.StartTime, err)
		}
		enc, err := json.Marshal(cursor{V: 1, StartTime: salesforce.FormatDateTime(ts), LastID: c.LastID})
		if err != nil {
			t.Fatal(err)
		}
		var back cursor
		if ok, err := source.DecodeCursor(enc, 1, &back); err != nil || !ok || back.check() != nil || back.LastID != c.LastID {
			t.Fatalf("%q decoded to %+v, its encoding %s does not decode alike (%v)", raw, c, enc, err)
		}
	})
}
