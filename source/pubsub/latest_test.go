package pubsub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// TestStartLatestShipsWhatIsPublishedAfterTheFirstSubscription: start: latest on a quiet new
// topic. The first run meets no event and no keepalive, so it stores when its LATEST
// subscription opened; the second run ships every event published since then (and the ones
// within LatestMargin before it), skipping the older ones as before_start, instead of
// subscribing at LATEST again and losing what was published between the runs.
func TestStartLatestShipsWhatIsPublishedAfterTheFirstSubscription(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	e.publishLogins(t, 0, 2) // long before the first run: not wanted with start: latest
	e.clock.Advance(time.Hour)
	e.publishLogins(t, 2, 1) // just before the first run: inside the margin, shipped
	e.clock.Advance(time.Second)
	subscribed := e.clock.Now()
	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, Start: pubsub.StartLatest, RefreshAfter: -1}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || rep.Records != 0 {
		t.Fatalf("first run: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
	}
	c, ok := storedCursor(t, coord, loginKey)
	if !ok || c.ReplayID != "" || !c.LatestAt.Equal(subscribed) {
		t.Fatalf("after the first run the cursor is %+v (stored %v); want only the moment of the LATEST subscription, %s", c, ok, subscribed)
	}

	e.clock.Advance(time.Minute)
	e.publishLogins(t, 3, 3) // after the first run subscribed
	rep := runJob(t, coord, sink, e.source(t, opts))
	if rep.Outcome != job.OutcomeOK || rep.Records != 4 || lk.Count() != 4 {
		t.Fatalf("second run: outcome %s, %d records, receiver holds %d; want the 3 events published after the first run subscribed and the 1 just before it",
			rep.Outcome, rep.Records, lk.Count())
	}
	if n := rep.Events["pubsub."+pubsub.SkipBeforeStart]; n != 2 {
		t.Fatalf("before_start counted %d, want the 2 events older than the first subscription", n)
	}
	if c, _ := storedCursor(t, coord, loginKey); c.ReplayID == "" || !c.LatestAt.IsZero() {
		t.Fatalf("after the second run the cursor is %+v; want the last event's replay id", c)
	}

	// From then on the topic resumes from its replay id.
	e.publishLogins(t, 6, 1)
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Records != 1 || lk.Count() != 5 {
		t.Fatalf("third run: %d records, receiver holds %d; want the 1 new event", rep.Records, lk.Count())
	}
}

// TestReplayLostLatestResumesFromTheFallback: replay_lost: latest loses the events between the
// refused id and the fallback, but only those. On a quiet topic the fallback meets no event, so
// it replaces the refused id with the moment of its LATEST subscription: the next run is not
// refused again and ships what was published after the fallback.
func TestReplayLostLatestResumesFromTheFallback(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	e.publishLogins(t, 0, 5)
	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, ReplayLost: pubsub.ReplayLostLatest, RefreshAfter: -1}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Records != 5 {
		t.Fatalf("first run shipped %d", rep.Records)
	}
	e.clock.Advance(73 * time.Hour) // the stored position ages out
	rep := runJob(t, coord, sink, e.source(t, opts))
	if rep.Outcome != job.OutcomeOK || rep.Events["pubsub.replay_fallback"] != 1 {
		t.Fatalf("fallback run: %s %s, events %v", rep.Outcome, rep.Error, rep.Events)
	}
	if c, _ := storedCursor(t, coord, loginKey); c.ReplayID != "" || !c.LatestAt.Equal(e.clock.Now()) {
		t.Fatalf("after the fallback the cursor is %+v; want the refused id replaced by the moment of the LATEST subscription", c)
	}

	e.clock.Advance(time.Minute)
	e.publishLogins(t, 5, 3) // published after the fallback: must be shipped
	rep = runJob(t, coord, sink, e.source(t, opts))
	if rep.Outcome != job.OutcomeOK || rep.Records != 3 || lk.Count() != 8 || rep.Events["pubsub.replay_fallback"] != 0 {
		t.Fatalf("run after the fallback: outcome %s, %d records, receiver holds %d (want 3 new, 8 in all); fallback counter %d, notes %q",
			rep.Outcome, rep.Records, lk.Count(), rep.Events["pubsub.replay_fallback"], rep.Notes)
	}
}

