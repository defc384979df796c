package soql

import (
	"errors"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// TestCursorTime: the source reads the time of its own cursors, per configured object, and
// refuses keys of objects it does not read.
func TestCursorTime(t *testing.T) {
	s := &Source{objects: []Object{{Name: "LoginHistory", TimestampField: "LoginTime"}}}
	want := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	raw := cursorLayout("LoginTime", keyset.ByID).Encode(keyset.State{Pos: keyset.Position{TS: want, Key: "0Ya000000000001AAA"}})
	got, err := s.CursorTime(Key("LoginHistory"), raw)
	if err != nil || !got.Equal(want) {
		t.Fatalf("CursorTime(%s) = %v, %v; want %v", raw, got, err, want)
	}
	if _, err := s.CursorTime(Key("SetupAuditTrail"), raw); !errors.Is(err, source.ErrNotMyKey) {
		t.Errorf("an object not configured: %v, want ErrNotMyKey", err)
	}
	other := cursorLayout("CreatedDate", keyset.ByID).Encode(keyset.State{Pos: keyset.Position{TS: want, Key: "0Ya000000000001AAA"}})
	if _, err := s.CursorTime(Key("LoginHistory"), other); !errors.Is(err, source.ErrCursor) {
		t.Errorf("a cursor on another field: %v, want ErrCursor", err)
	}
}
