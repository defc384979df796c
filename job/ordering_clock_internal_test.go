package job

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// TestAgeTargetStaysOnTheHourWithAClockOffset: an entry too old for the receiver (Loki's default
// 7-day maximum age) is moved to a target that does not depend on the minute the decision is
// made, so a push replayed later in the hour is re-stamped alike. With the receiver's clock
// known to be off by less than half an hour, the target is exactly the one on this host's clock
// (a replay's first push, which does not know the offset yet, stamps alike); with any offset it
// stays between 30 minutes and 2 h 30 min inside the receiver's maximum age.
func TestAgeTargetStaysOnTheHourWithAClockOffset(t *testing.T) {
	host := time.Date(2026, 6, 30, 14, 37, 0, 0, time.UTC)
	l := loki.NewLabels(loki.Label{Name: "event_type", Value: "Login"})
	stamp := func(offset time.Duration, at time.Time) time.Time {
		d := newOrderer(OrderingOptions{}, nil, nil)
		d.clocks[0] = offset
		items := []item{{ks: &keyState{}, rec: source.Record{Entry: loki.Entry{Labels: l, Timestamp: at.Add(-8 * 24 * time.Hour)}}}}
		if plan := d.plan(at, items); plan == nil || plan[0].moved != restampOld {
			t.Fatalf("offset %s: an entry 8 days old not moved as too old: %+v", offset, plan)
		}
		return items[0].rec.Entry.Timestamp
	}
	onHost := stamp(0, host)
	if want := time.Date(2026, 6, 23, 16, 0, 0, 0, time.UTC); !onHost.Equal(want) {
		t.Fatalf("target on this host's clock %s, want %s", onHost, want)
	}
	for offset := -3 * time.Hour; offset <= 3*time.Hour; offset += 5 * time.Minute {
		for _, at := range []time.Time{host, host.Truncate(time.Hour), host.Truncate(time.Hour).Add(time.Hour - time.Nanosecond)} {
			got := stamp(offset, at)
			inside := got.Sub(at.Add(offset).Add(-loki.DefaultMaxAge))
			if inside <= 30*time.Minute || inside > 150*time.Minute {
				t.Errorf("offset %s at %s: target %s is %s inside the receiver's maximum age, want 30m to 2h30m", offset, at, got, inside)
			}
			if offset.Abs() < 30*time.Minute && !got.Equal(stamp(0, at)) {
				t.Errorf("offset %s at %s: target %s, on this host's clock %s", offset, at, got, stamp(0, at))
			}
		}
	}
}

// TestPlanUsesEachDestinationsClock: the plan judges each entry on its own destination's
// clock. An entry 8 minutes in this host's future is kept for a receiver in step, and moved to
// the receiver's now for one whose clock is 15 minutes behind (past its 10-minute grace period).
func TestPlanUsesEachDestinationsClock(t *testing.T) {
	host := time.Date(2026, 6, 30, 14, 37, 0, 0, time.UTC)
	d := newOrderer(OrderingOptions{}, nil, []string{"", "eu"})
	d.clocks[1] = -15 * time.Minute
	l := loki.NewLabels(loki.Label{Name: "event_type", Value: "Login"})
	ts := host.Add(8 * time.Minute)
	items := []item{
		{ks: &keyState{dest: 0}, rec: source.Record{Entry: loki.Entry{Labels: l, Timestamp: ts}}},
		{ks: &keyState{dest: 1}, rec: source.Record{Entry: loki.Entry{Labels: l, Timestamp: ts}}},
	}
	plan := d.plan(host, items)
	if plan == nil || plan[0].moved != "" || !items[0].rec.Entry.Timestamp.Equal(ts) {
		t.Fatalf("in step: moved %+v to %s, want kept at %s", plan, items[0].rec.Entry.Timestamp, ts)
	}
	if want := host.Add(-15 * time.Minute); plan[1].moved != restampNew || !items[1].rec.Entry.Timestamp.Equal(want) {
		t.Fatalf("15 minutes behind: moved %q to %s, want %q to %s", plan[1].moved, items[1].rec.Entry.Timestamp, restampNew, want)
	}
}
