package loki

import (
	"context"
	"net/http"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// hostNow is this host's clock in the tests below; the receivers' clocks are set from it.
var hostNow = time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)

// dateHeader rewrites (value set) or removes (value "") the Date header of every answer.
type dateHeader struct {
	rt    http.RoundTripper
	value string
}

func (d dateHeader) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.rt.RoundTrip(req)
	if resp != nil {
		resp.Header.Del("Date")
		if d.value != "" {
			resp.Header.Set("Date", d.value)
		}
	}
	return resp, err
}

// TestResultCarriesTheReceiversClock: the receiver's clock runs 15 minutes ahead of this
// host's. The push's result states the receiver's time from the Date header of its answer (1 s
// resolution) and the offset from this host's clock when the answer arrived, in process and
// over real HTTP (where net/http would otherwise date the answer with this host's clock),
// whatever the answer: an acceptance or a refusal.
func TestResultCarriesTheReceiversClock(t *testing.T) {
	ahead := 15 * time.Minute
	recvNow := func() time.Time { return hostNow.Add(ahead) }
	wantServer := hostNow.Add(ahead).Truncate(time.Second)
	wantOffset := wantServer.Add(500 * time.Millisecond).Sub(hostNow) // the second's middle
	ok := Entry{Labels: lbl("job", "x"), Timestamp: hostNow, Line: "ok"}
	refused := Entry{Labels: lbl("job", "x"), Timestamp: recvNow().Add(-8 * 24 * time.Hour), Line: "old"}
	inProcess := simloki.New(simloki.Options{Now: recvNow})
	overHTTP := simloki.Start(t, simloki.Options{Now: recvNow})
	for _, tc := range []struct {
		name    string
		mod     func(*Options)
		entries []Entry
	}{
		{"in process, accepted", nil, []Entry{ok}},
		// Limits turned off on the client: the receiver refuses the entry itself.
		{"in process, refused", func(o *Options) { o.Limits.MaxAge = -1 }, []Entry{refused}},
		{"over HTTP", func(o *Options) { o.URL, o.Transport = overHTTP.PushURL(), nil }, []Entry{ok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, inProcess, func(o *Options) {
				o.Now = func() time.Time { return hostNow }
				if tc.mod != nil {
					tc.mod(o)
				}
			})
			res := c.Push(context.Background(), tc.entries)
			if res.Requests == 0 {
				t.Fatalf("nothing was sent: %+v", res)
			}
			if !res.ServerTime.Equal(wantServer) || res.ClockOffset != wantOffset {
				t.Fatalf("receiver's clock %s offset %s, want %s offset %s", res.ServerTime, res.ClockOffset, wantServer, wantOffset)
			}
		})
	}
}

// TestNoDateMeansNoClockEstimate: an answer without a Date header, or with one that does not
// parse, says nothing about the receiver's clock: the result has no estimate (zero ServerTime
// and offset), whatever this host's clock reads.
func TestNoDateMeansNoClockEstimate(t *testing.T) {
	for _, date := range []string{"", "yesterday", "0"} {
		t.Run("Date "+date, func(t *testing.T) {
			srv := simloki.New(simloki.Options{Now: func() time.Time { return hostNow.Add(time.Hour) }})
			c := newClient(t, srv, func(o *Options) {
				o.Transport = dateHeader{rt: srv.Transport(), value: date}
				o.Now = func() time.Time { return hostNow }
			})
			res := c.Push(context.Background(), []Entry{{Labels: lbl("job", "x"), Timestamp: hostNow, Line: "a"}})
			if !res.OK() {
				t.Fatalf("push: %+v", res)
			}
			if !res.ServerTime.IsZero() || res.ClockOffset != 0 {
				t.Fatalf("an estimate from Date %q: %s offset %s", date, res.ServerTime, res.ClockOffset)
			}
		})
	}
}

// TestClientChecksTimestampsOnTheReceiversClock: given the receiver's clock (this host's plus
// the offset WithClockOffset carries), the client refuses before sending what that clock
// refuses, and sends what it accepts although this host's clock would refuse it.
func TestClientChecksTimestampsOnTheReceiversClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		ts     time.Duration // the entry's time, from this host's clock
		want   Reason        // "": accepted by the receiver
	}{
		{"receiver behind: too new for it", -15 * time.Minute, 0, ReasonTooNew},
		{"receiver ahead: new for this host, not for it", 15 * time.Minute, 20 * time.Minute, ""},
		{"receiver ahead: too old for it", 15 * time.Minute, -7*24*time.Hour + 10*time.Minute, ReasonTooOld},
		{"receiver behind: old for this host, not for it", -15 * time.Minute, -7*24*time.Hour - 10*time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := simloki.New(simloki.Options{Now: func() time.Time { return hostNow.Add(tc.offset) }})
			c := newClient(t, srv, func(o *Options) { o.Now = func() time.Time { return hostNow } })
			ctx := WithClockOffset(context.Background(), tc.offset)
			res := c.Push(ctx, []Entry{{Labels: lbl("job", "x"), Timestamp: hostNow.Add(tc.ts), Line: "a"}})
			switch {
			case tc.want == "" && !res.OK():
				t.Fatalf("refused: %+v", res.Rejected)
			case tc.want != "" && (len(res.Rejected) != 1 || res.Rejected[0].Reason != tc.want || res.Rejected[0].Status != 0 || res.Requests != 0):
				t.Fatalf("want a refusal by the client (%s, no request), got %+v after %d requests", tc.want, res.Rejected, res.Requests)
			}
		})
	}
}

// TestOnlyTheReceiversVerdictsStateItsClock: the Date of an answer that is not the receiver's
// verdict on the entries (a 5xx, a 429, a 401 or a redirect, which a proxy in front of it may
// write with its own clock) is not taken for the receiver's clock; a 204 or a 400 is.
func TestOnlyTheReceiversVerdictsStateItsClock(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusUnauthorized} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := simloki.New(simloki.Options{Now: func() time.Time { return hostNow.Add(time.Hour) }})
			srv.FailNext(100, status, "")
			c := newClient(t, srv, func(o *Options) {
				o.Now = func() time.Time { return hostNow }
				o.MaxAttempts = 1
			})
			res := c.Push(context.Background(), []Entry{{Labels: lbl("job", "x"), Timestamp: hostNow, Line: "a"}})
			if res.OK() || res.Requests == 0 {
				t.Fatalf("push: %+v; want it answered %d", res, status)
			}
			if !res.ServerTime.IsZero() || res.ClockOffset != 0 {
				t.Fatalf("an estimate from a %d: %s offset %s", status, res.ServerTime, res.ClockOffset)
			}
		})
	}
}
