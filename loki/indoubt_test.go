package loki

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/hashicorp/go-cleanhttp"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// afterAttempt passes every request on and calls after(n) once the n-th attempt (from 1) has
// ended, before the next one starts: a test changes the receiver's faults between attempts.
type afterAttempt struct {
	next  http.RoundTripper
	after func(n int)
	n     int
}

func (a *afterAttempt) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	a.n++
	a.after(a.n)
	return resp, err
}

// wantStoredInDoubt checks that every entry the receiver holds is reported accepted or in
// doubt, never as simply not delivered: the job raises a stream's head only for those, and a
// head below what the receiver holds makes the next pushes land behind it.
func wantStoredInDoubt(t *testing.T, res Result, srv *simloki.Server, es []Entry) {
	t.Helper()
	byLine := make(map[string]int, len(es))
	for i, e := range es {
		byLine[e.Line] = i
	}
	for _, e := range srv.Entries() {
		i, ok := byLine[e.Line]
		if !ok {
			t.Fatalf("receiver holds %q, which was not pushed", e.Line)
		}
		if res.Outcomes[i] != Accepted && !slices.Contains(res.InDoubtIndexes, i) {
			t.Fatalf("entry %d is stored at the receiver but reported %s and not in doubt (in doubt: %v)", i, res.Outcomes[i], res.InDoubtIndexes)
		}
	}
}

// TestEntriesStayInDoubtOnceAnAttemptMayHaveStoredThem: the first attempt of a request is
// stored and its answer lost; every later attempt is answered without storing (a 5xx or 429
// until the tries run out, a 401, a 2xx that did not ingest, a 413 whose halves then get 5xx).
// The receiver holds every entry, so none may be reported as simply not delivered: each stays
// in doubt, the entries of halves never sent included, since no answer said they were stored.
func TestEntriesStayInDoubtOnceAnAttemptMayHaveStoredThem(t *testing.T) {
	cases := []struct {
		name     string
		sentinel error
		then     func(srv *simloki.Server) // the receiver's faults once the first answer is lost
	}{
		{name: "503 until the tries run out", sentinel: ErrUnavailable,
			then: func(srv *simloki.Server) { srv.FailNext(-1, http.StatusServiceUnavailable, "") }},
		{name: "429 until the tries run out, split to single entries", sentinel: ErrUnavailable,
			then: func(srv *simloki.Server) { srv.FailNext(-1, http.StatusTooManyRequests, "") }},
		{name: "401", sentinel: ErrAuth,
			then: func(srv *simloki.Server) { srv.FailNext(-1, http.StatusUnauthorized, "") }},
		{name: "260 not ingested", sentinel: ErrNotIngested,
			then: func(srv *simloki.Server) { srv.FailNext(-1, 260, "") }},
		{name: "404", sentinel: ErrUnexpectedStatus,
			then: func(srv *simloki.Server) { srv.FailNext(-1, http.StatusNotFound, "") }},
		{name: "413, then 503 to the first half", sentinel: ErrUnavailable,
			then: func(srv *simloki.Server) {
				srv.SetMaxBodyBytes(srv.Requests()[0].BodyBytes - 1) // the whole is too large, its halves are not
				srv.FailNext(-1, http.StatusServiceUnavailable, "")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := simloki.Start(t, simloki.Options{})
			run.DropResponses(1)
			tr := &afterAttempt{next: cleanhttp.DefaultTransport(), after: func(n int) {
				if n == 1 {
					tc.then(run.Server)
				}
			}}
			c := newClient(t, run.Server, func(o *Options) { o.URL, o.Transport, o.MaxAttempts = run.PushURL(), tr, 3 })
			es := batch(8)
			res := c.Push(context.Background(), es)
			checkResultConsistent(t, res, es)
			if len(res.NotDelivered) != len(es) || !errors.Is(res.Err, tc.sentinel) {
				t.Fatalf("not delivered %d of %d, err %v; want none delivered, %v", len(res.NotDelivered), len(es), res.Err, tc.sentinel)
			}
			if n := run.Count(); n != len(es) {
				t.Fatalf("receiver holds %d entries, want all %d of the first attempt", n, len(es))
			}
			wantStoredInDoubt(t, res, run.Server, es)
			if res.InDoubt != len(es) {
				t.Fatalf("in doubt %d, want all %d", res.InDoubt, len(es))
			}
		})
	}
}

