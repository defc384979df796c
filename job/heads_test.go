package job

import (
	"slices"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

func TestStreamIDKeysByDestination(t *testing.T) {
	l := loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}, loki.Label{Name: "event_type", Value: "Login"})
	if got := StreamID("", l); got != `{event_type="Login", job="sf2loki"}` {
		t.Fatalf("StreamID = %q", got)
	}
	if StreamID("eu", l) == StreamID("us", l) || StreamID("eu", l) == StreamID("", l) {
		t.Fatal("one stream at two destinations must have two heads")
	}
}

// TestHeadsLedger: heads load from the document's counters, only rise, and the commit writes
// exactly what changed; forgotten heads are deleted from the document.
func TestHeadsLedger(t *testing.T) {
	h := loadHeads(map[string]store.Counter{
		HeadCounterPrefix + "a": {Value: 100},
		HeadCounterPrefix + "b": {Value: 200},
		"egress_bytes":          {Value: 7, Window: "2026-06-30"},
	}, 10)
	if ns, ok := h.get("a"); !ok || ns != 100 {
		t.Fatalf("a = %d %v", ns, ok)
	}
	if _, ok := h.get("egress_bytes"); ok {
		t.Fatal("a counter that is not a head was loaded as one")
	}
	h.raise("a", 50) // lower: no change
	h.raise("b", 250)
	h.raise("c", 300)
	set, del := h.change()
	if len(del) != 0 || len(set) != 2 || set[HeadCounterPrefix+"b"].Value != 250 || set[HeadCounterPrefix+"c"].Value != 300 {
		t.Fatalf("change: set %v del %v", set, del)
	}
	h.committed()
	if set, del := h.change(); len(set) != 0 || len(del) != 0 {
		t.Fatalf("after commit: set %v del %v", set, del)
	}
}

// TestHeadsPruneExpiredThenOldest: heads that can no longer refuse anything go first; above
// the bound, the oldest heads are forgotten and deleted from the document.
func TestHeadsPruneExpiredThenOldest(t *testing.T) {
	stored := map[string]store.Counter{}
	for i, id := range []string{"expired", "s1", "s2", "s3", "s4"} {
		stored[HeadCounterPrefix+id] = store.Counter{Value: int64(i * 100)}
	}
	h := loadHeads(stored, 2)
	h.raise("s5", 500)
	h.prune(0) // "expired" has head 0
	set, del := h.change()
	if !slices.Equal(del, []string{HeadCounterPrefix + "expired", HeadCounterPrefix + "s1", HeadCounterPrefix + "s2", HeadCounterPrefix + "s3"}) {
		t.Fatalf("deleted %v", del)
	}
	if len(set) != 1 || set[HeadCounterPrefix+"s5"].Value != 500 {
		t.Fatalf("set %v", set)
	}
	if _, ok := h.get("s4"); !ok || len(h.ns) != 2 {
		t.Fatalf("kept %v, want s4 and s5", h.ns)
	}
}

// TestDecide covers each rule with Loki's defaults: 7 days max age, 10 minutes grace, a 1 hour
// window (re-stamped when more than 45 minutes behind the head).
func TestDecide(t *testing.T) {
	d := newOrderer(OrderingOptions{}, nil, nil)
	now := time.Date(2026, 6, 30, 14, 37, 0, 0, time.UTC)
	head := now.Add(-30 * time.Minute)
	cases := []struct {
		name   string
		t      time.Time
		known  bool
		want   time.Time
		reason loki.Reason
	}{
		{"new stream, recent", now.Add(-3 * time.Hour), false, now.Add(-3 * time.Hour), ""},
		{"inside the window", head.Add(-40 * time.Minute), true, head.Add(-40 * time.Minute), ""},
		{"ahead of the head", head.Add(time.Minute), true, head.Add(time.Minute), ""},
		{"near the window's edge", head.Add(-50 * time.Minute), true, head, restampBehind},
		{"hours behind", head.Add(-3 * time.Hour), true, head, restampBehind},
		{"older than max age", now.Add(-8 * 24 * time.Hour), false, time.Date(2026, 6, 23, 16, 0, 0, 0, time.UTC), restampOld},
		{"older than max age, head newer than the target", now.Add(-8 * 24 * time.Hour), true, head, restampOld},
		{"in the last hour of max age", now.Add(-7*24*time.Hour + 30*time.Minute), false, time.Date(2026, 6, 23, 16, 0, 0, 0, time.UTC), restampOld},
		{"beyond the grace period", now.Add(11 * time.Minute), true, now, restampNew},
		{"inside the grace period", now.Add(9 * time.Minute), true, now.Add(9 * time.Minute), ""},
	}
	for _, tc := range cases {
		got, reason := d.decide(now, tc.t, head.UnixNano(), tc.known)
		if !got.Equal(tc.want) || reason != tc.reason {
			t.Errorf("%s: %s %q, want %s %q", tc.name, got, reason, tc.want, tc.reason)
		}
		if reason == "" {
			continue
		}
		// Whatever moved lands where Loki accepts it, even against a receiver whose head is
		// up to 45 minutes above the one the job knows.
		if got.Before(now.Add(-d.lim.MaxAge)) || got.After(now.Add(d.lim.CreationGracePeriod)) ||
			(tc.known && got.Before(head.Add(45*time.Minute-d.lim.OutOfOrderWindow))) {
			t.Errorf("%s: %s is outside what the receiver accepts", tc.name, got)
		}
	}
}

