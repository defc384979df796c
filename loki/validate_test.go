package loki

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// TestPredictableRejectionsNeverReachTheReceiver: one entry among 2 000 breaks a rule the
// client knows (Loki's defaults on both sides). The client refuses it itself under Loki's
// reason: the receiver never sees it, the push takes exactly the requests of the 1 999 good
// entries alone, nothing is split or sent twice, and the receiver holds each good entry once.
func TestPredictableRejectionsNeverReachTheReceiver(t *testing.T) {
	const n, bad = 2000, 1234
	cases := []struct {
		name   string
		reason Reason
		limits Limits
		srv    simloki.Options
		spoil  func(e *Entry)
	}{
		{name: "older than max age", reason: ReasonTooOld,
			spoil: func(e *Entry) { e.Timestamp = time.Now().Add(-8 * 24 * time.Hour) }},
		{name: "newer than the grace period", reason: ReasonTooNew,
			spoil: func(e *Entry) { e.Timestamp = time.Now().Add(time.Hour) }},
		{name: "structured metadata too large", reason: ReasonMetadataTooLarge,
			spoil: func(e *Entry) { e.Metadata = []Label{{Name: "big", Value: strings.Repeat("m", 70<<10)}} }},
		{name: "too many structured metadata pairs", reason: ReasonMetadataTooMany,
			spoil: func(e *Entry) {
				e.Metadata = nil
				for i := range 130 {
					e.Metadata = append(e.Metadata, Label{Name: fmt.Sprint("k", i), Value: "v"})
				}
			}},
		{name: "structured metadata on a receiver without it", reason: ReasonMetadataDisallowed,
			limits: Limits{DisallowStructuredMetadata: true}, srv: simloki.Options{DisallowStructuredMetadata: true},
			spoil: func(e *Entry) { e.Metadata = []Label{{Name: "user_id", Value: "005"}} }},
		{name: "label value too long", reason: ReasonLabelValueTooLong,
			spoil: func(e *Entry) { e.Labels = e.Labels.With(Label{Name: "event_type", Value: strings.Repeat("x", 3000)}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es := batch(n)
			for i := range es {
				es[i].Metadata = nil // the disallowed case: only the bad entry carries any
			}
			good := append(append([]Entry{}, es[:bad]...), es[bad+1:]...)
			base := simloki.New(tc.srv)
			want := newClient(t, base, func(o *Options) { o.Limits = tc.limits }).Push(context.Background(), good)
			if !want.OK() {
				t.Fatalf("baseline push: %+v", want.Rejected)
			}

			tc.spoil(&es[bad])
			srv := simloki.New(tc.srv)
			res := newClient(t, srv, func(o *Options) { o.Limits = tc.limits }).Push(context.Background(), es)
			wantRejected(t, res, es, []int{bad}, tc.reason, 0, "")
			wantAcceptedExcept(t, res, srv, es, bad)
			if res.Requests != want.Requests || res.Splits != 0 || res.Resent != 0 {
				t.Fatalf("%d requests (%d without the bad entry), %d splits, %d re-sent; want no extra request", res.Requests, want.Requests, res.Splits, res.Resent)
			}
			if srv.RejectedCount("") != 0 || len(srv.Duplicates()) != 0 {
				t.Fatalf("the receiver refused %d entries and saw %d duplicates; want none", srv.RejectedCount(""), len(srv.Duplicates()))
			}
		})
	}
}

// TestUnpredictableRejectionLosesNothing: the receiver enforces a rule the client does not
// know (a 1 000-byte max_line_size). The 400 body is no account of which entry failed, so the
// client splits: the bad entry is refused under the reason read from its own answer, every
// other entry is stored, and the entries sent again (Loki had stored them the first time) are
// counted.
func TestUnpredictableRejectionLosesNothing(t *testing.T) {
	const n, bad = 2000, 1234
	srv := simloki.New(simloki.Options{MaxLineBytes: 1000})
	es := batch(n)
	es[bad].Line = strings.Repeat("x", 2000)
	res := newClient(t, srv, nil).Push(context.Background(), es)
	wantRejected(t, res, es, []int{bad}, ReasonLineTooLong, 400, "Max entry size")
	wantAcceptedExcept(t, res, srv, es, bad)
	dups := len(srv.Duplicates())
	if dups == 0 || res.Resent < dups || res.Splits == 0 {
		t.Fatalf("re-sent %d, splits %d, duplicates at the receiver %d: want the re-sends counted", res.Resent, res.Splits, dups)
	}
	t.Logf("1 unpredictable rejection in %d entries: %d requests, %d splits, %d entries re-sent, %d exact duplicates at the receiver",
		n, res.Requests, res.Splits, res.Resent, dups)
}

// TestClassifyRejectionNamesLokisReasons reads the reason from the receiver's answer to one
// entry, for each rule the receiver enforces (the client's own checks turned off).
func TestClassifyRejectionNamesLokisReasons(t *testing.T) {
	now := time.Now()
	off := Limits{MaxAge: -1, CreationGracePeriod: -1, MaxMetadataBytes: -1, MaxMetadataEntries: -1}
	entry := func(mod func(*Entry)) Entry {
		e := Entry{Timestamp: now, Labels: lbl("job", "classify"), Line: "line"}
		if mod != nil {
			mod(&e)
		}
		return e
	}
	cases := []struct {
		reason Reason
		srv    simloki.Options
		before []Entry
		e      Entry
	}{
		{ReasonTooOld, simloki.Options{}, nil, entry(func(e *Entry) { e.Timestamp = now.Add(-8 * 24 * time.Hour) })},
		{ReasonTooNew, simloki.Options{}, nil, entry(func(e *Entry) { e.Timestamp = now.Add(time.Hour) })},
		{ReasonLineTooLong, simloki.Options{MaxLineBytes: 10}, nil, entry(func(e *Entry) { e.Line = "a line longer than ten bytes" })},
		{ReasonMetadataDisallowed, simloki.Options{DisallowStructuredMetadata: true}, nil, entry(func(e *Entry) { e.Metadata = []Label{{Name: "a", Value: "b"}} })},
		{ReasonMetadataTooLarge, simloki.Options{MaxMetadataBytes: 4}, nil, entry(func(e *Entry) { e.Metadata = []Label{{Name: "a", Value: "bcdef"}} })},
		{ReasonMetadataTooMany, simloki.Options{MaxMetadataEntries: 1}, nil, entry(func(e *Entry) { e.Metadata = []Label{{Name: "a", Value: "b"}, {Name: "c", Value: "d"}} })},
		{ReasonLabelValueTooLong, simloki.Options{MaxLabelValueBytes: 3}, nil, entry(nil)},
		{ReasonTooFarBehind, simloki.Options{}, []Entry{entry(nil)}, entry(func(e *Entry) { e.Timestamp = now.Add(-2 * time.Hour) })},
		{ReasonBadRequest, simloki.Options{}, nil, entry(func(e *Entry) { e.Line = "poison" })},
	}
	for _, tc := range cases {
		t.Run(string(tc.reason), func(t *testing.T) {
			srv := simloki.New(tc.srv)
			srv.RejectEntries(func(e simloki.Entry) bool { return e.Line == "poison" }, "a_rule_the_client_does_not_know")
			c := newClient(t, srv, func(o *Options) { o.Limits = off; o.MaxLineBytes = -1 })
			if len(tc.before) > 0 {
				if res := c.Push(context.Background(), tc.before); !res.OK() {
					t.Fatalf("setup push: %+v", res)
				}
			}
			res := c.Push(context.Background(), []Entry{tc.e})
			if len(res.Rejected) != 1 || res.Rejected[0].Reason != tc.reason || res.Rejected[0].Status != 400 {
				t.Fatalf("rejected %+v, want one 400 with reason %s", res.Rejected, tc.reason)
			}
		})
	}
}

// TestOldestAcceptableReadsLokisCutoff: the cutoff of Loki's ingester and distributor messages,
// and none from a body that states none.
func TestOldestAcceptableReadsLokisCutoff(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"entry with timestamp 2026-10-07 01:35:32.405 +0000 UTC ignored, reason: 'entry too far behind, entry timestamp is: 2026-10-07T01:35:32Z, oldest acceptable timestamp is: 2026-10-07T03:23:59Z',\nuser 'x', total ignored: 1 out of 1 for stream: {a=\"b\"}", "2026-10-07T03:23:59Z"},
		{"entry for stream '{a=\"b\"}' has timestamp too old: 2026-01-01T00:00:00Z, oldest acceptable timestamp is: 2026-06-23T12:00:00.5Z", "2026-06-23T12:00:00.5Z"},
		{"poisoned", ""},
	} {
		body, want := tc.body, tc.want
		got, ok := OldestAcceptable(body)
		if want == "" {
			if ok {
				t.Errorf("%q: got %s, want none", body, got)
			}
			continue
		}
		if w, _ := time.Parse(time.RFC3339Nano, want); !ok || !got.Equal(w) {
			t.Errorf("%q: got %s %v, want %s", body, got, ok, want)
		}
	}
}

