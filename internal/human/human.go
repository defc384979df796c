// Package human renders times, durations and sizes for people: the tables of `state show`,
// `lease show`, `backfill --plan` and doctor's findings. It imports nothing of sf2loki, so that
// every package presenting its own data renders it the same way.
package human

import (
	"fmt"
	"time"
)

// Round rounds d to what a person reads: minutes above an hour, seconds above a second,
// milliseconds below.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Second:
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// Ago renders the time from t to now: "3m12s ago", "in 5s" for a future t, "never" for a
// zero t.
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + Round(-d).String()
	}
	return Round(d).String() + " ago"
}

// Bytes renders a size in binary units: "512 B", "1.5 MiB".
func Bytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// Dash renders an empty value (or the empty Kubernetes reference "/") as "-".
func Dash(s string) string {
	if s == "" || s == "/" {
		return "-"
	}
	return s
}

// Clip cuts s to n bytes and marks the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
