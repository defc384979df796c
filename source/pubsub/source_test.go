package pubsub_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

var loginKey = pubsub.Key(loginTopic)

// eventNumber reads the n of a LoginEvent line (EventIdentifier ev-%08d).
func eventNumber(t *testing.T, line string) int {
	t.Helper()
	var v struct {
		EventIdentifier string
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	var n int
	if _, err := fmt.Sscanf(v.EventIdentifier, "ev-%d", &n); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	return n
}

func TestTenThousandEventsExactlyOnceAcrossRunsOfN(t *testing.T) {
	const total, n = 10_000, 1_500
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	ids := e.publishLogins(t, 0, total)
	coord := jobtest.New()
	lk, sink := receiver(t)
	runs := 0
	for {
		runs++
		if runs > 10 {
			t.Fatal("more runs than 10 000 / 1 500 needs")
		}
		src := e.source(t, pubsub.Options{Topics: []string{loginTopic}, MaxEvents: n, Idle: time.Second})
		rep := runJob(t, coord, sink, src)
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("run %d: outcome %s: %s", runs, rep.Outcome, rep.Error)
		}
		stop := src.Topics()[0].Stop
		shipped := lk.Count() - (runs-1)*n
		if lk.Count() < total {
			if stop != sfpubsub.StopMax || rep.Records != n {
				t.Fatalf("run %d ended on %q with %d records, want the N rule with %d", runs, stop, rep.Records, n)
			}
			if rep.CaughtUp || len(rep.Waiting) != 1 || rep.Waiting[0].Key != loginKey || !strings.Contains(rep.Waiting[0].Reason, "max_events") {
				t.Fatalf("run %d stopped at N: caught_up %v, waiting %+v; want not caught up, the topic waiting at max_events", runs, rep.CaughtUp, rep.Waiting)
			}
			continue
		}
		if shipped != total%n || stop != sfpubsub.StopIdle {
			t.Fatalf("last run shipped %d and ended on %q, want %d and the idle rule", shipped, stop, total%n)
		}
		if !rep.CaughtUp || len(rep.Waiting) > 0 {
			t.Fatalf("last run: caught_up %v, waiting %+v; want caught up", rep.CaughtUp, rep.Waiting)
		}
		break
	}
	entries := lk.Entries()
	if len(entries) != total {
		t.Fatalf("receiver holds %d entries, want %d", len(entries), total)
	}
	for i, en := range entries {
		if got := eventNumber(t, en.Line); got != i {
			t.Fatalf("entry %d is event %d: not exactly once in replay order", i, got)
		}
		if en.MetadataValue(pubsub.MetadataReplayID) != base64.StdEncoding.EncodeToString(ids[i]) {
			t.Fatalf("entry %d carries replay_id %q", i, en.MetadataValue(pubsub.MetadataReplayID))
		}
		if en.Label("event_type") != "LoginEventStream" || en.Label("source") != "pubsub" {
			t.Fatalf("entry %d labels %v", i, en.Labels)
		}
	}
	c, ok := storedCursor(t, coord, loginKey)
	if !ok || c.ReplayID != base64.StdEncoding.EncodeToString(ids[total-1]) {
		t.Fatalf("stored cursor %+v, want the last event's replay id", c)
	}
	if got := e.ps.Stats().MaxRequestedOutstanding; got > sfpubsub.MaxOutstanding {
		t.Fatalf("the source had %d events outstanding, more than %d", got, sfpubsub.MaxOutstanding)
	}
}

