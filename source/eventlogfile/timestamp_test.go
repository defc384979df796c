package eventlogfile

import (
	"testing"
	"time"
)

// TestRowClockGivesParseRowTime: a file's clock, which reuses the last second it parsed, gives
// every row the time (and the verdict) parseRowTime gives it, whatever came before: rows within
// one second, the next second, the other form, a value of another form or none in between, a
// leap second, a second whose text is not a time.
func TestRowClockGivesParseRowTime(t *testing.T) {
	values := []string{
		"20261202000000.031", "20261202000000.000", "20261202000000.999", // one second
		"20261202000001.031",                                   // the next
		"2026-12-02T00:00:01.500Z", "2026-12-02T00:00:01.501Z", // the ISO form
		"20261202000001.032", // back to the compact form
		"1764633601000", "", "garbage", "20261202000001.03x", "20261202000001.-12",
		"20261202000001.033",
		"20161231235960.250", "20161231235960.750", // a leap second: the next minute's
		"20261302000000.100", "20261302000000.200", // month 13: not a time, twice
		"2026-13-02T00:00:00.100Z", "2026-13-02T00:00:00.200Z",
		"2026-12-02T00:00:02.100+01:00",                                  // another offset: the general path
		"20261202000002.100", "20261202000003.100", "20261202000002.100", // time going back
		"20261202000000", "20261202000000.000",
	}
	var c rowClock
	for _, v := range values {
		got, gotOK := c.parse([]byte(v))
		want, wantOK := parseRowTime([]byte(v))
		if got != want || gotOK != wantOK {
			t.Errorf("%q: the clock gives %v, %v; parseRowTime %v, %v", v, got, gotOK, want, wantOK)
		}
	}
	// Every value after every other one, so that each is parsed with each last second cached.
	for _, a := range values {
		for _, b := range values {
			c := rowClock{}
			c.parse([]byte(a))
			got, gotOK := c.parse([]byte(b))
			want, wantOK := parseRowTime([]byte(b))
			if got != want || gotOK != wantOK {
				t.Errorf("%q after %q: the clock gives %v, %v; parseRowTime %v, %v", b, a, got, gotOK, want, wantOK)
			}
		}
	}
	c = rowClock{}
	c.parse([]byte("20261202000000.031"))
	want := time.Date(2026, 12, 2, 0, 0, 0, 999*int(time.Millisecond), time.UTC)
	if got, _ := c.parse([]byte("20261202000000.999")); got != want {
		t.Errorf("the second row of a second: %v, want %v", got, want)
	}
}