// TestTimestampLimitsHoldToTheNanosecond: the client's bounds on a timestamp are Loki's, to the
// nanosecond: an entry exactly max age old or exactly the grace period ahead is accepted, one
// nanosecond beyond either is refused before it is sent, with client and receiver on the same
// clock. A grace period reaching past the newest Unix-nanosecond time refuses nothing for being
// too new.
func TestTimestampLimitsHoldToTheNanosecond(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 4, 5, 123456789, time.UTC)
	clock := func() time.Time { return now }
	lbls := lbl("job", "sf2loki", "source", "eventlogfile")
	at := func(ts time.Time, ref uint64) Entry {
		return Entry{Timestamp: ts, Labels: lbls, Line: fmt.Sprintf(`{"n":%d}`, ref), Ref: ref}
	}

	t.Run("Loki's defaults", func(t *testing.T) {
		oldest, newest := now.Add(-DefaultMaxAge), now.Add(DefaultCreationGracePeriod)
		es := []Entry{
			at(oldest.Add(-time.Nanosecond), 1),
			at(oldest, 2),
			at(now, 3),
			at(newest, 4),
			at(newest.Add(time.Nanosecond), 5),
		}
		srv := simloki.New(simloki.Options{Now: clock})
		res := newClient(t, srv, func(o *Options) { o.Now = clock }).Push(context.Background(), es)
		if len(res.Rejected) != 2 {
			t.Fatalf("rejected %+v; want the first and the last entry", res.Rejected)
		}
		for k, want := range []struct {
			idx    int
			reason Reason
		}{{0, ReasonTooOld}, {4, ReasonTooNew}} {
			if r := res.Rejected[k]; r.Index != want.idx || r.Reason != want.reason || r.Status != 0 {
				t.Errorf("rejection %d = %+v; want index %d, reason %s, predicted (status 0)", k, r, want.idx, want.reason)
			}
		}
		wantAcceptedExcept(t, res, srv, es, 0, 4)
		if srv.RejectedCount("") != 0 {
			t.Fatalf("the receiver refused %d entries; want none sent that it refuses", srv.RejectedCount(""))
		}
	})

	t.Run("a grace period past the newest nanosecond", func(t *testing.T) {
		const centuries = 280 * 365 * 24 * time.Hour
		es := []Entry{at(now, 1), at(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), 2)}
		srv := simloki.New(simloki.Options{Now: clock, CreationGracePeriod: centuries})
		res := newClient(t, srv, func(o *Options) {
			o.Now = clock
			o.Limits = Limits{CreationGracePeriod: centuries}
		}).Push(context.Background(), es)
		if len(res.Rejected) != 0 {
			t.Fatalf("rejected %+v; want both entries accepted", res.Rejected)
		}
		wantAcceptedExcept(t, res, srv, es)
	})
}
