package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// storeWith returns a store whose document holds checkpoints (an absent document for nil).
func storeWith(t *testing.T, checkpoints map[string]json.RawMessage) *store.Store {
	t.Helper()
	st := storetest.NewStore(storetest.NewMemory())
	if checkpoints == nil {
		return st
	}
	w, err := st.Claim(t.Context(), storetest.Req(1, "writer"), store.Snapshot{Absent: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(t.Context(), store.Change{Set: checkpoints}); err != nil {
		t.Fatal(err)
	}
	return st
}

// pubsubResult runs the store checks of s and returns store.pubsub.
func pubsubResult(t *testing.T, s Store) Result {
	t.Helper()
	rep, err := Run(t.Context(), StoreChecks(s), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := rep.Result("store.pubsub")
	if !ok {
		t.Fatalf("no store.pubsub check among %s", ids(rep))
	}
	return r
}

const loginStream = "/event/LoginEventStream"

// The age_warning help and the docs promise that doctor warns as a stored Pub/Sub position
// ages. store.pubsub ages every configured topic's stored position by the source's own rule
// (pubsub.PositionAge: a replay id since it last advanced, a latest_at since that moment) and
// grades it as the next run will meet it: young PASS; past age_warning WARN (the position is
// lost after ~72h: run the job); past the retention FAIL when replay_lost: fail makes the next
// run stop with exit 7, WARN when a fallback resumes it with events possibly missed; an
// unusable value WARN (the run restarts the topic). Each finding names the topic, the
// checkpoint key and the setting; a topic with no position passes, starting at its start.
func TestStorePubSubGradesEachTopicByItsStoredPositionAge(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	key := pubsub.Key(loginStream)
	replayID := func(advanced time.Duration) json.RawMessage {
		return pubsub.EncodeCursor(pubsub.Cursor{ReplayID: "AAAAAAAAAAE=", AdvancedAt: now.Add(-advanced), LastEventAt: now.Add(-advanced)})
	}
	latestAt := func(ago time.Duration) json.RawMessage {
		// advanced_at is recent: the age of a latest_at position is measured from latest_at.
		return pubsub.EncodeCursor(pubsub.Cursor{LatestAt: now.Add(-ago), AdvancedAt: now.Add(-time.Minute)})
	}
	tests := []struct {
		name       string
		stored     json.RawMessage // nil: no key
		replayLost string
		start      string
		job        string // the job group whose document holds the position
		want       Status
		message    []string // substrings of the message
		fix        []string // substrings of the fix
	}{
		{name: "young replay id", stored: replayID(3 * time.Hour), want: StatusPass,
			message: []string{"none older than its age_warning"}},
		{name: "replay id past age_warning", stored: replayID(50 * time.Hour), want: StatusWarn,
			message: []string{loginStream, "key " + key, "sources.pubsub.age_warning", "not advanced for 50h", "exit 7"},
			fix:     []string{"run the job", "sources.pubsub.refresh_after", "sources.pubsub.replay_lost"}},
		{name: "latest_at past age_warning", stored: latestAt(50 * time.Hour), want: StatusWarn,
			message: []string{loginStream, "key " + key, "sources.pubsub.age_warning", "latest_at, last found quiet at 2026-03-02T10:00:00Z"},
			fix:     []string{"run the job", "sources.pubsub.replay_lost"}},
		{name: "latest_at past the retention with replay_lost fail", stored: latestAt(73 * time.Hour), want: StatusFail,
			message: []string{loginStream, "key " + key, "72h", "sources.pubsub.replay_lost: fail", "exit 7"},
			fix:     []string{"sources.pubsub.replay_lost", "sf2loki state delete " + key}},
		{name: "in a job group, the fix names it", stored: latestAt(73 * time.Hour), job: "events", want: StatusFail,
			fix: []string{"sf2loki state delete --job events " + key}},
		{name: "replay id past the retention with replay_lost fail", stored: replayID(80 * time.Hour), want: StatusFail,
			message: []string{loginStream, "key " + key, "72h", "exit 7"},
			fix:     []string{"sources.pubsub.replay_lost", "sf2loki state delete " + key}},
		{name: "replay id past the retention with replay_lost earliest", stored: replayID(80 * time.Hour), replayLost: "earliest", want: StatusWarn,
			message: []string{loginStream, "key " + key, "72h", "sources.pubsub.replay_lost: earliest", "missed"},
			fix:     []string{"backfill"}},
		{name: "no position", start: "latest", want: StatusPass,
			message: []string{"no Pub/Sub topic has a stored position", "sources.pubsub.start: latest"}},
		{name: "unusable position", stored: json.RawMessage(`{"v":1,"replay_id":"not base64!"}`), want: StatusWarn,
			message: []string{loginStream, "key " + key, "cursor_reset", "start (earliest)"},
			fix:     []string{"sf2loki state delete " + key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cps map[string]json.RawMessage
			if tt.stored != nil {
				cps = map[string]json.RawMessage{key: tt.stored}
			}
			topics := PubSubTopics{Path: "sources.pubsub", Job: tt.job, Topics: []string{loginStream}, AgeWarning: 48 * time.Hour, ReplayLost: tt.replayLost, Start: tt.start}
			r := pubsubResult(t, Store{Store: storeWith(t, cps), Type: "s3", ProbeNote: "n/a", Now: func() time.Time { return now }, PubSub: []PubSubTopics{topics}})
			if r.Status != tt.want {
				t.Fatalf("store.pubsub = %s %q (fix %q, details %q), want %s", r.Status, r.Message, r.Fix, r.Details, tt.want)
			}
			for _, s := range tt.message {
				if !strings.Contains(r.Message, s) {
					t.Errorf("message %q lacks %q", r.Message, s)
				}
			}
			for _, s := range tt.fix {
				if !strings.Contains(r.Fix, s) {
					t.Errorf("fix %q lacks %q", r.Fix, s)
				}
			}
			if details := strings.Join(r.Details, "\n"); !strings.Contains(details, loginStream) {
				t.Errorf("details %q do not list the topic", details)
			}
		})
	}
}

// Each org of a multi-org configuration reads its own org=<name>: keys (its first org also
// the unprefixed keys of a single-org past, where it has no prefixed one), and a topic list
// with * covers every topic the org has stored. store.pubsub, built from the configuration
// as doctor builds it, ages exactly those keys, each by its own org's settings, and names the
// key and the setting of the org at fault.
func TestStorePubSubAgesTheKeysOfEveryOrg(t *testing.T) {
	now := time.Now() // the check built from the configuration reads the wall clock
	cursor := func(age time.Duration) json.RawMessage {
		return pubsub.EncodeCursor(pubsub.Cursor{ReplayID: "AAAAAAAAAAE=", AdvancedAt: now.Add(-age)})
	}
	const apiStream = "/event/ApiEventStream"
	st := storeWith(t, map[string]json.RawMessage{
		"org=a:pubsub:" + loginStream: cursor(time.Hour),
		"pubsub:" + loginStream:       cursor(90 * time.Hour), // hidden by org a's own key
		"pubsub:/event/Order__e":      cursor(60 * time.Hour), // org a's legacy fallback: read
		"org=b:pubsub:" + apiStream:   cursor(80 * time.Hour), // found by org b's *
		"org=b:pubsub:" + loginStream: cursor(2 * time.Hour),
	})
	pubsubSection := func(topics ...string) config.Sources {
		return config.Sources{PubSub: config.PubSubSource{Enabled: true, Topics: topics, AgeWarning: config.Duration(48 * time.Hour), ReplayLost: "fail"}}
	}
	cfg := &config.Config{Orgs: []config.Org{
		{Name: "a", Sources: pubsubSection(loginStream, "/event/Order__e")},
		{Name: "b", Sources: pubsubSection("*")},
	}}
	cfg.State.Store = "s3"
	b := Builders{
		Store: func(context.Context, *config.Config) (*store.Store, error) { return st, nil },
		Lease: func(context.Context, *config.Config, *store.Store) (lease.Lease, error) {
			return nil, errors.New("no lease in this test")
		},
	}
	checks, _ := storeAndLease(t.Context(), cfg, "", b, slog.New(slog.DiscardHandler))
	rep, err := Run(t.Context(), checks, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := rep.Result("store.pubsub")
	if !ok {
		t.Fatalf("no store.pubsub check among %s", ids(rep))
	}
	if r.Status != StatusFail {
		t.Fatalf("store.pubsub = %s %q; want FAIL for org b's %s, 80h old", r.Status, r.Message, apiStream)
	}
	for _, want := range []string{"org=b:pubsub:" + apiStream, "orgs[1].sources.pubsub.replay_lost", "pubsub:/event/Order__e", "orgs[0].sources.pubsub.age_warning"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("message %q lacks %q", r.Message, want)
		}
	}
	if strings.Contains(r.Message, "org b, key pubsub:") {
		t.Errorf("message %q has org b read an unprefixed key: only the first org falls back to them", r.Message)
	}
	if strings.Contains(r.Message, "90h") {
		t.Errorf("message %q ages the unprefixed %s that org a's own key hides", r.Message, loginStream)
	}
	details := strings.Join(r.Details, "\n")
	for _, want := range []string{"org=a:pubsub:" + loginStream, "org=b:pubsub:" + loginStream} {
		if !strings.Contains(details, want) {
			t.Errorf("details %q lack %q", details, want)
		}
	}
}
