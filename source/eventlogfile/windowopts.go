package eventlogfile

import (
	"fmt"
	"math"
	"time"
)

// NewWindow returns the window [since, until) of files of the interval (Hourly or Daily): its
// keys are named after the interval and the bounds ("backfill:<interval>:<since>..<until>:"), so
// that one window's cursors never mix with another's nor with the live job's, and its listing
// stops at WindowStopAfter.
func NewWindow(interval string, since, until time.Time) (*Window, error) {
	switch {
	case interval != IntervalHourly && interval != IntervalDaily:
		return nil, fmt.Errorf("%w: interval %q: want %s or %s", ErrOptions, interval, IntervalHourly, IntervalDaily)
	case !since.Before(until):
		return nil, fmt.Errorf("%w: the window's start %s is not before its end %s", ErrOptions, since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	return &Window{
		Since: since, Until: until, StopAfter: WindowStopAfter(interval, until),
		KeyPrefix: "backfill:" + interval + ":" + since.Format(time.RFC3339) + ".." + until.Format(time.RFC3339) + ":",
	}, nil
}

// WindowStopAfter is how far past a window ending at until, by CreatedDate, its files are
// listed: a file is written after the period it covers (an hour or a day), sometimes hours
// late.
func WindowStopAfter(interval string, until time.Time) time.Time {
	bucket := time.Hour
	if interval == IntervalDaily {
		bucket = 24 * time.Hour
	}
	return until.Add(bucket + 24*time.Hour)
}

// ForWindow sets the options a source shipping (or planning) w needs, at now: the listing
// starts just before the window and stops at its StopAfter (a file newer than that cannot hold
// the window's events), and a file is never abandoned for its age (every file of a backfill is
// older than the live abandon age: it is retried instead).
func (o *Options) ForWindow(w *Window, now time.Time) {
	o.Window = w
	o.Start = time.Time{}
	o.Lookback = now.Sub(w.Since) + 5*time.Minute
	o.SettleWindow = max(now.Sub(w.StopAfter), DefaultSettleWindow) // the window reaches the recent past: let new files settle
	o.DownloadMaxAge = time.Duration(math.MaxInt64)
}
