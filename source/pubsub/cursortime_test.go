package pubsub_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// TestCursorTime: the time of the last event shipped, else when the position advanced; for a
// cursor without a replay id, the moment of its LATEST subscription; other keys are refused.
func TestCursorTime(t *testing.T) {
	s := &pubsub.Source{}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	key := pubsub.Key("/event/LoginEventStream")
	for _, c := range []pubsub.Cursor{
		{ReplayID: "AAAAAAAAAAE=", LastEventAt: at, AdvancedAt: at.Add(time.Hour)},
		{ReplayID: "AAAAAAAAAAE=", AdvancedAt: at},
		{LatestAt: at, LastEventAt: at.Add(-time.Hour), AdvancedAt: at.Add(time.Second)},
	} {
		got, err := s.CursorTime(key, pubsub.EncodeCursor(c))
		if err != nil || !got.Equal(at) {
			t.Errorf("CursorTime(%+v) = %v, %v; want %v", c, got, err, at)
		}
	}
	if _, err := s.CursorTime("eventlogfile:Login", pubsub.EncodeCursor(pubsub.Cursor{ReplayID: "AA=="})); !errors.Is(err, source.ErrNotMyKey) {
		t.Errorf("another source's key: %v, want ErrNotMyKey", err)
	}
}
