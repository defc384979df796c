package eventlogfile

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sf2loki/sf2loki/internal/human"
)

// WriteText writes the plan as a table, one row per day and event type and a total, followed
// by what the estimates assume.
func (p *Plan) WriteText(w io.Writer) error {
	seconds := func(s float64) string { return time.Duration(s * float64(time.Second)).Round(time.Second).String() }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "day\tevent type\tfiles\tbytes\trows (est.)\tAPI calls\tLoki bytes (est.)\ttime (est.)\t")
	for _, d := range p.Days {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t\n", d.Day, d.EventType, d.Files, human.Bytes(d.Bytes), d.Rows, d.APICalls,
			human.Bytes(d.LokiBytes), seconds(d.Seconds))
	}
	var calls int64
	for _, n := range p.APICalls {
		calls += n
	}
	fmt.Fprintf(tw, "total\t\t%d\t%s\t%d\t%d\t%s\t%s\t\n", p.Files, human.Bytes(p.Bytes), p.Rows, calls, human.Bytes(p.LokiBytes), seconds(p.Seconds))
	if err := tw.Flush(); err != nil {
		return err
	}
	var kinds, sizes []string
	for k, n := range p.APICalls {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	for t, n := range p.RowBytes {
		sizes = append(sizes, fmt.Sprintf("%s %.0f B", t, n))
	}
	slices.Sort(kinds)
	slices.Sort(sizes)
	_, err := fmt.Fprintf(w, "API calls: %s (listing included); rows assume rows of %s; time at %s/s plus %.0f ms per request\n",
		strings.Join(kinds, ", "), strings.Join(sizes, ", "), human.Bytes(int64(p.Throughput)), 1000*p.RoundTrip)
	return err
}

// WindowPlan is the plan of a backfill window over one or more orgs (`sf2loki backfill --plan`).
type WindowPlan struct {
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Interval string    `json:"interval"`
	Orgs     []OrgPlan `json:"orgs"`
}

// OrgPlan is one org's plan; Org is empty for the single-org form.
type OrgPlan struct {
	Org string `json:"org,omitempty"`
	*Plan
}

// WriteText writes every org's plan as a table.
func (wp *WindowPlan) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "backfill plan %s..%s (%s), estimated from the file listing (nothing downloaded)\n",
		wp.Since.Format(time.RFC3339), wp.Until.Format(time.RFC3339), wp.Interval)
	for _, o := range wp.Orgs {
		if o.Org != "" {
			fmt.Fprintf(w, "\norg %s\n", o.Org)
		}
		if err := o.WriteText(w); err != nil {
			return err
		}
	}
	return nil
}