// TestEntriesOfARefusedRequestStayInDoubtAfterItsSplit: Loki stores the valid entries of a
// request it answers 400; the halves it is split into are then answered 503 until the tries
// run out. The stored entries are in doubt, not simply not delivered.
func TestEntriesOfARefusedRequestStayInDoubtAfterItsSplit(t *testing.T) {
	run := simloki.Start(t, simloki.Options{})
	es := batch(8)
	bad := es[5].Line
	run.RejectEntries(func(e simloki.Entry) bool { return e.Line == bad }, "injected")
	tr := &afterAttempt{next: cleanhttp.DefaultTransport(), after: func(n int) {
		if n == 1 {
			run.RejectEntries(nil, "")
			run.FailNext(-1, http.StatusServiceUnavailable, "")
		}
	}}
	c := newClient(t, run.Server, func(o *Options) { o.URL, o.Transport, o.MaxAttempts = run.PushURL(), tr, 2 })
	res := c.Push(context.Background(), es)
	checkResultConsistent(t, res, es)
	if len(res.NotDelivered) != len(es) || res.Splits != 1 || !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("not delivered %d of %d, splits %d, err %v; want none delivered after one split", len(res.NotDelivered), len(es), res.Splits, res.Err)
	}
	if n := run.Count(); n != len(es)-1 {
		t.Fatalf("receiver holds %d entries, want the %d valid ones of the refused request", n, len(es)-1)
	}
	wantStoredInDoubt(t, res, run.Server, es)
}

// TestRefusalOfSeveralEntriesReadInPartIsInDoubt: a 400 answers a request of several entries
// and the push's context ends before its body is read. Loki stored the request's valid
// entries; the body would have said which were refused, so all are held in doubt.
func TestRefusalOfSeveralEntriesReadInPartIsInDoubt(t *testing.T) {
	c, ctx := refusalReadInPart(t)
	es := batch(4)
	res := c.Push(ctx, es)
	checkResultConsistent(t, res, es)
	if len(res.NotDelivered) != len(es) || !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("not delivered %d of %d, err %v; want all held as unavailable", len(res.NotDelivered), len(es), res.Err)
	}
	if res.InDoubt != len(es) {
		t.Fatalf("in doubt %d, want all %d: the receiver may hold the valid ones", res.InDoubt, len(es))
	}
}

// refuseAttempt passes every request on except the n-th (from 1), which fails as a refused
// connection would: nothing written.
type refuseAttempt struct {
	next http.RoundTripper
	n    int
	seen int
}

func (r *refuseAttempt) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.seen++; r.seen == r.n {
		return nil, errors.New("dial tcp: connect: connection refused")
	}
	return r.next.RoundTrip(req)
}

// TestAnsweredAttemptsLeaveNothingInDoubt: the first attempt is written and answered 503, the
// last one fails before anything is written. No attempt may have been stored, so nothing is in
// doubt: a head raised for entries the receiver does not hold moves later entries it would
// take as they are.
func TestAnsweredAttemptsLeaveNothingInDoubt(t *testing.T) {
	run := simloki.Start(t, simloki.Options{})
	run.FailNext(1, http.StatusServiceUnavailable, "")
	tr := &refuseAttempt{next: cleanhttp.DefaultTransport(), n: 2}
	c := newClient(t, run.Server, func(o *Options) { o.URL, o.Transport, o.MaxAttempts = run.PushURL(), tr, 2 })
	es := batch(8)
	res := c.Push(context.Background(), es)
	checkResultConsistent(t, res, es)
	if len(res.NotDelivered) != len(es) || res.Requests != 2 || !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("not delivered %d of %d after %d requests, err %v; want none delivered after 2", len(res.NotDelivered), len(es), res.Requests, res.Err)
	}
	if n := run.Count(); n != 0 || res.InDoubt != 0 {
		t.Fatalf("receiver holds %d entries, %d reported in doubt; want none of either", n, res.InDoubt)
	}
}
