package cli

import (
	"context"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
)

// limitsPoll returns the org-limits poller of one org (false when salesforce.limits.interval is
// 0). With ship, a sample becomes one entry (job.ShapeLimits) labelled sf_org_id and org.
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
			return job.ShapeLimits(sh, append([]loki.Label{{Name: "sf_org_id", Value: orgID}}, org.OrgLabels()...), at, limits)
		}
	}
	return p, true
}
