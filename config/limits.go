package config

import "time"

// OrgLimits configures the org-limits poller of one org.
type OrgLimits struct {
	Interval Duration `yaml:"interval" default:"0s" desc:"Sample /limits at most this often, across runs (the last sample time is kept in the checkpoint document); 0 = off. Each sample is one REST call against the org's daily API allocation; at least 1m, 15m or more is plenty. With job groups, the first group that ships the org samples it."`
	Ship     bool     `yaml:"ship" desc:"Also push each sample to Loki as one entry (source limits, event_type OrgLimits; fields <Limit>.Max and <Limit>.Remaining), besides the sf2loki_salesforce_limit_* metrics."`
}

// minLimitsInterval bounds the poller: every sample costs an API call.
const minLimitsInterval = time.Minute

func validateLimits(l OrgLimits, path string, errs *Errors) {
	if l.Interval > 0 && l.Interval.D() < minLimitsInterval {
		errs.add(path+".interval", "%s is too short: every sample is an API call; at least %s (0 = off)", l.Interval, Duration(minLimitsInterval))
	}
	if l.Ship && l.Interval == 0 {
		errs.add(path+".ship", "needs an interval (limits.interval is 0: the poller is off)")
	}
}

// limitsGroup returns the job group that samples an org's limits: the first group (in jobs
// order) that ships any of the org's sources, or "" when none does or there are no groups.
func (c *Config) limitsGroup(org OrgEntry) string {
	for _, j := range c.Jobs {
		if !j.hasOrg(org.orgName()) {
			continue
		}
		for _, s := range enabledSources(org.Sources) {
			if j.hasSource(s) {
				return j.Name
			}
		}
	}
	return ""
}