// TestOnlyTheCapLeavesATopicWaiting: a topic whose pull stopped at MaxEvents may have more
// events waiting, so it ends with source.ErrWaiting naming max_events (the run is not caught
// up); a pull that idle or the run's deadline stopped ends at io.EOF.
func TestOnlyTheCapLeavesATopicWaiting(t *testing.T) {
	cases := []struct {
		name      string
		published int
		idle      time.Duration
		run       time.Duration // the run's deadline, from now
		stop      sfpubsub.StopReason
		records   int
		waits     bool
	}{
		{"max_events", 5, time.Second, 50 * time.Second, sfpubsub.StopMax, 3, true},
		{"idle", 2, 200 * time.Millisecond, 50 * time.Second, sfpubsub.StopIdle, 2, false},
		{"deadline", 2, time.Minute, 800 * time.Millisecond, sfpubsub.StopDeadline, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
			e.publishLogins(t, 0, tc.published)
			src := e.source(t, pubsub.Options{Topics: []string{loginTopic}, MaxEvents: 3, Idle: tc.idle, RefreshAfter: -1})
			p := pullUntil(t, src, nil, time.Now().Add(tc.run))
			if n, stop := len(p.records[loginKey]), src.Topics()[0].Stop; n != tc.records || stop != tc.stop {
				t.Fatalf("%d records, stopped on %q; want %d and %q", n, stop, tc.records, tc.stop)
			}
			err := p.errs[loginKey]
			switch {
			case tc.waits && (!errors.Is(err, source.ErrWaiting) || !strings.Contains(err.Error(), "max_events")):
				t.Fatalf("stopped at the cap with %v; want source.ErrWaiting naming max_events", err)
			case !tc.waits && err != nil:
				t.Fatalf("stopped on %s with %v; want io.EOF", tc.stop, err)
			}
		})
	}
}

func TestIdleTopicEndsOnIdleAndCommitsNothing(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: 5 * time.Second})
	e.publishLogins(t, 0, 3)
	coord := jobtest.New()
	_, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: 200 * time.Millisecond}
	first := pubsub.Options{Topics: []string{loginTopic}, Idle: time.Second}
	if rep := runJob(t, coord, sink, e.source(t, first)); rep.Outcome != job.OutcomeOK || rep.Records != 3 {
		t.Fatalf("first run: %s, %d records", rep.Outcome, rep.Records)
	}
	before, _ := storedCursor(t, coord, loginKey)
	e.clock.Advance(time.Hour) // quiet, but far from refresh_after
	src := e.source(t, opts)
	rep := runJob(t, coord, sink, src)
	if rep.Outcome != job.OutcomeOK || rep.Records != 0 || rep.Commits != 0 {
		t.Fatalf("idle run: outcome %s, %d records, %d commits; want ok with nothing committed", rep.Outcome, rep.Records, rep.Commits)
	}
	if stop := src.Topics()[0].Stop; stop != sfpubsub.StopIdle {
		t.Fatalf("idle run ended on %q, want the idle rule", stop)
	}
	if after, _ := storedCursor(t, coord, loginKey); after != before {
		t.Fatalf("cursor moved on an idle run: %+v → %+v", before, after)
	}
	if ka := e.ps.Stats().Keepalives; ka != 0 {
		t.Fatalf("%d keepalives were sent during a run shorter than the keepalive interval", ka)
	}
}

func TestStalePositionWaitsForAKeepaliveAndCommitsIt(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: 1500 * time.Millisecond}) // longer than the idle period
	e.publishLogins(t, 0, 2)
	coord := jobtest.New()
	lk, sink := receiver(t)
	opts := pubsub.Options{Topics: []string{loginTopic}, Idle: time.Second, RefreshAfter: 24 * time.Hour}
	if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Records != 2 {
		t.Fatalf("first run shipped %d", rep.Records)
	}
	before, _ := storedCursor(t, coord, loginKey)
	e.clock.Advance(25 * time.Hour)
	src := e.source(t, opts)
	rep := runJob(t, coord, sink, src)
	tr := src.Topics()[0]
	if rep.Outcome != job.OutcomeOK || rep.Commits != 1 || !tr.Refreshing || tr.Keepalives != 1 || tr.Stop != sfpubsub.StopKeepalive {
		t.Fatalf("refresh run: outcome %s, %d commits, report %+v; want one keepalive committed", rep.Outcome, rep.Commits, tr)
	}
	after, _ := storedCursor(t, coord, loginKey)
	if after.ReplayID == before.ReplayID || !after.AdvancedAt.Equal(e.clock.Now()) {
		t.Fatalf("cursor %+v → %+v: want a new replay id advanced now", before, after)
	}
	if lk.Count() != 2 {
		t.Fatalf("a keepalive must not produce a log line: receiver holds %d entries", lk.Count())
	}
	if age := rep.Events["pubsub.replay_id_age_seconds:"+loginTopic]; age != int64(25*time.Hour/time.Second) {
		t.Fatalf("replay id age counter = %d, want %d", age, int64(25*time.Hour/time.Second))
	}
	// 71 hours later the refreshed position is still inside the retention window.
	e.clock.Advance(71 * time.Hour)
	e.publishLogins(t, 2, 1)
	if rep := runJob(t, coord, sink, e.source(t, pubsub.Options{Topics: []string{loginTopic}, Idle: time.Second, RefreshAfter: -1})); rep.Outcome != job.OutcomeOK || rep.Records != 1 {
		t.Fatalf("resume from the refreshed id: %s %s, %d records", rep.Outcome, rep.Error, rep.Records)
	}
}

