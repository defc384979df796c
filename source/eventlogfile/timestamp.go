package eventlogfile

import (
	"time"
)

// parseRowTime parses an EventLogFile time value: TIMESTAMP_DERIVED's ISO-8601 form
// (2026-06-30T01:00:00.123Z, any offset, any fraction), TIMESTAMP's compact UTC form
// (20260630010000.123), or epoch milliseconds. The two Salesforce forms take a fast path.
func parseRowTime(v []byte) (time.Time, bool) {
	switch {
	case len(v) == 24 && v[4] == '-' && v[7] == '-' && v[10] == 'T' && v[13] == ':' && v[16] == ':' && v[19] == '.' && v[23] == 'Z':
		if t, ok := fastTime(v[0:4], v[5:7], v[8:10], v[11:13], v[14:16], v[17:19], v[20:23]); ok {
			return t, true
		}
	case len(v) == 18 && v[14] == '.':
		if t, ok := fastTime(v[0:4], v[4:6], v[6:8], v[8:10], v[10:12], v[12:14], v[15:18]); ok {
			return t, true
		}
	case len(v) == 14 && allDigits(v):
		if t, ok := fastTime(v[0:4], v[4:6], v[6:8], v[8:10], v[10:12], v[12:14], nil); ok {
			return t, true
		}
	case len(v) >= 12 && len(v) <= 13 && allDigits(v):
		ms, _ := atoi(v)
		return time.UnixMilli(int64(ms)).UTC(), true
	}
	if len(v) == 0 || len(v) > 64 {
		return time.Time{}, false
	}
	s := string(v)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700", "2006-01-02 15:04:05", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// rowClock parses the row times of one file, remembering the last second it parsed: a file's
// rows come in time order, hundreds to a second, and the two Salesforce forms differ within
// a second only in their milliseconds, so most rows cost a compare and an addition instead of
// a date's arithmetic. It gives the times parseRowTime gives.
type rowClock struct {
	head []byte    // the last second's text: the value without its milliseconds
	base time.Time // that second
}

func (c *rowClock) parse(v []byte) (time.Time, bool) {
	var head, ms []byte
	switch {
	case len(v) == 18 && v[14] == '.':
		head, ms = v[:14], v[15:]
	case len(v) == 24 && v[19] == '.' && v[23] == 'Z':
		head, ms = v[:19], v[20:23]
	default:
		return parseRowTime(v)
	}
	milli, ok := atoi(ms)
	if !ok {
		return parseRowTime(v)
	}
	if len(c.head) > 0 && string(c.head) == string(head) {
		return c.base.Add(time.Duration(milli) * time.Millisecond), true
	}
	t, ok := parseRowTime(v)
	if ok {
		c.head, c.base = append(c.head[:0], head...), t.Add(-time.Duration(milli)*time.Millisecond)
	}
	return t, ok
}

func fastTime(y, mo, d, h, mi, s, ms []byte) (time.Time, bool) {
	year, ok1 := atoi(y)
	month, ok2 := atoi(mo)
	day, ok3 := atoi(d)
	hour, ok4 := atoi(h)
	minute, ok5 := atoi(mi)
	sec, ok6 := atoi(s)
	milli, ok7 := 0, true
	if ms != nil {
		milli, ok7 = atoi(ms)
	}
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 60 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, milli*int(time.Millisecond), time.UTC), true
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func allDigits(b []byte) bool {
	_, ok := atoi(b)
	return ok
}
