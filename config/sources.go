package config

// Sources is what one org ships. The single-org form puts it at the top level (sources:), the
// multi-org form inside each orgs entry.
type Sources struct {
	AllowOverlap bool               `yaml:"allow_overlap" desc:"Allow two sources to feed the same event category (duplicates in Loki); off, the startup guard refuses it."`
	EventLogFile EventLogFileSource `yaml:"eventlogfile" desc:"EventLogFile CSVs (Daily or Hourly), one Loki entry per row."`
	SOQL         SOQLSource         `yaml:"soql" desc:"SOQL polling of event objects and Big Objects (LoginHistory, SetupAuditTrail, LoginEvent, ...)."`
	ApexLog      ApexLogSource      `yaml:"apexlog" desc:"ApexLog debug logs through the Tooling API."`
	PubSub       PubSubSource       `yaml:"pubsub" desc:"Pub/Sub API event streams (Real-Time Event Monitoring, platform events, Change Data Capture)."`
}

// Enabled reports whether any source is switched on.
func (s Sources) Enabled() bool {
	return s.EventLogFile.Enabled || s.SOQL.Enabled || s.ApexLog.Enabled || s.PubSub.Enabled
}

func (c *Config) validateSources(errs *Errors) {
	if len(c.Orgs) > 0 && c.Sources.Enabled() {
		errs.add("sources", "with orgs, configure sources inside each orgs entry (orgs[].sources)")
	}
	for _, o := range c.OrgList() {
		path := "sources"
		if o.Name != "" || len(c.Orgs) > 0 {
			path = o.Path[:len(o.Path)-len(".salesforce")] + ".sources"
		}
		if o.Sources.Enabled() && !o.Salesforce.Configured() {
			errs.add(o.Path+".client_id", "sources are enabled but Salesforce credentials are not configured")
		}
		validateEventLogFile(o.Sources.EventLogFile, path+".eventlogfile", errs)
		validateSOQL(o.Sources.SOQL, path+".soql", errs)
		validateApexLog(o.Sources.ApexLog, path+".apexlog", errs)
		validatePubSub(o.Sources.PubSub, path+".pubsub", errs)
		validateOverlap(o.Sources, path, errs)
	}
}
