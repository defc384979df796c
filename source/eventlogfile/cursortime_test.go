package eventlogfile

import (
	"errors"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source"
)

// TestCursorTime: the source reads the time of its own cursors (written by its own encoder,
// and as the Python sf2loki stored them), refuses keys that are not its own, and says so for
// a cursor it cannot use.
func TestCursorTime(t *testing.T) {
	s := &Source{opts: Options{EventTypes: []string{"Login", "API"}}}
	want := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, raw := range []string{
		string(appendCursor(nil, "2026-03-01T10:00:00.000Z", "0AT000000000001AAA", 3, false, false, nil)),
		`"{\"ids\": [[\"0AT000000000001AAA\", \"2026-03-01T10:00:00.000+0000\"]], \"last_created\": \"2026-03-01T10:00:00.000+0000\"}"`,
	} {
		got, err := s.CursorTime(Key("Login"), []byte(raw))
		if err != nil || !got.Equal(want) {
			t.Errorf("CursorTime(%s) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, key := range []string{"soql:LoginHistory", Key("Loign"), Key("Login_")} {
		if _, err := s.CursorTime(key, []byte(`{"v":1}`)); !errors.Is(err, source.ErrNotMyKey) {
			t.Errorf("%s: %v, want ErrNotMyKey", key, err)
		}
	}
	if _, err := (&Source{opts: Options{EventTypes: []string{"*"}}}).CursorTime(Key("Loign"), nil); err != nil {
		t.Errorf("any type is the source's when it discovers them: %v", err)
	}
	if _, err := s.CursorTime(Key("Login"), []byte(`{"v":1,"created":"yesterday"}`)); !errors.Is(err, source.ErrCursor) {
		t.Errorf("an unusable cursor: %v, want ErrCursor", err)
	}
	w := &Source{opts: Options{EventTypes: []string{"Login"}, Window: &Window{KeyPrefix: "backfill:x:"}}}
	if _, err := w.CursorTime(Key("Login"), nil); !errors.Is(err, source.ErrNotMyKey) {
		t.Errorf("a live key read by a window: %v, want ErrNotMyKey", err)
	}
	if _, err := w.CursorTime("backfill:x:"+Key("Login"), nil); err != nil {
		t.Errorf("the window's own key: %v", err)
	}
}