// TestStartLatestStoresAKeepalivesReplayID: a keepalive arriving on the LATEST subscription gives
// the topic a real position, which stays the topic's cursor: the moment of the subscription is
// recorded only when nothing arrived.
func TestStartLatestStoresAKeepalivesReplayID(t *testing.T) {
	// Keepalives come more often than the idle period: the pull ends at the run's deadline.
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: 200 * time.Millisecond})
	ids := e.publishLogins(t, 0, 2)
	src := e.source(t, pubsub.Options{Topics: []string{loginTopic}, Idle: 2 * time.Second, Start: pubsub.StartLatest, RefreshAfter: -1})
	p := pullUntil(t, src, nil, time.Now().Add(time.Second))
	recs := p.records[loginKey]
	if err := p.errs[loginKey]; err != nil || len(recs) == 0 {
		t.Fatalf("%d records, err %v", len(recs), err)
	}
	for _, r := range recs {
		if r.SkipReason != "keepalive" {
			t.Errorf("record skipped for %q, want only keepalives", r.SkipReason)
		}
	}
	c, id, _, err := pubsub.DecodeCursor(p.lastCursor(loginKey))
	if err != nil || !bytes.Equal(id, ids[1]) || !c.LatestAt.IsZero() {
		t.Fatalf("last cursor %+v (%v): want the keepalive's replay id, the topic's newest", c, err)
	}
}

// TestLatestAtCursorDecodes: a cursor holding only LatestAt is a position without a replay id;
// a replay id stays required otherwise.
func TestLatestAtCursorDecodes(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	c, id, ok, err := pubsub.DecodeCursor(pubsub.EncodeCursor(pubsub.Cursor{LatestAt: at, AdvancedAt: at.Add(time.Second)}))
	if err != nil || !ok || id != nil || !c.LatestAt.Equal(at) {
		t.Fatalf("LatestAt cursor decoded to %+v, id %v, ok %v, err %v", c, id, ok, err)
	}
	for _, raw := range []string{`{"v":1}`, `{"v":1,"replay_id":""}`, `""`} {
		if _, _, _, err := pubsub.DecodeCursor(json.RawMessage(raw)); err == nil {
			t.Errorf("%s: accepted without a replay id or a LatestAt", raw)
		}
	}
}

// TestResubscribeAfterExpiryKeepsTheLatestStart: start: latest, and the session expires on the
// LATEST subscription before any event arrived. The client renews the session and subscribes
// again; event 1 is published between the first subscription and that re-subscribe, event 2
// after it. Both are shipped, because the re-subscribe never starts later than the first
// subscription; event 0, published an hour before the run, is not.
func TestResubscribeAfterExpiryKeepsTheLatestStart(t *testing.T) {
	var e *env
	var mu sync.Mutex
	var first string            // the access token of the first subscription
	firstChecks := 0            // checks of that token
	renewed := map[string]int{} // checks per renewed token
	var errs []error
	auth := func(ctx context.Context, c simpubsub.Credentials) (simpubsub.Principal, bool) {
		mu.Lock()
		var step string
		switch {
		case first == "":
			first = c.AccessToken // the first Subscribe call starts
		case c.AccessToken == first:
			firstChecks++
			if firstChecks == 1 {
				// A check on the open LATEST stream, so past its start position: the session
				// expires, this check fails and the stream ends UNAUTHENTICATED.
				step = "expire"
			}
		default:
			renewed[c.AccessToken]++
			switch renewed[c.AccessToken] {
			case 1: // the re-subscribe starts: before it resolves its start position
				step = "publish 1"
			case 2: // a check on the re-subscribed stream: past its start position
				step = "publish 2"
			}
		}
		mu.Unlock()
		var err error
		switch step {
		case "expire":
			e.org.ExpireSessions()
		case "publish 1":
			_, err = e.ps.Publish(loginTopic, simpubsub.LoginEvent(1, e.clock.Now()))
		case "publish 2":
			_, err = e.ps.Publish(loginTopic, simpubsub.LoginEvent(2, e.clock.Now()))
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return e.authenticator()(ctx, c)
	}
	e = newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour, AuthCheckInterval: 20 * time.Millisecond, Authenticate: auth})
	e.publishLogins(t, 0, 1) // long before the run: not wanted with start: latest
	e.clock.Advance(time.Hour)

	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 2 * time.Second, Start: pubsub.StartLatest, RefreshAfter: -1}
	rep := runJob(t, coord, sink, e.source(t, opts))
	mu.Lock()
	if len(errs) > 0 {
		t.Fatalf("publishing from the server: %v", errs)
	}
	mu.Unlock()
	if got := e.client.Stats().Reauths; got != 1 {
		t.Fatalf("%d session renewals, want 1: the fault was not injected", got)
	}
	if rep.Outcome != job.OutcomeOK {
		t.Fatalf("outcome %s (%s)", rep.Outcome, rep.Error)
	}
	var shipped []int
	for _, en := range lk.Entries() {
		shipped = append(shipped, eventNumber(t, en.Line))
	}
	slices.Sort(shipped)
	if !slices.Equal(shipped, []int{1, 2}) {
		t.Fatalf("shipped events %v; want [1 2]: event 1 was published after the first LATEST subscription and before the re-subscribe", shipped)
	}
	if n := rep.Events["pubsub."+pubsub.SkipBeforeStart]; n != 1 {
		t.Fatalf("before_start counted %d, want event 0", n)
	}
	if c, _ := storedCursor(t, coord, loginKey); c.ReplayID == "" {
		t.Fatalf("cursor %+v; want the last event's replay id", c)
	}
}

