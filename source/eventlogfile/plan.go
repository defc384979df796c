package eventlogfile

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// DefaultRowBytes is the CSV row size a plan assumes for an event type whose average row size
// is not given: the order of a Login or API row (a few hundred bytes to a kilobyte).
const DefaultRowBytes = 500

// lokiEntryOverhead is what one entry adds to a push request besides its line: its timestamp
// and the protobuf framing (the stream's labels are sent once per stream and request).
const lokiEntryOverhead = 16

// DefaultPlanThroughput is the rate a plan assumes without one: Loki's default ingestion rate
// per tenant (ingestion_rate_mb 4), which bounds a backfill long before the job does.
const DefaultPlanThroughput = 4 << 20

// PlanOptions tunes the estimates of Source.Plan.
type PlanOptions struct {
	// RowBytes is the average CSV row size per event type; a type without one is assumed to
	// have AnyRowBytes, else DefaultRowBytes.
	RowBytes    map[string]float64
	AnyRowBytes float64
	// Throughput is the rate, in encoded Loki bytes per second, at which the entries are
	// assumed to ship (the receiver's ingestion rate or the egress cap); 0 means
	// DefaultPlanThroughput.
	Throughput float64
}

// PlanDay is the cost of one event type's files of one day (the UTC day of their LogDate).
type PlanDay struct {
	EventType string `json:"event_type"`
	Day       string `json:"day"`
	Files     int64  `json:"files"`
	// Bytes is the files' LogFileLength summed: what the backfill downloads.
	Bytes int64 `json:"bytes"`
	// Rows is estimated: the bytes past each file's header divided by the row size.
	Rows int64 `json:"rows_estimated"`
	// APICalls are the downloads of the day's files (the listing is counted in Plan.APICalls).
	APICalls int64 `json:"api_calls"`
	// LokiBytes is the estimated size of the entries as encoded for the receiver: each row
	// becomes a JSON line naming every field, plus the entry's timestamp and framing.
	LokiBytes int64 `json:"loki_bytes_estimated"`
	// Seconds is the estimated wall time: LokiBytes at the throughput, plus one request
	// round trip (as measured by the plan's own listing) per download.
	Seconds float64 `json:"wall_seconds_estimated"`
}

// Plan is what shipping a Window costs, from the listing alone: every file's LogFileLength
// and field names come with the listing, so nothing is downloaded.
type Plan struct {
	Days      []PlanDay `json:"days"`
	Files     int64     `json:"files"`
	Bytes     int64     `json:"bytes"`
	Rows      int64     `json:"rows_estimated"`
	LokiBytes int64     `json:"loki_bytes_estimated"`
	Seconds   float64   `json:"wall_seconds_estimated"`
	// APICalls is what the window costs in Salesforce requests, by kind: the listing (made by
	// the plan itself, page for page as the backfill lists) and one download per file.
	APICalls map[string]int64 `json:"api_calls"`
	// Throughput is PlanOptions.Throughput; RoundTrip the mean time of one listing request.
	Throughput float64 `json:"throughput_bytes_per_second"`
	RoundTrip  float64 `json:"round_trip_seconds"`
	// RowBytes is the row size assumed per event type.
	RowBytes map[string]float64 `json:"row_bytes"`
}

// Plan lists the files of the source's Window the way shipping it would — the same queries,
// pages and bound past the window — and estimates the cost per event type and day without
// downloading any file. The source must have a Window.
func (s *Source) Plan(ctx context.Context, po PlanOptions) (*Plan, error) {
	w := s.opts.Window
	if w == nil {
		return nil, fmt.Errorf("%w: a plan needs a Window", ErrOptions)
	}
	if po.Throughput == 0 {
		po.Throughput = DefaultPlanThroughput
	}
	if po.Throughput < 0 || math.IsInf(po.Throughput, 0) || math.IsNaN(po.Throughput) {
		return nil, fmt.Errorf("%w: the plan's throughput must be positive", ErrOptions)
	}
	streams, err := s.Open(ctx, source.OpenRequest{})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, st := range streams {
			_ = st.Close()
		}
	}()
	p := &Plan{Throughput: po.Throughput, RowBytes: map[string]float64{}}
	days := map[[2]string]*PlanDay{}
	var listing time.Duration
	for _, ss := range streams {
		st := ss.(*windowStream).stream
		rowBytes := po.RowBytes[st.typ]
		if rowBytes <= 0 {
			rowBytes = po.AnyRowBytes
		}
		if rowBytes <= 0 {
			rowBytes = DefaultRowBytes
		}
		p.RowBytes[st.typ] = rowBytes
		for {
			t0 := time.Now()
			f, ok, err := st.nextFile(ctx)
			listing += time.Since(t0)
			if err != nil {
				return nil, err
			}
			if !ok || !f.created.Before(w.StopAfter) {
				break // the window's stream ends there too
			}
			// Past the file, as shipping it would be: the next page is listed from there.
			st.cur = Cursor{V: cursorVersion, Created: f.Created, FileID: f.ID, Done: true, created: f.created}
			key := [2]string{st.typ, f.logDate.UTC().Format(time.DateOnly)}
			d := days[key]
			if d == nil {
				d = &PlanDay{EventType: key[0], Day: key[1]}
				days[key] = d
			}
			rows, line := estimateFile(f, rowBytes)
			d.Files++
			d.Bytes += f.length
			d.Rows += rows
			d.APICalls++
			d.LokiBytes += rows * line
		}
	}
	p.APICalls = s.Calls()
	listCalls := p.APICalls[string(salesforce.KindQuery)]
	if listCalls > 0 {
		p.RoundTrip = listing.Seconds() / float64(listCalls)
	}
	for _, d := range days {
		d.Seconds = float64(d.LokiBytes)/po.Throughput + float64(d.APICalls)*p.RoundTrip
		p.Days = append(p.Days, *d)
		p.Files += d.Files
		p.Bytes += d.Bytes
		p.Rows += d.Rows
		p.LokiBytes += d.LokiBytes
		p.Seconds += d.Seconds
		p.APICalls[string(salesforce.KindEventLogFile)] += d.APICalls
	}
	p.Seconds += float64(listCalls) * p.RoundTrip
	slices.SortFunc(p.Days, func(a, b PlanDay) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.EventType, b.EventType))
	})
	return p, nil
}

// estimateFile returns a file's estimated rows and the encoded size of one of its entries:
// the header is the field names, quoted; each row becomes a JSON line that adds every field's
// name (quoted, with a colon) to the row's values.
func estimateFile(f fileInfo, rowBytes float64) (rows, entryBytes int64) {
	names := splitNames(f.names)
	header := int64(1) // its line end
	perLine := int64(lokiEntryOverhead + 1)
	for _, n := range names {
		header += int64(len(n)) + 3
		perLine += int64(len(n)) + 3
	}
	if body := f.length - header; body > 0 {
		rows = int64(math.Round(float64(body) / rowBytes))
	}
	return rows, int64(rowBytes) + perLine
}
