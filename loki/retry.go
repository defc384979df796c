package loki

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// retryPolicy is the one place where the client decides whether and when a
// request is tried again. It plugs into go-retryablehttp through a per-request
// attempt (CheckRetry and Backoff), which also records what the caller needs
// to know afterwards: attempts made and whether the request should be split.
//
//   - transport errors and 5xx (except 501): retried with capped exponential
//     backoff and jitter;
//   - 429: retried, waiting at least Retry-After (delta-seconds or HTTP date,
//     capped by maxRetryAfter). A request of more than one entry refused with
//     429 is handed back to be split, not tried again, once it has been
//     refused splitAfter429 times in a row, and at once when it would not be
//     tried again anyway (no retry left, or the wait passes the deadline): a
//     request larger than the receiver's burst is refused forever, and ended
//     unsplit it would be refused again on every push. The halves are new
//     requests, sent at once, each with its own retries;
//   - anything else (2xx, 400, 401, 403, 404, 413, …): not retried here; the
//     caller classifies it;
//   - no retry is started when its wait would pass the context deadline, or
//     once the context has ended, and never more than maxRetries per request;
//   - an answer is never discarded: the context ending after it arrived only
//     stops further attempts, and the caller classifies the answer (a 204
//     that arrived is an acceptance).
type retryPolicy struct {
	maxRetries    int
	minBackoff    time.Duration
	maxBackoff    time.Duration
	maxRetryAfter time.Duration
	splitAfter429 int
	now           func() time.Time
	log           *slog.Logger
}

// attempt tracks one request through its retries.
type attempt struct {
	p              *retryPolicy
	splittable     bool
	attempts       int
	retries        int
	consecutive429 int
	split          bool // stopped after 429s so the caller splits
	outOfTime      bool // stopped because the next wait passes the deadline, or the context ended
	wait           time.Duration
	// wrote: the attempt under way wrote its whole request (set from the HTTP trace, which may
	// report it after the attempt's error: it is read when the next attempt starts, or when the
	// request is done, see settle). ended: an attempt ended since the body was last wound (the
	// transport rewinds it within an attempt too). unanswered: the last attempt ended without an
	// answer.
	wrote      atomic.Bool
	ended      bool
	unanswered bool
	// mayHold: an attempt wrote its whole request and got no answer, so the receiver may hold its
	// entries whatever the later attempts are answered; only an acceptance says more.
	mayHold bool
}

func (p *retryPolicy) newAttempt(splittable bool) *attempt {
	return &attempt{p: p, splittable: splittable}
}

// client returns a retryablehttp client bound to this attempt.
func (a *attempt) client(hc *http.Client) *retryablehttp.Client {
	return &retryablehttp.Client{
		HTTPClient:   hc,
		RetryMax:     a.p.maxRetries,
		RetryWaitMin: a.p.minBackoff,
		RetryWaitMax: a.p.maxBackoff,
		CheckRetry:   a.checkRetry,
		Backoff:      a.backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
}

// body is called whenever the request body is wound, as an attempt starts or as the transport
// sends it again within one: the attempt before has then told all it will (see settle).
func (a *attempt) body() {
	if a.ended {
		a.settle()
	}
}

// settle records what the last attempt may have left at the receiver: written whole and never
// answered, it may have been stored. Called as the next attempt starts and once the request is
// done.
func (a *attempt) settle() {
	if a.wrote.Swap(false) && a.unanswered {
		a.mayHold = true
	}
	a.ended, a.unanswered = false, false
}

func (a *attempt) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	a.attempts++
	a.ended, a.unanswered = true, err != nil
	status := 0
	if err != nil {
		a.consecutive429 = 0
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// retryablehttp knows the transport errors that never heal
		// (bad scheme, untrusted certificate).
		if ok, perr := retryablehttp.ErrorPropagatedRetryPolicy(ctx, nil, err); !ok {
			return false, perr
		}
	} else {
		status = resp.StatusCode
		switch {
		case status == http.StatusTooManyRequests:
			a.consecutive429++
		case status >= 500 && status != http.StatusNotImplemented:
			a.consecutive429 = 0
		default:
			return false, nil
		}
	}
	if ctx.Err() != nil {
		a.outOfTime = true // answered, but the push is over: neither retried nor split
		return false, nil
	}
	again := a.retries < a.p.maxRetries
	if again {
		a.wait = a.p.backoff(a.retries, resp)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < a.wait {
			a.outOfTime, again = true, false
		}
	}
	if status == http.StatusTooManyRequests && a.splittable && (!again || a.consecutive429 >= a.p.splitAfter429) {
		a.split = true
		return false, nil
	}
	if !again {
		return false, nil
	}
	a.p.log.Debug("loki push: retrying", "status", status, "error", err, "wait", a.wait, "retry", a.retries+1)
	return true, nil
}

// backoff is called by retryablehttp right before it waits; the wait was
// decided (and checked against the deadline) in checkRetry.
func (a *attempt) backoff(_, _ time.Duration, _ int, _ *http.Response) time.Duration {
	a.retries++
	return a.wait
}

// backoff returns the wait before retry number n+1: exponential from
// minBackoff, capped at maxBackoff, with jitter over its upper half, and at
// least the response's Retry-After (capped at maxRetryAfter).
func (p *retryPolicy) backoff(n int, resp *http.Response) time.Duration {
	wait := p.minBackoff
	for i := 0; i < n && wait < p.maxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, p.maxBackoff)
	if half := wait / 2; half > 0 {
		wait = half + rand.N(half+1)
	}
	if resp != nil {
		if ra, ok := parseRetryAfter(resp.Header.Get("Retry-After"), p.now()); ok {
			wait = max(wait, min(ra, p.maxRetryAfter))
		}
	}
	return wait
}

// parseRetryAfter reads a Retry-After value: delta-seconds or an HTTP date
// (relative to now). Negative or past values mean zero.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, true
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