// TestLatestAtPastRetentionFollowsReplayLost: a topic whose cursor holds only LatestAt and
// whose runs stopped for longer than Salesforce's retention cannot resume from that moment:
// the events published between it and the retention horizon are gone. Like a refused replay
// id, the default refuses (integrity outcome, nothing committed, an error naming the topic and
// replay_lost); earliest and latest resume from there with the replay_fallback counter and a
// note that events may have been missed.
func TestLatestAtPastRetentionFollowsReplayLost(t *testing.T) {
	cases := []struct {
		policy  pubsub.ReplayLost
		outcome job.Outcome
		shipped []int // event numbers shipped by the run after the gap
	}{
		{"", job.OutcomeIntegrity, nil}, // the default: fail
		{pubsub.ReplayLostEarliest, job.OutcomeOK, []int{1}},
		{pubsub.ReplayLostLatest, job.OutcomeOK, nil},
	}
	for _, tc := range cases {
		name := string(tc.policy)
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
			coord := jobtest.New()
			lk, sink := receiver(t)
			opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, Start: pubsub.StartLatest, ReplayLost: tc.policy, RefreshAfter: -1}
			if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || rep.Records != 0 {
				t.Fatalf("first run: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
			}
			before, _ := storedCursor(t, coord, loginKey)
			if before.LatestAt.IsZero() || before.ReplayID != "" {
				t.Fatalf("after the first run the cursor is %+v; want only LatestAt", before)
			}

			e.clock.Advance(time.Hour)
			e.publishLogins(t, 0, 1) // after the first subscription; aged out by the next run
			e.clock.Advance(72 * time.Hour)
			e.publishLogins(t, 1, 1) // still retained
			e.clock.Advance(time.Minute)
			rep := runJob(t, coord, sink, e.source(t, opts))
			if rep.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%s), want %s; events %v", rep.Outcome, rep.Error, tc.outcome, rep.Events)
			}
			var shipped []int
			for _, en := range lk.Entries() {
				shipped = append(shipped, eventNumber(t, en.Line))
			}
			if !slices.Equal(shipped, tc.shipped) {
				t.Fatalf("shipped %v, want %v", shipped, tc.shipped)
			}
			after, _ := storedCursor(t, coord, loginKey)
			if tc.outcome == job.OutcomeIntegrity {
				if rep.Commits != 0 || after != before {
					t.Fatalf("the refusal committed: %d commits, cursor %+v → %+v", rep.Commits, before, after)
				}
				for _, want := range []string{loginTopic, "sources.pubsub.replay_lost", loginKey, "72h"} {
					if !strings.Contains(rep.Error, want) {
						t.Fatalf("error %q does not name %q", rep.Error, want)
					}
				}
				return
			}
			if rep.Events["pubsub.replay_fallback"] != 1 {
				t.Fatalf("events %v: want replay_fallback counted", rep.Events)
			}
			if notes := strings.Join(rep.Notes, " "); !strings.Contains(notes, loginTopic) || !strings.Contains(notes, "may have been missed") {
				t.Fatalf("notes %q: want a note naming the topic and that events may have been missed", rep.Notes)
			}
			if after == before {
				t.Fatalf("the cursor stayed %+v: the next run would meet the same gap", after)
			}
			if tc.policy == pubsub.ReplayLostLatest && (after.ReplayID != "" || !after.LatestAt.Equal(e.clock.Now())) {
				t.Fatalf("after the latest fallback the cursor is %+v; want the moment of the new LATEST subscription", after)
			}
		})
	}
}

