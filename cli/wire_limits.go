package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
)

// Labels of the org-limits entries (salesforce.limits.ship).
const (
	limitsSource    = "limits"
	limitsEventType = "OrgLimits"
)

// limitsPoll returns the org-limits poller of one org (false when salesforce.limits.interval is
// 0). With ship, a sample becomes one entry shaped like a source's: the configured transforms and
// static labels, sf_org_id and org, source "limits", fields <Limit>.Max and <Limit>.Remaining.
func limitsPoll(org config.OrgEntry, client *salesforce.Client, sh *shape.Shaper) (job.LimitsPoll, bool) {
	l := org.Salesforce.Limits
	if l.Interval <= 0 {
		return job.LimitsPoll{}, false
	}
	p := job.LimitsPoll{Org: org.Name, Interval: l.Interval.D(), Client: client}
	if l.Ship {
		p.Entry = func(ctx context.Context, at time.Time, limits map[string]salesforce.Limit) (loki.Entry, error) {
			orgID, err := client.OrgID(ctx)
			if err != nil {
				return loki.Entry{}, err
			}
			labels := []loki.Label{{Name: "sf_org_id", Value: orgID}}
			if org.Name != "" {
				labels = append(labels, loki.Label{Name: "org", Value: org.Name})
			}
			return limitsEntry(sh, labels, at, limits)
		}
	}
	return p, true
}

// limitsEntry shapes one sample into an entry.
func limitsEntry(sh *shape.Shaper, labels []loki.Label, at time.Time, limits map[string]salesforce.Limit) (loki.Entry, error) {
	names := make([]string, 0, len(limits))
	for n := range limits {
		names = append(names, n)
	}
	slices.Sort(names)
	fields := make([]string, 0, 2*len(names))
	for _, n := range names {
		fields = append(fields, n+".Max", n+".Remaining")
	}
	plan := sh.Plan(shape.Schema{Source: limitsSource, Type: limitsEventType, Fields: fields, Labels: labels})
	rec := shape.Record{Type: limitsEventType, Time: at, ID: []byte(at.UTC().Format(time.RFC3339))}
	for _, n := range names {
		rec.Append(n+".Max", shape.Number, strconv.AppendInt(nil, limits[n].Max, 10))
		rec.Append(n+".Remaining", shape.Number, strconv.AppendInt(nil, limits[n].Remaining, 10))
	}
	e, skip := plan.Shape(&rec)
	if skip != "" {
		return loki.Entry{}, fmt.Errorf("the shape section drops it (%s)", skip)
	}
	return e, nil
}