// TestRetryStamp: an entry the receiver refused for its timestamp goes again a little above the
// cutoff the receiver stated (the clock when it states none, or refuses it as too new), and
// then, for every reason alike, just above its stream's head when that stamp is not above it:
// the push that was refused may have just raised the head above the receiver's cutoff. Entries
// pushed again together each take a nanosecond of their own.
func TestRetryStamp(t *testing.T) {
	now := time.Date(2026, 6, 30, 14, 37, 0, 0, time.UTC)
	l := loki.NewLabels(loki.Label{Name: "event_type", Value: "API"})
	refused := func(reason loki.Reason, cutoff time.Time) loki.Rejection {
		detail := "entry for stream '{event_type=\"API\"}' refused"
		if !cutoff.IsZero() {
			detail += ", oldest acceptable timestamp is: " + cutoff.Format(time.RFC3339)
		}
		return loki.Rejection{Reason: reason, Status: 400, Detail: detail}
	}
	ageCutoff := now.Add(-3 * 24 * time.Hour) // a receiver whose max age is 3 days, not 7
	cases := []struct {
		name string
		rej  loki.Rejection
		head time.Time // zero: unknown
		want time.Time
	}{
		{"too old, no head", refused(loki.ReasonTooOld, ageCutoff), time.Time{}, ageCutoff.Add(time.Hour)},
		{"too old, head below the stamp", refused(loki.ReasonTooOld, ageCutoff), ageCutoff.Add(30 * time.Minute), ageCutoff.Add(time.Hour)},
		{"too old, head hours above the cutoff", refused(loki.ReasonTooOld, ageCutoff), ageCutoff.Add(4 * time.Hour), ageCutoff.Add(4*time.Hour + 1)},
		{"too far behind a head the job does not know", refused(loki.ReasonTooFarBehind, now.Add(-2*time.Hour)), time.Time{}, now.Add(-105 * time.Minute)},
		{"too far behind, head above the stamp", refused(loki.ReasonTooFarBehind, now.Add(-5*time.Hour)), now.Add(-time.Hour), now.Add(-time.Hour + 1)},
		{"too far behind, no cutoff stated", refused(loki.ReasonTooFarBehind, time.Time{}), now.Add(-time.Hour), now},
		{"too new", refused(loki.ReasonTooNew, time.Time{}), now.Add(-time.Hour), now},
	}
	for _, tc := range cases {
		var stored map[string]store.Counter
		if !tc.head.IsZero() {
			stored = map[string]store.Counter{HeadCounterPrefix + StreamID("", l): {Value: tc.head.UnixNano()}}
		}
		d := newOrderer(OrderingOptions{}, stored, nil)
		m := moves{}
		first, second := d.retryStamp(now, tc.rej, 0, l, m), d.retryStamp(now, tc.rej, 0, l, m)
		if !first.Equal(tc.want) || !second.Equal(tc.want.Add(1)) {
			t.Errorf("%s: pushed again at %s and %s, want %s and a nanosecond later", tc.name, first, second, tc.want)
		}
	}
}

// TestRestampKeepsTheFirstEventTime: a re-stamp adds event_time once, without touching the
// entry's metadata slice (shared with the source), and a second move keeps the true time.
func TestRestampKeepsTheFirstEventTime(t *testing.T) {
	orig := time.Date(2026, 6, 30, 10, 0, 0, 123, time.UTC)
	md := []loki.Label{{Name: "user_id", Value: "005"}}
	e := loki.Entry{Timestamp: orig, Metadata: md[:1:1]}
	restamp(&e, orig.Add(3*time.Hour))
	restamp(&e, orig.Add(5*time.Hour))
	if !e.Timestamp.Equal(orig.Add(5*time.Hour)) || len(e.Metadata) != 2 || e.Metadata[1] != (loki.Label{Name: EventTimeMetadata, Value: "2026-06-30T10:00:00.000000123Z"}) {
		t.Fatalf("entry %+v", e)
	}
	if len(md) != 1 {
		t.Fatal("the source's metadata slice was changed")
	}
}

