package lease

import (
	"context"
	"fmt"
	"time"
)

// Observed is one read of a lease record: Absent, or Record with its version.
type Observed struct {
	Absent bool
	Record Record
}

// Expired applies rules 1 and 2 of the takeover rule to rec at wall time now: a record with
// no holder, released, missing renew time or duration (a third-party tool's Lease), or
// renewed_at + duration + skew in the past may be taken over at once.
func Expired(rec Record, now time.Time, skew time.Duration) bool {
	if rec.Holder == "" || rec.Released || rec.RenewedAt.IsZero() || rec.Duration <= 0 {
		return true
	}
	return rec.RenewedAt.Add(rec.Duration + skew).Before(now)
}

// TakeoverRule waits until a lease may be taken over by a fresh process (docs/fencing.md, "the
// takeover rule"):
//  1. absent, no holder, or released: now;
//  2. renewed_at + L + K < now by the wall clock: now;
//  3. otherwise poll the record; once its version has not changed for its duration on our
//     own monotonic clock (the holder stopped renewing) it may be taken over. After wait,
//     ErrBusy.
//
// A record renewed in our future by more than the allowed skew K was written by a holder whose
// clock is wrong, so rule 2 cannot be trusted for it: a holder killed with its clock 10 minutes
// (or 10 days) ahead would lock everyone out until our clock caught up with its. For such a
// record only, rule 3 applies whatever wait is: the acquirer observes it for up to its duration
// on the monotonic clock before deciding. A live skewed holder keeps renewing, so it is never
// taken over, and each acquirer pays at most one lease duration of waiting before ErrBusy.
//
// A read error is returned as is: an unknown lease is never treated as absent.
func TakeoverRule(ctx context.Context, c Config, wait time.Duration, read func(context.Context) (Observed, error)) (Observed, error) {
	start := time.Now()
	var (
		observedVersion string
		observedAt      time.Time
		escaped         bool // waiting out a holder whose clock runs ahead of ours
	)
	for {
		o, err := read(ctx)
		if err != nil {
			return Observed{}, err
		}
		if o.Absent || Expired(o.Record, c.Now(), c.Skew) {
			return o, nil
		}
		if ahead := o.Record.RenewedAt.Sub(c.Now()); ahead > c.Skew && !escaped {
			escaped = true
			if d := o.Record.Duration + c.Poll; d > wait-time.Since(start) {
				wait = time.Since(start) + d
			}
			c.Logger.Warn("the lease was renewed in our future: the holder's clock runs ahead of ours by more than the allowed skew; "+
				"watching it for one lease duration instead of trusting its renew time",
				"holder", o.Record.Holder, "epoch", o.Record.Epoch, "renewed_at", o.Record.RenewedAt,
				"ahead", ahead.Round(time.Second), "max_clock_skew", c.Skew)
		}
		if o.Record.Version != observedVersion || observedAt.IsZero() {
			observedVersion, observedAt = o.Record.Version, time.Now()
		} else if time.Since(observedAt) >= o.Record.Duration {
			c.Logger.Info("lease unchanged for its duration on our clock; taking it over",
				"holder", o.Record.Holder, "epoch", o.Record.Epoch, "renewed_at", o.Record.RenewedAt)
			return o, nil
		}
		left := wait - time.Since(start)
		if left <= 0 {
			return Observed{}, fmt.Errorf("%w: %s holds %s (epoch %d, renewed %s, duration %s)", ErrBusy,
				o.Record.Holder, o.Record.Ref, o.Record.Epoch, o.Record.RenewedAt.Format(time.RFC3339), o.Record.Duration)
		}
		t := time.NewTimer(min(c.Poll, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return Observed{}, fmt.Errorf("%w: waiting for the lease: %w", ErrBusy, ctx.Err())
		case <-t.C:
		}
	}
}
