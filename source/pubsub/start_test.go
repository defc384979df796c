package pubsub_test

import (
	"encoding/json"
	"testing"
	"time"

	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// TestStartAtSkipsOlderEventsOfAFreshTopicOnly: a topic without a stored replay id subscribes at
// earliest and skips (counted, cursor advanced) the events older than StartAt; once the topic has
// a cursor, StartAt no longer applies, even to a new event carrying an older time.
func TestStartAtSkipsOlderEventsOfAFreshTopicOnly(t *testing.T) {
	e := newEnv(t, simpubsub.Options{})
	e.publishLogins(t, 0, 3)
	e.clock.Advance(time.Hour)
	startAt := e.clock.Now()
	e.publishLogins(t, 3, 2)
	src := e.source(t, pubsub.Options{Topics: []string{loginTopic}, StartAt: startAt, Idle: 500 * time.Millisecond})

	p := pullAll(t, src, nil)
	key := pubsub.Key(loginTopic)
	recs := p.records[key]
	if len(recs) != 5 || p.errs[key] != nil {
		t.Fatalf("first run: %d records, err %v; want the 5 retained events", len(recs), p.errs[key])
	}
	for i, r := range recs {
		if before := i < 3; r.Skip != before || (before && r.SkipReason != pubsub.SkipBeforeStart) {
			t.Errorf("event %d: skip %v (%s), want skipped before_start: %v", i, r.Skip, r.SkipReason, before)
		}
	}
	if p.counts[pubsub.SkipBeforeStart] != 3 {
		t.Errorf("before_start counted %d, want 3", p.counts[pubsub.SkipBeforeStart])
	}

	// A new event with a time before StartAt, after the topic has a cursor: shipped.
	evs, err := e.ps.Publish(loginTopic, simpubsub.LoginEvent(5, startAt.Add(-30*time.Minute)))
	if err != nil || len(evs) != 1 {
		t.Fatal(err)
	}
	p = pullAll(t, e.source(t, pubsub.Options{Topics: []string{loginTopic}, StartAt: startAt, Idle: 500 * time.Millisecond}),
		map[string]json.RawMessage{key: p.lastCursor(key)})
	recs = p.records[key]
	if len(recs) != 1 || recs[0].Skip {
		t.Fatalf("second run: %+v; want the one new event shipped although its time is before StartAt", recs)
	}

	if _, err := pubsub.New(e.client, e.sf, pubsub.Options{Topics: []string{loginTopic}, Start: pubsub.StartLatest, StartAt: startAt}); err == nil {
		t.Error("StartAt with Start latest was accepted")
	}
}

// TestAStartOutlastsAPullCutWhileSkipping: a fresh topic with a start time whose first pull is
// cut by max_events while it still skips the retained events older than the start stores a
// replay id among them; the next run resumes there and must go on skipping them (before_start),
// shipping only the events from the start on. The start holds until an event is shipped.
func TestAStartOutlastsAPullCutWhileSkipping(t *testing.T) {
	e := newEnv(t, simpubsub.Options{})
	e.publishLogins(t, 0, 10)
	e.clock.Advance(time.Hour)
	startAt := e.clock.Now()
	e.publishLogins(t, 10, 3)
	opts := pubsub.Options{Topics: []string{loginTopic}, StartAt: startAt, Idle: 500 * time.Millisecond, MaxEvents: 5}
	key := pubsub.Key(loginTopic)

	p := pullAll(t, e.source(t, opts), nil)
	if recs := p.records[key]; len(recs) != 5 || p.counts[pubsub.SkipBeforeStart] != 5 {
		t.Fatalf("first run: %d records, %d before_start, err %v; want 5 skipped (max_events 5)", len(recs), p.counts[pubsub.SkipBeforeStart], p.errs[key])
	}
	var shipped int
	cursor := p.lastCursor(key)
	for range 3 { // max_events 5: the other 5 old events, then the 3 new ones
		p = pullAll(t, e.source(t, opts), map[string]json.RawMessage{key: cursor})
		for _, r := range p.records[key] {
			if !r.Skip {
				shipped++
			}
		}
		if c := p.lastCursor(key); c != nil {
			cursor = c
		}
	}
	if shipped != 3 {
		t.Fatalf("later runs shipped %d events; want only the 3 published from the start on", shipped)
	}
}
