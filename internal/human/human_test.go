package human

import (
	"testing"
	"time"
)

func TestRendering(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{Ago(now, time.Time{}), "never"},
		{Ago(now, now.Add(-192*time.Second-300*time.Millisecond)), "3m12s ago"},
		{Ago(now, now.Add(5*time.Second)), "in 5s"},
		{Ago(now, now.Add(-250*time.Microsecond*1000)), "250ms ago"},
		{Ago(now, now.Add(-(2*time.Hour + 10*time.Minute + 31*time.Second))), "2h11m0s ago"},
		{Bytes(512), "512 B"},
		{Bytes(1536), "1.5 KiB"},
		{Bytes(3 << 30), "3.0 GiB"},
		{Dash(""), "-"}, {Dash("/"), "-"}, {Dash("a"), "a"},
		{Clip("abcdef", 3), "abc…"}, {Clip("abc", 3), "abc"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
