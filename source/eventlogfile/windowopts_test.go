package eventlogfile

import (
	"encoding/json"
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