// TestKeepaliveAtTheStoredPositionCommitsNothing: on a quiet topic a keepalive carries the
// stored replay id itself. The position did not move, so no record is yielded and nothing is
// committed: the stored AdvancedAt keeps its age (ReplayAge, refresh_after and the staleness note
// go on measuring how close the id is to the retention horizon), whether the run was waiting for
// a keepalive to refresh the position or pulling until its deadline.
func TestKeepaliveAtTheStoredPositionCommitsNothing(t *testing.T) {
	cases := []struct {
		name         string
		idle         time.Duration
		refreshAfter time.Duration
		run          time.Duration // the run's deadline, from now
		stop         sfpubsub.StopReason
	}{
		{"refresh waits for the keepalive", 20 * time.Millisecond, 24 * time.Hour, 50 * time.Second, sfpubsub.StopKeepalive},
		{"keepalives faster than the idle period", time.Second, -1, 800 * time.Millisecond, sfpubsub.StopDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, simpubsub.Options{KeepaliveInterval: 100 * time.Millisecond})
			// The org's clock does not move after the publish, so the topic's newest replay id,
			// which its keepalives carry, stays ids[1]: the stored position.
			ids := e.publishLogins(t, 0, 2)
			stored := pubsub.Cursor{ReplayID: base64.StdEncoding.EncodeToString(ids[1]), AdvancedAt: e.clock.Now().Add(-25 * time.Hour)}
			src := e.source(t, pubsub.Options{Topics: []string{loginTopic}, Idle: tc.idle, RefreshAfter: tc.refreshAfter})
			p := pullUntil(t, src, map[string]json.RawMessage{loginKey: pubsub.EncodeCursor(stored)}, time.Now().Add(tc.run))
			if err := p.errs[loginKey]; err != nil {
				t.Fatal(err)
			}
			if e.ps.Stats().Keepalives == 0 {
				t.Fatal("the server sent no keepalive")
			}
			tr := src.Topics()[0]
			if recs := p.records[loginKey]; len(recs) != 0 || tr.Keepalives != 0 || tr.Stop != tc.stop {
				t.Fatalf("%d records (last cursor %s), report %+v; want none (nothing to commit: the position did not move) and stop %q",
					len(recs), p.lastCursor(loginKey), tr, tc.stop)
			}
		})
	}
}

