package loki

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// cancelAfterAnswer passes the request on and, once the answer's status and headers are in,
// ends the push's context (the run's deadline passing the instant the answer arrives).
type cancelAfterAnswer struct {
	next   http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelAfterAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	c.cancel()
	return resp, err
}

// TestAnswerArrivingAsTheContextEndsIsClassified: an answer in the client's hands says what
// became of the request, however soon after it the push's context ends. A 204 is an acceptance
// (reported as not delivered, the entries were pushed again by the next run: duplicates), a
// single entry's 400 a rejection for the reason it names, a 503 a refusal; none is in doubt.
func TestAnswerArrivingAsTheContextEndsIsClassified(t *testing.T) {
	cases := []struct {
		name  string
		n     int
		srv   simloki.Options
		setup func(srv *simloki.Server, es []Entry)
		check func(t *testing.T, res Result, srv *simloki.Server, es []Entry)
	}{
		{
			name:  "204 is an acceptance",
			n:     10,
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry) { wantAllAccepted(t, res, srv, es) },
		},
		{
			name: "400 to one entry is its rejection",
			n:    1,
			srv:  simloki.Options{RejectOldSamplesMaxAge: time.Hour},
			setup: func(_ *simloki.Server, es []Entry) {
				es[0].Timestamp = time.Now().Add(-2 * time.Hour)
			},
			check: func(t *testing.T, res Result, _ *simloki.Server, es []Entry) {
				wantRejected(t, res, es, []int{0}, ReasonTooOld, http.StatusBadRequest, "too old")
			},
		},
		{
			name:  "503 is a refusal",
			n:     10,
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(1, http.StatusServiceUnavailable, "") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry) {
				wantNoneDelivered(t, res, srv, es, ErrUnavailable)
				var se *StatusError
				if !errors.As(res.Err, &se) || se.StatusCode != http.StatusServiceUnavailable || !errors.Is(res.Err, context.Canceled) {
					t.Fatalf("err %v, want the 503 and the context's end", res.Err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := simloki.New(tc.srv)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := newClient(t, srv, func(o *Options) {
				o.Limits = Limits{MaxAge: -1} // the receiver is stricter than configured: only its answer tells
				o.Transport = cancelAfterAnswer{next: srv.Transport(), cancel: cancel}
			})
			es := batch(tc.n)
			if tc.setup != nil {
				tc.setup(srv, es)
			}
			res := c.Push(ctx, es)
			tc.check(t, res, srv, es)
			if res.InDoubt != 0 || res.Requests != 1 {
				t.Fatalf("in doubt %d, requests %d; want an answered request, not in doubt, not retried", res.InDoubt, res.Requests)
			}
			checkResultConsistent(t, res, es)
		})
	}
}

// refusalReadInPart returns a client whose push is answered 400 and whose context ends after
// the status arrived, before the rest of the body (the refusal's reason) did.
func refusalReadInPart(t *testing.T) (*Client, context.Context) {
	t.Helper()
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("entry for stream '{job=\"sf2loki\"}' "))
		w.(http.Flusher).Flush()
		select { // the rest of the body comes too late
		case <-r.Context().Done():
		case <-release:
		}
		_, _ = w.Write([]byte("has timestamp too old: …\n"))
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) }) // before the server closes: its handler is waiting
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := New(Options{URL: ts.URL + simloki.PushPath, Logger: quietLogger,
		Transport: cancelAfterAnswer{next: cleanhttp.DefaultTransport(), cancel: cancel}})
	if err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

// TestRefusalReadInPartIsHeld: the context ends after a 400's status arrived but before its
// body did. The body names the refused entry's reason; read in part it could name a wrong one
// (a too-old entry taken for a bad request is dropped instead of re-stamped), so the entry is
// held for the next run, which will read the whole answer.
func TestRefusalReadInPartIsHeld(t *testing.T) {
	c, ctx := refusalReadInPart(t)
	es := batch(1)
	res := c.Push(ctx, es)
	if len(res.Rejected) != 0 || len(res.NotDelivered) != 1 || !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("rejected %+v, not delivered %v, err %v; want the entry held as unavailable", res.Rejected, res.NotDelivered, res.Err)
	}
	if !strings.Contains(res.Err.Error(), "HTTP 400") {
		t.Fatalf("err %v, want it to quote the 400", res.Err)
	}
}

// loseAnswer passes every request on to the receiver and loses the answer to the n-th (the
// connection broke once the request was written): the receiver stored its entries, the client
// never hears so.
type loseAnswer struct {
	next http.RoundTripper
	n    int
	seen int
}

func (l *loseAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if l.seen++; l.seen != l.n || err != nil {
		return resp, err
	}
	_ = resp.Body.Close()
	return nil, errors.New("connection reset by peer")
}

// TestInDoubtIndexesNameTheEntriesOfTheUnansweredRequest: of a push's entries not delivered,
// InDoubtIndexes names those of the request written and never answered, by their position in
// the pushed slice, and not those the push never sent after it.
func TestInDoubtIndexesNameTheEntriesOfTheUnansweredRequest(t *testing.T) {
	srv := simloki.Start(t, simloki.Options{})
	c, err := New(Options{URL: srv.PushURL(), Logger: quietLogger, MaxAttempts: 1, MaxEntriesPerRequest: 10,
		Transport: &loseAnswer{next: cleanhttp.DefaultTransport(), n: 2}})
	if err != nil {
		t.Fatal(err)
	}
	// Two streams interleaved: the requests hold API's entries (odd positions), then Login's.
	es := batchTwoStreams(40)
	res := c.Push(context.Background(), es)
	checkResultConsistent(t, res, es)
	var want []int
	for i := 21; i < 40; i += 2 { // API's second request
		want = append(want, i)
	}
	if len(res.Accepted) != 10 || len(res.NotDelivered) != 30 || res.InDoubt != 10 || !slices.Equal(res.InDoubtIndexes, want) {
		t.Fatalf("accepted %d, not delivered %d, in doubt %d at %v; want 10, 30, and 10 at %v",
			len(res.Accepted), len(res.NotDelivered), res.InDoubt, res.InDoubtIndexes, want)
	}
	if n := srv.Count(); n != 20 {
		t.Fatalf("receiver holds %d entries, want the 20 of the first two requests", n)
	}
}
