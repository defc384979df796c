package apexlog_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/apexlog"
)

// TestCursorTime: the source reads the StartTime its cursors hold and refuses other keys.
func TestCursorTime(t *testing.T) {
	s := &apexlog.Source{}
	raw := json.RawMessage(`{"v":1,"start_time":"2026-03-01T10:00:00.000+0000","last_id":"07L000000000001AAA"}`)
	got, err := s.CursorTime(apexlog.Key, raw)
	if want := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC); err != nil || !got.Equal(want) {
		t.Fatalf("CursorTime = %v, %v; want %v", got, err, want)
	}
	if _, err := s.CursorTime("apexlogs", raw); !errors.Is(err, source.ErrNotMyKey) {
		t.Errorf("another key: %v, want ErrNotMyKey", err)
	}
	if _, err := s.CursorTime(apexlog.Key, json.RawMessage(`{"v":1,"start_time":"x","last_id":"07L"}`)); !errors.Is(err, source.ErrCursor) {
		t.Errorf("an unusable cursor: %v, want ErrCursor", err)
	}
}
