package loki

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// retryAfterOn429 adds "Retry-After: secs" to every 429 the receiver answers (a gateway that
// paces its clients).
type retryAfterOn429 struct {
	next http.RoundTripper
	secs string
}

func (t retryAfterOn429) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		resp.Header.Set("Retry-After", t.secs)
	}
	return resp, err
}

// TestOverBurstRequestIsSplitBeforeItsTriesRunOut: a request whose bytes exceed the receiver's
// ingestion burst is refused with 429 every time, so splitting it is the only way through. It
// was split only after SplitAfter429 consecutive 429s; where the retries (sink.loki.max_retries
// 0 or 1) or the push's time (a long Retry-After) ran out first, it ended unsplit, and every run
// pushed the same batch into the same refusal: the keys never advanced. A request refused with
// 429 that will not be tried again is split at once, after waiting for every retry there is
// time for.
func TestOverBurstRequestIsSplitBeforeItsTriesRunOut(t *testing.T) {
	cases := []struct {
		name     string
		timeout  time.Duration
		opts     func(*Options)
		wrap     func(http.RoundTripper) http.RoundTripper
		requests int           // 429s, then the two halves
		elapsed  time.Duration // the waits honored, at least
	}{
		{name: "max_retries 0", timeout: time.Minute, opts: func(o *Options) { o.MaxAttempts = 1 }, requests: 1 + 2},
		{name: "max_retries 1", timeout: time.Minute, opts: func(o *Options) { o.MaxAttempts = 2 }, requests: 2 + 2},
		{name: "Retry-After 40s under a 70s push timeout", timeout: 70 * time.Second,
			wrap:     func(rt http.RoundTripper) http.RoundTripper { return retryAfterOn429{next: rt, secs: "40"} },
			requests: 2 + 2, elapsed: 40 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := simloki.New(simloki.Options{})
				es := batch(40)
				srv.SetIngestionLimit(0, sampleBytes(es)*3/5) // the burst fits half the batch, never all of it
				c := newClient(t, srv, func(o *Options) {
					if tc.opts != nil {
						tc.opts(o)
					}
					if tc.wrap != nil {
						o.Transport = tc.wrap(srv.Transport())
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				start := time.Now()
				res := c.Push(ctx, es)
				elapsed := time.Since(start)
				wantAllAccepted(t, res, srv, es)
				if res.Splits != 1 || res.Requests != tc.requests {
					t.Errorf("splits %d, requests %d; want 1 split after %d refusals", res.Splits, res.Requests, tc.requests-2)
				}
				if elapsed < tc.elapsed || elapsed > tc.elapsed+time.Second {
					t.Errorf("push took %s, want the %s of waits there was time for, and no more", elapsed, tc.elapsed)
				}
			})
		})
	}
}