func TestReplayIDPastRetention(t *testing.T) {
	cases := []struct {
		policy  pubsub.ReplayLost
		outcome job.Outcome
		exit    bool // the run must fail with the integrity outcome
	}{
		{pubsub.ReplayLostFail, job.OutcomeIntegrity, true},
		{pubsub.ReplayLostEarliest, job.OutcomeOK, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
			e.publishLogins(t, 0, 5)
			coord := jobtest.New()
			lk, sink := receiver(t)
			opts := pubsub.Options{Topics: []string{loginTopic}, Idle: time.Second, ReplayLost: tc.policy, RefreshAfter: -1}
			if rep := runJob(t, coord, sink, e.source(t, opts)); rep.Records != 5 {
				t.Fatalf("first run shipped %d", rep.Records)
			}
			before, _ := storedCursor(t, coord, loginKey)
			e.clock.Advance(73 * time.Hour)
			e.publishLogins(t, 5, 4)
			rep := runJob(t, coord, sink, e.source(t, opts))
			if rep.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%s), want %s", rep.Outcome, rep.Error, tc.outcome)
			}
			after, _ := storedCursor(t, coord, loginKey)
			if tc.exit {
				if rep.Commits != 0 || after != before || lk.Count() != 5 {
					t.Fatalf("fail policy committed or shipped: %d commits, cursor %+v → %+v, %d entries", rep.Commits, before, after, lk.Count())
				}
				if !strings.Contains(rep.Error, "replay id") || !strings.Contains(rep.Error, "replay_lost") {
					t.Fatalf("error %q does not say what happened and what to do", rep.Error)
				}
				return
			}
			if rep.Records != 4 || after == before {
				t.Fatalf("earliest fallback shipped %d records, cursor %+v → %+v; want the 4 retained events", rep.Records, before, after)
			}
			if rep.Events["pubsub.replay_fallback"] != 1 {
				t.Fatalf("events %v: want replay_fallback counted", rep.Events)
			}
			if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, " "), "may have been missed") {
				t.Fatalf("notes %q: want a note that events may have been missed", rep.Notes)
			}
		})
	}
}

func TestSessionExpiringMidStreamIsRenewedOnce(t *testing.T) {
	var e *env
	var once sync.Once
	var mu sync.Mutex
	delivered := 0
	e = newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour, OnDeliver: func(_ string, n int) {
		mu.Lock()
		delivered += n
		d := delivered
		mu.Unlock()
		if d >= 1000 {
			once.Do(e.org.ExpireSessions)
		}
	}})
	e.publishLogins(t, 0, 3000)
	coord := jobtest.New()
	lk, sink := receiver(t)
	rep := runJob(t, coord, sink, e.source(t, pubsub.Options{Topics: []string{loginTopic}, MaxEvents: 3000, Idle: 2 * time.Second}))
	if rep.Outcome != job.OutcomeOK || rep.Records != 3000 {
		t.Fatalf("outcome %s (%s), %d records; want all 3000", rep.Outcome, rep.Error, rep.Records)
	}
	if got := e.client.Stats().Reauths; got != 1 {
		t.Fatalf("%d renewals, want exactly 1", got)
	}
	if got := e.sf.Stats().Calls["token"]; got != 2 {
		t.Fatalf("%d token requests, want 2 (the first and one renewal)", got)
	}
	seen := map[int]bool{}
	for _, en := range lk.Entries() {
		seen[eventNumber(t, en.Line)] = true
	}
	if len(seen) != 3000 || lk.Count() != 3000 {
		t.Fatalf("%d distinct of %d entries, want 3000 exactly once", len(seen), lk.Count())
	}
}