// TestLatestAtAgesLikeAReplayID: a cursor holding only LatestAt is a position Salesforce's
// retention ends as surely as a replay id (past Retention it follows replay_lost). The run
// reports its age, measured from LatestAt, as it does a replay id's: the gauge event
// replay_id_age_seconds:<topic>, TopicReport.ReplayAge, and past age_warning a note naming the
// topic, so a topic heading for the refusal is flagged before it.
func TestLatestAtAgesLikeAReplayID(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	coord := jobtest.New()
	_, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, Start: pubsub.StartLatest, RefreshAfter: -1}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || rep.Records != 0 {
		t.Fatalf("first run: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
	}
	ageEvent := "pubsub." + pubsub.ReplayAgeEvent(loginTopic)
	for _, step := range []struct {
		advance time.Duration
		note    bool // past age_warning (48h)
	}{
		{time.Hour, false},
		{50 * time.Hour, true},
	} {
		stored, _ := storedCursor(t, coord, loginKey)
		if stored.LatestAt.IsZero() || stored.ReplayID != "" {
			t.Fatalf("cursor %+v; want only LatestAt", stored)
		}
		e.clock.Advance(step.advance)
		since := stored.LatestAt // or the last quiet look, once a run made one
		if stored.CheckedAt.After(since) {
			since = stored.CheckedAt
		}
		want := e.clock.Now().Sub(since)
		src := e.source(t, opts)
		rep := runJob(t, coord, sink, src)
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("after %s: outcome %s (%s)", step.advance, rep.Outcome, rep.Error)
		}
		if got, ok := rep.Events[ageEvent]; !ok || got != int64(want/time.Second) {
			t.Fatalf("after %s: %s = %d (reported %v), want %d, the age of latest_at %s (checked %s); events %v",
				step.advance, ageEvent, got, ok, int64(want/time.Second), stored.LatestAt, stored.CheckedAt, rep.Events)
		}
		if got := src.Topics()[0].ReplayAge; got != want {
			t.Fatalf("after %s: TopicReport.ReplayAge = %s, want %s", step.advance, got, want)
		}
		notes := strings.Join(rep.Notes, " ")
		if noted := strings.Contains(notes, loginTopic) && strings.Contains(notes, "latest_at") && strings.Contains(notes, "72h"); noted != step.note {
			t.Fatalf("after %s (latest_at %s old): notes %q; want an age note naming the topic and latest_at: %v", step.advance, want, rep.Notes, step.note)
		}
	}
}

