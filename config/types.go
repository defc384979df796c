package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Duration is a Go-style duration ("30s", "5m", "1h30m") that is never negative.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration the way it is written in YAML.
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	return time.Duration(d).String()
}

func parseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use Go syntax such as 30s, 5m, 1h30m)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return Duration(v), nil
}

// Time is an absolute time, written in RFC 3339 (2024-06-01T00:00:00Z, or with a UTC offset).
// The loader keeps the text as written and checks that it parses; empty means unset.
type Time string

// T returns the time (the zero time when unset).
func (t Time) T() time.Time {
	v, _ := time.Parse(time.RFC3339Nano, string(t))
	return v
}

func parseTime(s string) (Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return "", fmt.Errorf("%q is not an RFC 3339 time (such as 2024-06-01T00:00:00Z)", s)
	}
	return Time(s), nil
}

// ByteSize is a size in bytes, written as an integer or with a unit: 512KiB, 4MiB, 1GB.
type ByteSize int64

// Int returns the size as an int64.
func (b ByteSize) Int() int64 { return int64(b) }

// String formats the size with the largest binary unit that divides it exactly.
func (b ByteSize) String() string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if b != 0 && int64(b)%u.size == 0 {
			return strconv.FormatInt(int64(b)/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1000, "kb": 1000, "kib": 1 << 10,
	"m": 1000 * 1000, "mb": 1000 * 1000, "mib": 1 << 20,
	"g": 1000 * 1000 * 1000, "gb": 1000 * 1000 * 1000, "gib": 1 << 30,
}

func parseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) })
	num, unit := s, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(s[:i]), strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, ok := byteUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size (use bytes or a unit: 512KiB, 4MiB, 1GiB)", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a non-negative size", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// Secret is a sensitive string (password, token, private key). It can be given inline, through the
// environment, or — preferably — from a file with the sibling key <name>_file. It never prints.
type Secret string

// Value returns the secret itself.
func (s Secret) Value() string { return string(s) }

// String hides the value so a secret never reaches a log line or a printed config.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "<redacted>"
}

// MarshalJSON hides the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }
