package loki

import (
	"context"
	"net/http"
	"time"
)

// The receiver's clock. Loki refuses entries by its own clock (reject_old_samples_max_age,
// creation_grace_period), which may not be this host's: the Date header of its answers states
// it, and a caller that knows it passes it with WithClockOffset so that the client's checks
// agree with the receiver's.

// readClock records in res the receiver's clock as resp's Date header states it, measured
// against this host's clock now, as the answer has just arrived. An answer without a Date
// header, or with one that does not parse, leaves res as it is.
func (c *Client) readClock(resp *http.Response, res *Result) {
	v := resp.Header.Get("Date")
	if v == "" {
		return
	}
	server, err := http.ParseTime(v)
	if err != nil {
		return
	}
	// The header is the receiver's time truncated to the second: on average half a second
	// behind it.
	res.ServerTime, res.ClockOffset = server, server.Add(500*time.Millisecond).Sub(c.opts.Now())
}

type clockOffsetKey struct{}

// WithClockOffset returns a context under which Push checks timestamps against the receiver's
// clock, this host's (Options.Now) plus offset, instead of this host's: the entries' times are
// then refused before sending exactly when the receiver itself would refuse them. The offset is
// typically a Result.ClockOffset of an earlier push to the same receiver.
func WithClockOffset(ctx context.Context, offset time.Duration) context.Context {
	return context.WithValue(ctx, clockOffsetKey{}, offset)
}

// clockOffset is the offset ctx carries (WithClockOffset), zero when none.
func clockOffset(ctx context.Context) time.Duration {
	d, _ := ctx.Value(clockOffsetKey{}).(time.Duration)
	return d
}