// TestEarliestFallbackThatMeetsNothingIsNotRepeated: replay_lost: earliest on a topic that
// retains nothing. The fallback's EARLIEST pull meets no event, which proves there was nothing
// left to ship: the refused position (an expired replay id, or a latest_at past Retention) is
// replaced by the moment the fallback subscribed, so the next run resumes from there without
// a second fallback or "may have been missed" note, and ships what was published in between.
func TestEarliestFallbackThatMeetsNothingIsNotRepeated(t *testing.T) {
	for _, stored := range []string{"replay id", "latest_at"} {
		t.Run(stored, func(t *testing.T) {
			e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
			coord := jobtest.New()
			lk, sink := receiver(t)
			opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, ReplayLost: pubsub.ReplayLostEarliest, RefreshAfter: -1}
			first := opts
			if stored == "latest_at" {
				first.Start = pubsub.StartLatest
			} else {
				e.publishLogins(t, 0, 2)
			}
			if rep := runJob(t, coord, sink, e.source(t, first)); rep.Outcome != job.OutcomeOK {
				t.Fatalf("first run: %s %s", rep.Outcome, rep.Error)
			}
			if c, _ := storedCursor(t, coord, loginKey); (stored == "latest_at") != (c.ReplayID == "") {
				t.Fatalf("after the first run the cursor is %+v; want a %s", c, stored)
			}

			e.clock.Advance(73 * time.Hour) // the stored position ages out; nothing is retained
			rep := runJob(t, coord, sink, e.source(t, opts))
			if rep.Outcome != job.OutcomeOK || rep.Events["pubsub.replay_fallback"] != 1 || rep.Records != 0 {
				t.Fatalf("fallback run: %s %s, %d records, events %v; want one fallback meeting nothing", rep.Outcome, rep.Error, rep.Records, rep.Events)
			}
			fellBackAt := e.clock.Now()
			c, _ := storedCursor(t, coord, loginKey)
			if c.ReplayID != "" || !c.CheckedAt.Equal(fellBackAt) || !c.LatestAt.Equal(fellBackAt.Add(-pubsub.Retention)) {
				t.Errorf("after the fallback met nothing the cursor is %+v; want checked at the moment the fallback subscribed, %s, "+
					"and a floor at its retention horizon", c, fellBackAt)
			}

			e.clock.Advance(time.Minute)
			e.publishLogins(t, 10, 1) // after the fallback: must be shipped
			rep = runJob(t, coord, sink, e.source(t, opts))
			if rep.Outcome != job.OutcomeOK || rep.Events["pubsub.replay_fallback"] != 0 || strings.Contains(strings.Join(rep.Notes, " "), "may have been missed") {
				t.Fatalf("run after the fallback: %s %s, events %v, notes %q; want no second fallback", rep.Outcome, rep.Error, rep.Events, rep.Notes)
			}
			var shipped []int
			for _, en := range lk.Entries() {
				if n := eventNumber(t, en.Line); n >= 10 {
					shipped = append(shipped, n)
				}
			}
			if !slices.Equal(shipped, []int{10}) || rep.Records != 1 {
				t.Fatalf("run after the fallback shipped %d records, events %v from after the fallback; want [10]", rep.Records, shipped)
			}
		})
	}
}

// TestEarliestFallbackCutShortStoresNothing: a fallback pull that the run's deadline ends
// before the idle period has not shown that nothing is retained (Salesforce may not have sent
// it yet), so it keeps the refused position rather than storing a moment that would skip
// whatever is retained from before it.
func TestEarliestFallbackCutShortStoresNothing(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	stored := pubsub.Cursor{LatestAt: e.clock.Now().Add(-73 * time.Hour), AdvancedAt: e.clock.Now().Add(-73 * time.Hour)}
	src := e.source(t, pubsub.Options{Topics: []string{loginTopic}, Idle: time.Minute, ReplayLost: pubsub.ReplayLostEarliest, RefreshAfter: -1})
	p := pullUntil(t, src, map[string]json.RawMessage{loginKey: pubsub.EncodeCursor(stored)}, time.Now().Add(500*time.Millisecond))
	if err := p.errs[loginKey]; err != nil {
		t.Fatal(err)
	}
	if p.counts["replay_fallback"] != 1 {
		t.Fatalf("counts %v: want the fallback", p.counts)
	}
	if tr := src.Topics()[0]; tr.Stop != sfpubsub.StopDeadline {
		t.Fatalf("the pull stopped on %q, want the deadline", tr.Stop)
	}
	if recs := p.records[loginKey]; len(recs) != 0 {
		t.Fatalf("%d records (last cursor %s); want none: a pull cut short proves nothing", len(recs), p.lastCursor(loginKey))
	}
}

