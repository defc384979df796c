package eventlogfile

import (
	"context"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// A plan lists the window's files — from just before it to its StopAfter, whatever the
// configured start — groups them by event type and LogDate day, estimates rows and encoded
// bytes from LogFileLength and the field names, and downloads nothing.
func TestPlanListsTheWindowWithoutDownloading(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	since := epoch.Add(-48 * time.Hour).Truncate(24 * time.Hour)
	until := since.Add(24 * time.Hour)
	for h := -2; h < 30; h++ { // two hours before the window, the day, six hours after it
		logDate := since.Add(time.Duration(h) * time.Hour)
		for _, typ := range []string{"Login", "API"} {
			e.addFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly, LogDate: logDate,
				CreatedDate: logDate.Add(70 * time.Minute), Rows: 10})
		}
	}
	opts := Options{Interval: IntervalHourly, EventTypes: []string{"Login", "API"}, Start: epoch.Add(-time.Hour)}
	opts.ForWindow(&Window{Since: since, Until: until, StopAfter: WindowStopAfter(IntervalHourly, until), KeyPrefix: "backfill:"}, epoch)
	src := e.source(opts)
	p, err := src.Plan(t.Context(), PlanOptions{Throughput: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// Files created from 5 minutes before the window: the file of the hour before it (created
	// at 00:10) onwards, not the one of two hours before (created at 23:10 the day before); every
	// later file is created before StopAfter (the window's end plus 25 hours).
	days := map[string]int64{}
	for _, d := range p.Days {
		days[d.EventType+" "+d.Day] += d.Files
		if perFile := d.Rows / d.Files; perFile < 5 || perFile > 15 || d.APICalls != d.Files || d.LokiBytes <= d.Bytes || d.Seconds <= 0 {
			t.Errorf("day %+v: want about 10 rows per file (at the default row size), one download per file, more Loki bytes than CSV bytes", d)
		}
	}
	before := since.Add(-time.Hour).Format(time.DateOnly)
	first := since.Format(time.DateOnly)
	next := until.Format(time.DateOnly)
	for _, typ := range []string{"Login", "API"} {
		if days[typ+" "+before] != 1 || days[typ+" "+first] != 24 || days[typ+" "+next] != 6 {
			t.Errorf("%s files by day %v, want 1 on %s, 24 on %s and 6 on %s", typ, days, before, first, next)
		}
	}
	if p.Files != 62 || p.APICalls["eventlogfile_download"] != 62 || p.APICalls["query"] < 2 {
		t.Errorf("plan %d files, calls %v", p.Files, p.APICalls)
	}
	if n := e.org.Calls()[simsf.KindDownload]; n != 0 {
		t.Errorf("the plan downloaded %d files", n)
	}
	// A type's own row size wins over the one for any type, which wins over the default.
	p, err = src.Plan(t.Context(), PlanOptions{Throughput: 1 << 20, AnyRowBytes: 250, RowBytes: map[string]float64{"Login": 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if p.RowBytes["API"] != 250 || p.RowBytes["Login"] != 1000 {
		t.Errorf("row sizes %v; want API 250 (any type), Login 1000 (its own)", p.RowBytes)
	}
}

// A window holding more files than one listing page: the plan lists page after page, each from
// after the last file of the one before, as the backfill would, and counts every file once.
func TestPlanListsPastTheFirstPage(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	since := epoch.Add(-48 * time.Hour).Truncate(24 * time.Hour)
	until := since.Add(24 * time.Hour)
	for h := range 5 {
		logDate := since.Add(time.Duration(h) * time.Hour)
		e.addFile(simsf.EventLogFileSpec{EventType: "Login", Interval: simsf.IntervalHourly, LogDate: logDate,
			CreatedDate: logDate.Add(70 * time.Minute), Rows: 10})
	}
	opts := Options{Interval: IntervalHourly, EventTypes: []string{"Login"}, PageSize: 2}
	opts.ForWindow(&Window{Since: since, Until: until, StopAfter: WindowStopAfter(IntervalHourly, until), KeyPrefix: "backfill:"}, epoch)
	src := e.source(opts)
	// Listing the first page again and again never ends: the deadline stops it.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	p, err := src.Plan(ctx, PlanOptions{Throughput: 1 << 20})
	if err != nil {
		t.Fatalf("Plan: %v (calls so far: %v)", err, src.Calls())
	}
	// Pages of 2, 2 and 1 files: the short page ends the listing.
	if p.Files != 5 || p.APICalls["query"] != 3 {
		t.Errorf("plan counts %d files in %d listing queries, want 5 files in 3 (calls %v)", p.Files, p.APICalls["query"], p.APICalls)
	}
}

// The row size given for a type, when known, replaces the default in the rows estimate.
func TestPlanRowsFollowTheRowSize(t *testing.T) {
	f := fileInfo{length: 10_001, names: "A,BB"} // header "A","BB" and a line end: 9 bytes
	if rows, _ := estimateFile(f, 100); rows != 100 {
		t.Errorf("rows %d at 100 bytes a row, want 100", rows)
	}
	if rows, line := estimateFile(f, 50); rows != 200 || line != 50+lokiEntryOverhead+1+4+5 {
		t.Errorf("rows %d, entry bytes %d at 50 bytes a row", rows, line)
	}
}

func TestPlanWriteText(t *testing.T) {
	p := &Plan{Days: []PlanDay{{Day: "2026-11-01", EventType: "Login", Files: 24, Bytes: 3 << 20, Rows: 6000, APICalls: 24, LokiBytes: 4 << 20, Seconds: 61}},
		Files: 24, Bytes: 3 << 20, Rows: 6000, LokiBytes: 4 << 20, Seconds: 61, APICalls: map[string]int64{"query": 1, "eventlogfile_download": 24},
		Throughput: 4 << 20, RoundTrip: 0.05, RowBytes: map[string]float64{"Login": 500}}
	var b strings.Builder
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"2026-11-01", "3.0 MiB", "1m1s", "total", "eventlogfile_download 24, query 1", "Login 500 B", "4.0 MiB/s plus 50 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan text lacks %q:\n%s", want, out)
		}
	}
}
