package doctor

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ClockSource estimates how far a server's clock is from ours (server minus local).
type ClockSource struct {
	// Name names the server in messages ("Salesforce", "Loki").
	Name string
	// Offset returns the estimate; ok is false when the server gave none (not reached).
	Offset func(ctx context.Context) (offset time.Duration, ok bool, err error)
}

// dateResolution is the resolution of an HTTP Date header.
const dateResolution = time.Second

// HTTPDate is a clock source reading the Date header of a HEAD request to url. Any answer
// carries it (a 404 or 405 too).
func HTTPDate(name, url string, client *http.Client) ClockSource {
	if client == nil {
		client = http.DefaultClient
	}
	return ClockSource{Name: name, Offset: func(ctx context.Context) (time.Duration, bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
		if err != nil {
			return 0, false, err
		}
		before := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, false, err
		}
		after := time.Now()
		_ = resp.Body.Close()
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			return 0, false, nil
		}
		// The server stamped its Date somewhere between our send and receive, truncated to the
		// second: compare with the midpoint, half a second later.
		mid := before.Add(after.Sub(before) / 2)
		return date.Add(dateResolution / 2).Sub(mid), true, nil
	}}
}

// Clock returns the clock-skew check: every source's offset is compared with the allowed skew
// K (lease.max_clock_skew), less the Date header's one-second resolution. Within K/2 passes;
// up to K warns (two hosts each that far off in opposite directions exceed K); beyond K fails,
// because a fresh run could then take over a live lease early (duplicates, never regressions:
// the store fence still holds).
func Clock(sources []ClockSource, skew time.Duration) Check {
	return Check{ID: "clock", Title: "clock skew", Run: func(ctx context.Context) Result {
		var details []string
		worst, worstName, seen := time.Duration(0), "", false
		for _, s := range sources {
			off, ok, err := s.Offset(ctx)
			switch {
			case err != nil:
				details = append(details, fmt.Sprintf("%s: no answer (%v)", s.Name, err))
				continue
			case !ok:
				details = append(details, s.Name+": no Date header seen")
				continue
			}
			seen = true
			details = append(details, fmt.Sprintf("%s: %+.1fs", s.Name, off.Seconds()))
			if abs(off) >= abs(worst) {
				worst, worstName = off, s.Name
			}
		}
		if !seen {
			return Skip("no server answered with a Date header").With(details...)
		}
		err := max(abs(worst)-dateResolution, 0)
		fix := fmt.Sprintf("synchronize this host's clock (chrony, systemd-timesyncd), or raise lease.max_clock_skew above %s", abs(worst).Round(time.Second))
		switch {
		case err > skew:
			return Fail(fix, "this host's clock is %+.1fs off %s's, more than lease.max_clock_skew %s: a run could take over a live lease early", worst.Seconds(), worstName, skew).With(details...)
		case err > skew/2:
			return Warn(fix, "this host's clock is %+.1fs off %s's, more than half of lease.max_clock_skew %s", worst.Seconds(), worstName, skew).With(details...)
		}
		return Pass("within %s of %s (lease.max_clock_skew %s)", abs(worst).Round(100*time.Millisecond), worstName, skew).With(details...)
	}}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