// TestQuietLatestTopicRunningRegularlyIsNeverRefused: start: latest on a topic that stays quiet
// for days while the job runs every 12 hours. Each run's EARLIEST pull (resuming from latest_at)
// meets nothing for the idle period: the run stores when it looked (checked_at) and keeps the
// floor. So the position's age is the time since the last run, not since the first one: no age
// note, no replay_lost refusal past 72h, and an event published after those days is still
// shipped.
func TestQuietLatestTopicRunningRegularlyIsNeverRefused(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, Start: pubsub.StartLatest, RefreshAfter: -1}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || rep.Records != 0 {
		t.Fatalf("first run: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
	}
	first, _ := storedCursor(t, coord, loginKey)
	first.LatestAt = first.LatestAt.UTC()
	for i := 1; i <= 7; i++ { // 84h of quiet, past the 72h retention
		e.clock.Advance(12 * time.Hour)
		rep := runJob(t, coord, sink, e.source(t, opts))
		if rep.Outcome != job.OutcomeOK || rep.Events["pubsub.replay_fallback"] != 0 || len(rep.Notes) != 0 {
			t.Fatalf("quiet run %d (%dh after the first): %s %s, events %v, notes %q; want a clean run", i, 12*i, rep.Outcome, rep.Error, rep.Events, rep.Notes)
		}
		if c, _ := storedCursor(t, coord, loginKey); c.ReplayID != "" || !c.CheckedAt.Equal(e.clock.Now()) || !c.LatestAt.Equal(first.LatestAt) {
			t.Errorf("after quiet run %d the cursor is %+v; want latest_at kept at %s and checked_at this run's subscription, %s", i, c, first.LatestAt, e.clock.Now())
		}
	}
	e.clock.Advance(time.Minute)
	e.publishLogins(t, 0, 1)
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || rep.Records != 1 || lk.Count() != 1 {
		t.Fatalf("run after the quiet days: %s %s, %d records, receiver holds %d; want the new event", rep.Outcome, rep.Error, rep.Records, lk.Count())
	}
}

// TestAnEarliestAnswerSlowerThanIdleLosesNothing: a topic resumed from latest_at whose
// EARLIEST pull gets no answer within the idle period (a slow server) stores when it looked, not
// a new floor: the events published after latest_at, which that pull did not receive in time,
// are shipped by the next run, none skipped as before_start.
func TestAnEarliestAnswerSlowerThanIdleLosesNothing(t *testing.T) {
	var e *env
	var slow atomic.Int32
	auth := func(ctx context.Context, c simpubsub.Credentials) (simpubsub.Principal, bool) {
		if slow.Add(-1) == 0 {
			time.Sleep(1500 * time.Millisecond) // three idle periods
		}
		return e.authenticator()(ctx, c)
	}
	e = newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour, Authenticate: auth})
	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, Start: pubsub.StartLatest, RefreshAfter: -1}
	runJob(t, coord, sink, e.source(t, opts)) // stores latest_at
	e.clock.Advance(time.Minute)
	e.publishLogins(t, 0, 5) // after latest_at: all five are wanted
	e.clock.Advance(time.Hour)
	slow.Store(2) // the check before the next pull's first answer is slow (the first is the call's own)
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK {
		t.Fatalf("slow run: %s %s", rep.Outcome, rep.Error)
	}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || rep.Events["pubsub.before_start"] != 0 {
		t.Fatalf("next run: %s %s, events %v; want nothing skipped as before_start", rep.Outcome, rep.Error, rep.Events)
	}
	if lk.Count() != 5 {
		t.Fatalf("the receiver holds %d of the 5 events published after latest_at", lk.Count())
	}
}

// TestALateEventAfterAQuietRunIsShipped: an event whose own time is more than LatestMargin
// before it becomes visible (Real-Time Event Monitoring stamps the action; CDC under load), but
// after the topic's latest_at, is shipped although a quiet run looked in between: the look does
// not raise the floor.
func TestALateEventAfterAQuietRunIsShipped(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 500 * time.Millisecond, Start: pubsub.StartLatest, RefreshAfter: -1}
	runJob(t, coord, sink, e.source(t, opts)) // latest_at
	e.clock.Advance(time.Hour)
	runJob(t, coord, sink, e.source(t, opts)) // quiet: looked an hour later
	e.clock.Advance(time.Minute)
	if _, err := e.ps.Publish(loginTopic, simpubsub.LoginEvent(7, e.clock.Now().Add(-10*time.Minute))); err != nil {
		t.Fatal(err)
	}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Outcome != job.OutcomeOK || lk.Count() != 1 {
		t.Fatalf("run after the late event: %s %s, events %v, receiver holds %d; want the event shipped", rep.Outcome, rep.Error, rep.Events, lk.Count())
	}
}
