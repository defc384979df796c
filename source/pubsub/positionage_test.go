package pubsub_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// TestPositionAgeMeasuresAStoredCursorAsARunDoes: the age doctor reports for a stored position
// is the one a run reports as replay_id_age_seconds (Open): a replay id's since it last
// advanced (unknown, -1, for a legacy value that records no advanced_at), a latest_at-only
// position's since that moment (not since advanced_at, which an empty run also moves), a
// position ahead of this host's clock 0 old. No value is no position; an undecodable one is
// the run's cursor error.
func TestPositionAgeMeasuresAStoredCursorAsARunDoes(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	legacy, _ := json.Marshal("AAAAAAAAAAE=") // the Python original's bare base64 string
	tests := []struct {
		name     string
		raw      json.RawMessage
		wantAge  time.Duration
		wantKind string
	}{
		{"replay id", pubsub.EncodeCursor(pubsub.Cursor{ReplayID: "AAAAAAAAAAE=", AdvancedAt: now.Add(-50 * time.Hour), LastEventAt: now.Add(-60 * time.Hour)}), 50 * time.Hour, "replay_id"},
		{"legacy replay id", legacy, -1, "replay_id"},
		{"replay id without advanced_at", pubsub.EncodeCursor(pubsub.Cursor{ReplayID: "AAAAAAAAAAE="}), -1, "replay_id"},
		{"latest_at", pubsub.EncodeCursor(pubsub.Cursor{LatestAt: now.Add(-80 * time.Hour), AdvancedAt: now.Add(-time.Hour)}), 80 * time.Hour, "latest_at"},
		{"latest_at ahead of this clock", pubsub.EncodeCursor(pubsub.Cursor{LatestAt: now.Add(time.Minute)}), 0, "latest_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			age, kind, ok, err := pubsub.PositionAge(tt.raw, now)
			if err != nil || !ok || age != tt.wantAge || kind != tt.wantKind {
				t.Errorf("PositionAge(%s) = %s, %q, %v, %v; want %s, %q, true, nil", tt.raw, age, kind, ok, err, tt.wantAge, tt.wantKind)
			}
		})
	}
	if _, _, ok, err := pubsub.PositionAge(nil, now); ok || err != nil {
		t.Errorf("PositionAge(no value) = ok %v, err %v; want no position and no error", ok, err)
	}
	if _, _, ok, err := pubsub.PositionAge(json.RawMessage(`{"v":1,"replay_id":"not base64!"}`), now); ok || !errors.Is(err, source.ErrCursor) {
		t.Errorf("PositionAge(bad replay_id) = ok %v, err %v; want source.ErrCursor", ok, err)
	}
}
