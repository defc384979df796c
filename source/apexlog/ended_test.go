package apexlog

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/salesforce"
)

// TestEndedBelievesADayAtMost: the end of a log's transaction is its StartTime plus its
// DurationMilliseconds, but a duration past a day (a corrupt record; no Apex transaction runs
// that long), up to one that overflows a time.Duration, counts as a day, so a failing body holds
// its key for a bounded time; a missing, zero or negative duration counts as none.
func TestEndedBelievesADayAtMost(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		duration any
		want     time.Duration
	}{
		{nil, 0},
		{float64(0), 0},
		{float64(-5), 0},
		{float64(150 * 60 * 1000), 150 * time.Minute},
		{float64(30 * 24 * 3600 * 1000), maxTransaction},
		{float64(1e16), maxTransaction}, // past what a time.Duration holds in nanoseconds
	} {
		r := salesforce.Record{}
		if c.duration != nil {
			r["DurationMilliseconds"] = c.duration
		}
		if got := ended(r, start); !got.Equal(start.Add(c.want)) {
			t.Errorf("DurationMilliseconds %v: ended %s, want %s", c.duration, got, start.Add(c.want))
		}
	}
}
