package eventlogfile

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// A backfill window lists from just before its start, whatever the source's configured start
// time (which, for a key without a cursor, wins over the lookback in live runs).
func TestWindowIgnoresTheConfiguredStart(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	since := epoch.Add(-48 * time.Hour).Truncate(time.Hour)
	until := since.Add(3 * time.Hour)
	for h := range 3 {
		logDate := since.Add(time.Duration(h) * time.Hour)
		e.addFile(simsf.EventLogFileSpec{Interval: simsf.IntervalHourly, LogDate: logDate, CreatedDate: logDate.Add(70 * time.Minute), Rows: 4})
	}
	opts := Options{Interval: IntervalHourly, Start: epoch.Add(-time.Hour)}
	opts.ForWindow(&Window{Since: since, Until: until, StopAfter: WindowStopAfter(IntervalHourly, until), KeyPrefix: "backfill:"}, epoch)
	res := e.run(e.source(opts), map[string]json.RawMessage{}, 100, nil)
	if res.entries != 12 {
		t.Fatalf("the window shipped %d rows, want the 12 of its three hours", res.entries)
	}
}

// TestNewWindowKeys: a window's keys are the ones earlier releases wrote, so a backfill
// interrupted before an upgrade resumes from its cursors after it; windows differing in interval
// or bounds never share a key.
func TestNewWindowKeys(t *testing.T) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(72 * time.Hour)
	w, err := NewWindow(IntervalHourly, since, until)
	if err != nil {
		t.Fatal(err)
	}
	if want := "backfill:Hourly:2026-11-01T00:00:00Z..2026-11-04T00:00:00Z:"; w.KeyPrefix != want {
		t.Fatalf("key prefix %q, want %q", w.KeyPrefix, want)
	}
	if !w.StopAfter.Equal(WindowStopAfter(IntervalHourly, until)) {
		t.Fatalf("stop after %s", w.StopAfter)
	}
	d, err := NewWindow(IntervalDaily, since, until)
	if err != nil || d.KeyPrefix == w.KeyPrefix {
		t.Fatalf("daily window %v (%v): its keys must differ from the hourly one's", d, err)
	}
	for _, bad := range []struct {
		interval     string
		since, until time.Time
	}{{"Weekly", since, until}, {IntervalHourly, until, since}, {IntervalHourly, since, since}} {
		if _, err := NewWindow(bad.interval, bad.since, bad.until); !errors.Is(err, ErrOptions) {
			t.Errorf("NewWindow(%q, %s, %s): %v, want ErrOptions", bad.interval, bad.since, bad.until, err)
		}
	}
}

// TestWindowStopsAtAFileCreatedAfterIt: a file created past the window's StopAfter cannot hold
// its events, nor can any later one: the window's stream ends there without downloading it,
// even when the listing returns it (here a settle window shorter than ForWindow's lets the listing
// reach it).
func TestWindowStopsAtAFileCreatedAfterIt(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	since := epoch.Add(-96 * time.Hour).Truncate(time.Hour)
	until := since.Add(2 * time.Hour)
	var inside string
	for h := range 2 {
		logDate := since.Add(time.Duration(h) * time.Hour)
		inside = e.addFile(simsf.EventLogFileSpec{Interval: simsf.IntervalHourly, LogDate: logDate, CreatedDate: logDate.Add(70 * time.Minute), Rows: 4})
	}
	w := &Window{Since: since, Until: until, StopAfter: WindowStopAfter(IntervalHourly, until), KeyPrefix: "backfill:"}
	late := w.StopAfter.Add(time.Hour)
	e.addFile(simsf.EventLogFileSpec{Interval: simsf.IntervalHourly, LogDate: late.Add(-70 * time.Minute), CreatedDate: late, Rows: 4})
	opts := Options{Interval: IntervalHourly}
	opts.ForWindow(w, epoch)
	opts.SettleWindow = DefaultSettleWindow
	cursors := map[string]json.RawMessage{}
	res := e.run(e.source(opts), cursors, 100, nil)
	if res.entries != 8 || res.skips[SkipOutsideWindow] != 0 || len(res.errs) != 0 {
		t.Fatalf("shipped %d rows, skips %v, errors %v; want the 8 rows of the window's two files and nothing of the later one", res.entries, res.skips, res.errs)
	}
	if c := decoded(t, cursors, "backfill:"+Key("Login")); c.FileID != inside || !c.Done {
		t.Fatalf("the window's cursor is %+v; want the last file inside it (%s), done", c, inside)
	}
}