func TestGoldenEvents(t *testing.T) {
	cases := []struct {
		name, topic, schema, golden string
		event                       map[string]any
		wantTime                    time.Time
	}{
		{
			name: "change data capture", topic: "/data/AccountChangeEvent", schema: "account_change_event.avsc", golden: "cdc_account_update.golden.json",
			event: map[string]any{
				"ChangeEventHeader": map[string]any{
					"entityName": "Account", "recordIds": []any{"001ZM000001QkdOYAS"}, "changeType": "UPDATE",
					"changeOrigin": "com/salesforce/api/soap/61.0;client=SfdcInternalAPI/", "transactionKey": "00097360-44a0-7c2e-a172-97381ae22f82",
					"sequenceNumber": 1, "commitTimestamp": int64(1714172795000), "commitNumber": int64(72657170033), "commitUser": "005ZM000000M6o1YAC",
					"nulledFields": []any{}, "diffFields": []any{}, "changedFields": []any{"0x400080"},
				},
				"BillingAddress": map[string]any{"Street": "415 Mission Street", "City": "San Francisco", "State": "CA", "PostalCode": "94105", "Country": "United States"},
				"Fax":            "4155551212", "Industry": "Biotechnology", "LastModifiedDate": int64(1714172795000), "External_Account_ID__c": "1ABC",
			},
			wantTime: time.Date(2024, 4, 26, 23, 6, 35, 0, time.UTC),
		},
		{
			name: "custom platform event", topic: "/event/Low_Ink__e", schema: "low_ink_event.avsc", golden: "low_ink_event.golden.json",
			event: map[string]any{
				"CreatedDate": int64(1491762700000), "CreatedById": "005D0000001cSZs",
				"Printer_Model__c": "XZO-5", "Serial_Number__c": "12345", "Ink_Percentage__c": 0.2,
			},
			wantTime: time.Date(2017, 4, 9, 18, 31, 40, 0, time.UTC),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
			schema, err := os.ReadFile(filepath.Join("testdata", tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.ps.AddTopic(tc.topic, string(schema)); err != nil {
				t.Fatal(err)
			}
			ids, err := e.ps.Publish(tc.topic, tc.event)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids[0]) != 8 {
				t.Fatalf("replay id of %d bytes; Salesforce's are 8", len(ids[0]))
			}
			golden, err := os.ReadFile(filepath.Join("testdata", tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, golden); err != nil {
				t.Fatal(err)
			}
			p := pullAll(t, e.source(t, pubsub.Options{Topics: []string{tc.topic}, Idle: time.Second}), nil)
			recs := p.records[pubsub.Key(tc.topic)]
			if err := p.errs[pubsub.Key(tc.topic)]; err != nil || len(recs) != 1 {
				t.Fatalf("%d records, err %v", len(recs), err)
			}
			en := recs[0].Entry
			if en.Line != want.String() {
				t.Fatalf("line\n got %s\nwant %s", en.Line, want.String())
			}
			if !en.Timestamp.Equal(tc.wantTime) {
				t.Fatalf("timestamp %s, want %s", en.Timestamp, tc.wantTime)
			}
			if v, _ := en.Labels.Get("event_type"); v != pubsub.EventType(tc.topic) {
				t.Fatalf("event_type %q", v)
			}
			if len(en.Metadata) != 1 || en.Metadata[0].Name != pubsub.MetadataReplayID || en.Metadata[0].Value != base64.StdEncoding.EncodeToString(ids[0]) {
				t.Fatalf("metadata %v, want the replay id", en.Metadata)
			}
		})
	}
}

func TestUndecodableAndShapedOutEventsAdvanceTheCursor(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	schemaID, err := e.ps.AddTopic(loginTopic, simpubsub.LoginEventStreamSchema)
	if err != nil {
		t.Fatal(err)
	}
	e.publishLogins(t, 0, 1)
	if _, err := e.ps.PublishPayload(loginTopic, schemaID, []byte{0x09, 0x01}); err != nil {
		t.Fatal(err)
	}
	ids := e.publishLogins(t, 1, 2)
	drop, err := shape.New(shape.Options{Transforms: []shape.Transform{
		{Op: shape.OpDropRow, Name: "test", Match: map[string]string{"EventIdentifier": "ev-00000002"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := pullAll(t, e.source(t, pubsub.Options{Topics: []string{loginTopic}, Idle: time.Second, Shaper: drop}), nil)
	recs := p.records[loginKey]
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	for i, want := range []string{"", "undecodable", "", "drop_row:test"} {
		if recs[i].Skip != (want != "") || recs[i].SkipReason != want {
			t.Fatalf("record %d: skip %v %q, want %q", i, recs[i].Skip, recs[i].SkipReason, want)
		}
	}
	c, _, _, err := pubsub.DecodeCursor(p.lastCursor(loginKey))
	if err != nil || c.ReplayID != base64.StdEncoding.EncodeToString(ids[1]) {
		t.Fatalf("last cursor %+v (%v), want the dropped event's replay id", c, err)
	}
	if p.counts["undecodable"] != 1 {
		t.Fatalf("counts %v", p.counts)
	}
}

func TestCursors(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	ids := e.publishLogins(t, 0, 3)
	legacy, _ := json.Marshal(base64.StdEncoding.EncodeToString(ids[0]))
	cases := []struct {
		name   string
		cursor json.RawMessage
		first  int // EventIdentifier of the first event yielded
		reset  bool
	}{
		{"none starts earliest", nil, 0, false},
		{"current", pubsub.EncodeCursor(pubsub.Cursor{ReplayID: base64.StdEncoding.EncodeToString(ids[1]), AdvancedAt: e.clock.Now()}), 2, false},
		{"legacy bare base64", legacy, 1, false},
		{"latest_at only", pubsub.EncodeCursor(pubsub.Cursor{LatestAt: e.clock.Now().Add(pubsub.LatestMargin)}), 0, false},
		{"garbage", json.RawMessage(`{"v":1,"replay_id":"%%%"}`), 0, true},
		{"other version", json.RawMessage(`{"v":9,"replay_id":"AAAA"}`), 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pullAll(t, e.source(t, pubsub.Options{Topics: []string{loginTopic}, Idle: time.Second, RefreshAfter: -1}),
				map[string]json.RawMessage{loginKey: tc.cursor})
			recs := p.records[loginKey]
			if err := p.errs[loginKey]; err != nil || len(recs) == 0 {
				t.Fatalf("%d records, err %v", len(recs), err)
			}
			if got := eventNumber(t, recs[0].Entry.Line); got != tc.first {
				t.Fatalf("first event %d, want %d", got, tc.first)
			}
			if (p.counts["cursor_reset"] == 1) != tc.reset {
				t.Fatalf("cursor_reset = %d, want reset %v", p.counts["cursor_reset"], tc.reset)
			}
		})
	}
}

func TestWildcardDiscoversEventStreams(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	s := e.source(t, pubsub.Options{Topics: []string{pubsub.Wildcard, "/event/Audit_Signal__e"}, Idle: 50 * time.Millisecond})
	p := pullAll(t, s, nil)
	var got []string
	for _, tr := range s.Topics() {
		got = append(got, tr.Topic)
	}
	want := []string{"/event/ApiAnomalyEvent", "/event/ApiEventStream", "/event/LoginEventStream", "/event/LogoutEventStream", "/event/Audit_Signal__e"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("topics %v, want %v", got, want)
	}
	// Topics the Pub/Sub API does not serve fail on their own; the others run.
	if err := p.errs[pubsub.Key("/event/ApiEventStream")]; !errors.Is(err, sfpubsub.ErrTopic) {
		t.Fatalf("unknown topic: %v, want ErrTopic", err)
	}
	if err := p.errs[loginKey]; err != nil {
		t.Fatalf("served topic failed: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []pubsub.Options{
		{},
		{Topics: []string{"LoginEventStream"}},
		{Topics: []string{"/event/a b"}},
		{Topics: []string{loginTopic}, NumRequested: 101},
		{Topics: []string{loginTopic}, ReplayLost: "skip"},
		{Topics: []string{loginTopic}, Start: "now"},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := pubsub.New(nil, nil, pubsub.Options{Topics: []string{loginTopic}}); err == nil {
		t.Error("New without a client: no error")
	}
	var _ source.Source = (*pubsub.Source)(nil)
}

type closeCounter struct{ n int }

func (c *closeCounter) Close() error { c.n++; return nil }

func TestClientClosedAfterTheLastStream(t *testing.T) {
	e := newEnv(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	if _, err := e.ps.AddTopic("/event/Other__e", simpubsub.LoginEventStreamSchema); err != nil {
		t.Fatal(err)
	}
	var c closeCounter
	pullAll(t, e.source(t, pubsub.Options{Topics: []string{loginTopic, "/event/Other__e"}, Idle: 50 * time.Millisecond, Closer: &c}), nil)
	if c.n != 1 {
		t.Fatalf("closer closed %d times after both streams closed, want once", c.n)
	}
}