// TestPushedRaisesEachStreamToItsNewest: after a push, every stream's head is the newest time of
// its entries the receiver may hold: accepted, or sent without an answer (in doubt), over runs
// of one stream and streams interleaved. Rejected entries, entries answered without being
// stored and entries past the outcomes raise nothing.
func TestPushedRaisesEachStreamToItsNewest(t *testing.T) {
	a := loki.NewLabels(loki.Label{Name: "event_type", Value: "API"})
	b := loki.NewLabels(loki.Label{Name: "event_type", Value: "Login"})
	c := loki.NewLabels(loki.Label{Name: "event_type", Value: "URI"})
	at := func(l loki.Labels, s int64) loki.Entry { return loki.Entry{Labels: l, Timestamp: time.Unix(s, 0)} }
	es := []loki.Entry{at(a, 10), at(a, 30), at(a, 20), at(b, 5), at(a, 40), at(b, 7), at(b, 90), at(b, 80), at(c, 60), at(c, 50), at(c, 70)}
	res := loki.Result{
		Outcomes: []loki.Outcome{loki.Accepted, loki.Accepted, loki.NotDelivered, loki.Accepted, loki.NotDelivered, loki.Accepted,
			loki.Rejected, loki.NotDelivered, loki.Accepted, loki.Accepted},
		InDoubtIndexes: []int{4}, // a at 40; b at 80 was answered and not stored
	}
	d := newOrderer(OrderingOptions{}, nil, []string{""})
	d.pushed(0, es, &res)
	for _, w := range []struct {
		l    loki.Labels
		want int64
		ok   bool
	}{{a, 40, true}, {b, 7, true}, {c, 60, true}} {
		ns, ok := d.heads.get(StreamID("", w.l))
		if ok != w.ok || (ok && ns != time.Unix(w.want, 0).UnixNano()) {
			t.Errorf("%s: head %d (%v), want %ds (%v)", w.l, ns, ok, w.want, w.ok)
		}
	}
}

// TestPlanLooksUpEachEntrysOwnStream: the plan decides each entry against its own stream's head
// at its own destination, over runs of one stream, streams interleaved, the same labels at two
// destinations and skips between them. The entries it moves take the nanoseconds above the
// head, one each, in push order.
func TestPlanLooksUpEachEntrysOwnStream(t *testing.T) {
	now := time.Date(2026, 6, 30, 14, 37, 0, 0, time.UTC)
	head := now.Add(-30 * time.Minute)
	a := loki.NewLabels(loki.Label{Name: "event_type", Value: "API"})
	b := loki.NewLabels(loki.Label{Name: "event_type", Value: "Login"})
	// a's head is known at destination 0 only, b's nowhere.
	d := newOrderer(OrderingOptions{}, map[string]store.Counter{
		HeadCounterPrefix + StreamID("", a): {Value: head.UnixNano()},
	}, []string{"", "eu"})
	behind := head.Add(-3 * time.Hour) // too far behind a's head, fine for a stream without one
	at0, at1 := &keyState{dest: 0}, &keyState{dest: 1}
	it := func(ks *keyState, l loki.Labels, skip bool) item {
		return item{ks: ks, rec: source.Record{Entry: loki.Entry{Labels: l, Timestamp: behind}, Skip: skip}}
	}
	items := []item{
		it(at0, a, false), it(at0, a, false), it(at0, b, false), it(at0, a, false),
		it(at1, a, false), it(at0, a, true), it(at0, a, false), it(at1, b, false), it(at1, a, false),
	}
	want := []bool{true, true, false, true, false, false, true, false, false} // moved behind a's head
	plan := d.plan(now, items)
	if len(plan) != len(items) {
		t.Fatalf("plan of %d items for %d", len(plan), len(items))
	}
	var above time.Duration
	for i, w := range want {
		if w {
			above++
		}
		moved := plan[i].moved == restampBehind && items[i].rec.Entry.Timestamp.Equal(head.Add(above))
		kept := plan[i].moved == "" && items[i].rec.Entry.Timestamp.Equal(behind)
		if (w && !moved) || (!w && !kept) {
			t.Errorf("item %d (dest %d, %s, skip %v): moved %q to %s, want moved %v",
				i, items[i].ks.dest, items[i].rec.Entry.Labels, items[i].rec.Skip, plan[i].moved, items[i].rec.Entry.Timestamp, w)
		}
	}
}
