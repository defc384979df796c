package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
	"github.com/sf2loki/sf2loki/store/file"
)

// SourceNames are the names a job group's sources list may use.
var SourceNames = []string{"eventlogfile", "soql", "apexlog", "pubsub"}

// Job is one job group: a subset of orgs and sources with its own schedule, lease and checkpoint
// document, so its fence is independent of every other group's.
type Job struct {
	Name     string   `yaml:"name" example:"elf" desc:"Group name (lowercase letters, digits, '-'): run-once --job NAME, the CronJob suffix, the lease and document suffix."`
	Orgs     []string `yaml:"orgs" desc:"Orgs of the group by name (empty = every org)."`
	Sources  []string `yaml:"sources" example:"[eventlogfile]" desc:"Sources of the group: eventlogfile, soql, apexlog, pubsub (empty = every enabled source of its orgs)."`
	Schedule string   `yaml:"schedule" desc:"Cron spec of the group (empty = schedule.spec)."`
	Lease    string   `yaml:"lease" desc:"Lease name of the group (empty = lease.name-<group>); each group and the backfill need their own."`
	// The group's checkpoint document: the backend's location with the group name appended
	// unless set here. No two groups, nor a group and the backfill, may share a lease or a
	// document (validateFencesApart).
	StatePath      string `yaml:"state_path" desc:"state.store file: document path (empty = the state.file.path name with -<group> before the extension)."`
	StateKey       string `yaml:"state_key" desc:"state.store s3 / gcs: object key (empty = the configured key with -<group> before the extension)."`
	StateConfigMap string `yaml:"state_configmap" desc:"state.store configmap: ConfigMap name (empty = state.configmap.name-<group>)."`
}

// Full returns the configuration a job group's configuration was derived from (ForJob), or c
// itself. Discovery uses it to skip categories that another group ships.
func (c *Config) Full() *Config {
	if c.full != nil {
		return c.full
	}
	return c
}

// JobNames returns the configured job group names.
func (c *Config) JobNames() []string {
	names := make([]string, len(c.Jobs))
	for i, j := range c.Jobs {
		names[i] = j.Name
	}
	return names
}

// orgName is how job groups refer to an org ("" is the single-org form's only org).
func (o OrgEntry) orgName() string { return o.Name }

func (j Job) hasOrg(name string) bool { return len(j.Orgs) == 0 || slices.Contains(j.Orgs, name) }
func (j Job) hasSource(name string) bool {
	return len(j.Sources) == 0 || slices.Contains(j.Sources, name)
}
func withSuffix(name, group string) string { return name + "-" + group }

// suffixPath inserts -<group> before a path's extension: state.json -> state-elf.json.
func suffixPath(p, group string) string {
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + "-" + group + ext
}

// enabledSources lists the enabled sources of one org's configuration by name.
func enabledSources(s Sources) []string {
	var out []string
	for _, n := range SourceNames {
		if sourceEnabled(s, n) {
			out = append(out, n)
		}
	}
	return out
}

func sourceEnabled(s Sources, name string) bool {
	switch name {
	case "eventlogfile":
		return s.EventLogFile.Enabled
	case "soql":
		return s.SOQL.Enabled
	case "apexlog":
		return s.ApexLog.Enabled
	case "pubsub":
		return s.PubSub.Enabled
	}
	return false
}

func disableSource(s *Sources, name string) {
	switch name {
	case "eventlogfile":
		s.EventLogFile.Enabled = false
	case "soql":
		s.SOQL.Enabled = false
	case "apexlog":
		s.ApexLog.Enabled = false
	case "pubsub":
		s.PubSub.Enabled = false
	}
}

func (c *Config) validateJobs(errs *Errors) {
	if len(c.Jobs) == 0 {
		return
	}
	orgs := c.OrgList()
	owner := map[string]string{} // "org/source" -> group
	seen := map[string]bool{}
	for i, j := range c.Jobs {
		p := fmt.Sprintf("jobs[%d]", i)
		if !validK8sName(j.Name) || strings.Contains(j.Name, ".") || len(j.Name) > 40 {
			errs.add(p+".name", "%q must be 1-40 lowercase letters, digits or '-'", j.Name)
		}
		if seen[j.Name] {
			errs.add(p+".name", "%q names two job groups", j.Name)
		}
		seen[j.Name] = true
		for k, o := range j.Orgs {
			if !slices.ContainsFunc(orgs, func(e OrgEntry) bool { return e.orgName() == o }) {
				errs.add(fmt.Sprintf("%s.orgs[%d]", p, k), "%q is not the name of a configured org", o)
			}
		}
		for k, s := range j.Sources {
			if !slices.Contains(SourceNames, s) {
				errs.add(fmt.Sprintf("%s.sources[%d]", p, k), "%q is not a source (one of %s)", s, strings.Join(SourceNames, ", "))
			}
		}
		for _, o := range orgs {
			if !j.hasOrg(o.orgName()) {
				continue
			}
			for _, s := range enabledSources(o.Sources) {
				if !j.hasSource(s) {
					continue
				}
				key := o.orgName() + "/" + s
				if prev, dup := owner[key]; dup {
					errs.add(p, "job groups %q and %q both ship %s of org %q: each source of each org belongs to one group (two groups would commit the same checkpoint keys to two documents)", prev, j.Name, s, displayOrg(o.orgName()))
					continue
				}
				owner[key] = j.Name
			}
		}
	}
	for _, o := range orgs {
		for _, s := range enabledSources(o.Sources) {
			if _, ok := owner[o.orgName()+"/"+s]; !ok {
				errs.add(o.Path[:len(o.Path)-len("salesforce")]+"sources."+s, "is enabled but no job group ships it; add it to a jobs entry")
			}
		}
	}
	c.validateFencesApart(errs)
}

// fenceHome is where a job group, or the backfill, keeps its fence: its lease and its checkpoint
// document, and the configuration keys that set them (a group's name when it picks the default).
type fenceHome struct {
	who              string // `job group "elf"` or `the backfill`
	lease, doc       string
	docID            string // the document as compared: a file's path resolved (samePath)
	leaseKey, docKey string // "" for the backfill
}

// fenceHomes returns every job group's lease and document as ForJob derives them, then the
// backfill's (ForBackfill).
func (c *Config) fenceHomes() []fenceHome {
	var out []fenceHome
	for i, j := range c.Jobs {
		p := fmt.Sprintf("jobs[%d].", i)
		g := c.forGroup(j)
		h := fenceHome{who: fmt.Sprintf("job group %q", j.Name), lease: g.Lease.Name, doc: g.State.location(),
			docID: g.State.locationID(), leaseKey: p + "name", docKey: p + "name"}
		if j.Lease != "" {
			h.leaseKey = p + "lease"
		}
		if key, value := c.State.jobKey(j); value != "" {
			h.docKey = p + key
		}
		out = append(out, h)
	}
	b := c.ForBackfill()
	return append(out, fenceHome{who: "the backfill", lease: b.Lease.Name, doc: b.State.location(), docID: b.State.locationID()})
}

// location is the checkpoint document's location in the configured store, as configured.
func (s State) location() string {
	switch s.Store {
	case "s3":
		return s.S3.Key
	case "gcs":
		return s.GCS.Object
	case "configmap":
		return s.ConfigMap.Name
	}
	return s.File.Path
}

// locationID is the checkpoint document's location in a form that is equal for two
// configurations naming one document: a file's path resolved (resolvePath).
func (s State) locationID() string {
	switch s.Store {
	case "s3", "gcs", "configmap":
		return s.location()
	}
	return resolvePath(s.File.Path)
}

// resolvePath returns the file p names as the file store resolves it (file.Resolve): two paths
// of one file, through a symlinked directory, a '..' after a symlink, or one relative and one
// absolute, give one result, whether the file exists yet or not.
func resolvePath(p string) string {
	if p == "" {
		return p
	}
	r, err := file.Resolve(p)
	if err != nil {
		return filepath.Clean(p) // the store's own error names it when it is opened
	}
	return r
}

// jobKey is the jobs[] key that sets a group's document in the configured store, and its value.
func (s State) jobKey(j Job) (key, value string) {
	switch s.Store {
	case "s3", "gcs":
		return "state_key", j.StateKey
	case "configmap":
		return "state_configmap", j.StateConfigMap
	}
	return "state_path", j.StatePath
}

// validateFencesApart refuses two job groups, or a group and the backfill, sharing a lease or a
// checkpoint document: each needs a fence of its own. Sharing a lease, they make each other
// busy, and a busy tick ships nothing without counting as a failure, so a group can stall
// unnoticed (their metrics, labelled by lease, merge too). Sharing a document under two leases,
// the first claim records its lease and every run of the other is refused as a foreign lease.
func (c *Config) validateFencesApart(errs *Errors) {
	homes := c.fenceHomes()
	// id is what is compared, value what is shown: two values of one id name one thing.
	check := func(what, why string, id, value, key func(fenceHome) string) {
		first := map[string]fenceHome{}
		for _, h := range homes {
			prev, dup := first[id(h)]
			if !dup {
				first[id(h)] = h
				continue
			}
			// Name the key that was set rather than a name whose default collides with it.
			path := key(h)
			if path == "" || strings.HasSuffix(path, ".name") && !strings.HasSuffix(key(prev), ".name") {
				path = key(prev)
			}
			same := ""
			if value(h) != value(prev) {
				same = fmt.Sprintf(" (%q is the same file)", value(h))
			}
			errs.add(path, "%s and %s share the %s %q%s: %s; give each its own", prev.who, h.who, what, value(prev), same, why)
		}
	}
	lease := func(h fenceHome) string { return h.lease }
	check("lease", "they would make each other busy, and a busy tick ships nothing without counting as a failure",
		lease, lease, func(h fenceHome) string { return h.leaseKey })
	check("checkpoint document", "the first to claim it records its lease there and every run of the other is refused "+
		"(under one lease, they would make each other busy instead)",
		func(h fenceHome) string { return h.docID }, func(h fenceHome) string { return h.doc }, func(h fenceHome) string { return h.docKey })
}

func displayOrg(name string) string {
	if name == "" {
		return "(single org)"
	}
	return name
}

// ForJob returns the configuration of one job group: only its orgs' sources that it ships are
// enabled, and it has its own lease name, checkpoint document and schedule. With no job groups
// configured, the name must be empty and the configuration is returned as is.
func (c *Config) ForJob(name string) (*Config, error) {
	if len(c.Jobs) == 0 {
		if name != "" {
			return nil, fmt.Errorf("--job %q: no job groups are configured (jobs)", name)
		}
		return c, nil
	}
	i := slices.IndexFunc(c.Jobs, func(j Job) bool { return j.Name == name })
	if i < 0 {
		if name == "" {
			return nil, fmt.Errorf("job groups are configured; choose one with --job (one of: %s)", strings.Join(c.JobNames(), ", "))
		}
		return nil, fmt.Errorf("--job %q is not a configured job group (one of: %s)", name, strings.Join(c.JobNames(), ", "))
	}
	return c.forGroup(c.Jobs[i]), nil
}

// Group is one job group's configuration; Name is empty for a configuration without groups.
type Group struct {
	Name   string
	Config *Config
}

// Groups returns every job group's configuration (ForJob), or the whole configuration as one
// unnamed group when there are none: what doctor checks, config check builds and schedule runs.
func (c *Config) Groups() []Group {
	if len(c.Jobs) == 0 {
		return []Group{{Config: c}}
	}
	out := make([]Group, len(c.Jobs))
	for i, j := range c.Jobs {
		out[i] = Group{Name: j.Name, Config: c.forGroup(j)}
	}
	return out
}

// forGroup restricts the configuration to job group j.
func (c *Config) forGroup(j Job) *Config {
	out := *c
	out.Jobs = nil
	out.full = c
	restrict := func(orgName string, s Sources) Sources {
		for _, n := range SourceNames {
			if !j.hasOrg(orgName) || !j.hasSource(n) {
				disableSource(&s, n)
			}
		}
		return s
	}
	out.Sources = restrict("", c.Sources)
	out.Orgs = make([]Org, len(c.Orgs))
	for k, o := range c.Orgs {
		o.Sources = restrict(o.Name, o.Sources)
		out.Orgs[k] = o
	}
	// One group samples an org's limits: each group keeps its own interval in its own document.
	for k, o := range c.OrgList() {
		if c.limitsGroup(o) == j.Name {
			continue
		}
		if len(c.Orgs) == 0 {
			out.Salesforce.Limits = OrgLimits{}
		} else {
			out.Orgs[k].Salesforce.Limits = OrgLimits{}
		}
	}
	out.Lease.Name = j.Lease
	if out.Lease.Name == "" {
		out.Lease.Name = withSuffix(c.Lease.Name, j.Name)
	}
	if j.Schedule != "" {
		out.Schedule.Spec = j.Schedule
	}
	out.State.File.Path = j.StatePath
	if out.State.File.Path == "" {
		out.State.File.Path = suffixPath(c.State.File.Path, j.Name)
	}
	if j.StateKey != "" {
		out.State.S3.Key, out.State.GCS.Object = j.StateKey, j.StateKey
	} else {
		out.State.S3.Key, out.State.GCS.Object = suffixPath(c.State.S3.Key, j.Name), suffixPath(c.State.GCS.Object, j.Name)
	}
	out.State.ConfigMap.Name = j.StateConfigMap
	if out.State.ConfigMap.Name == "" {
		out.State.ConfigMap.Name = withSuffix(c.State.ConfigMap.Name, j.Name)
	}
	return &out
}

// backfillSuffix marks the backfill's own document and lease.
const backfillSuffix = "-backfill"

// ForBackfill returns the configuration of the backfill's own document and lease, like a
// job group's: lease "<name>-backfill", document "<path>-backfill<ext>" (file), "<key>-backfill<ext>"
// (S3 key, GCS object), ConfigMap "<name>-backfill". A backfill never reads or fences the live
// document. Its shaping samples nothing.
func (c *Config) ForBackfill() *Config {
	out := *c
	name := c.Lease.Name
	if name == "" {
		name = "sf2loki"
	}
	out.Lease.Name = name + backfillSuffix
	out.State.File.Path = suffixed(c.State.File.Path)
	out.State.S3.Key = suffixed(c.State.S3.Key)
	out.State.GCS.Object = suffixed(c.State.GCS.Object)
	out.State.ConfigMap.Name = c.State.ConfigMap.Name + backfillSuffix
	// Transforms apply, sampling does not: a backfill loads history completely.
	out.Shape.Types = slices.Clone(c.Shape.Types)
	for i := range out.Shape.Types {
		out.Shape.Types[i].SampleRate, out.Shape.Types[i].SampleField = 0, ""
	}
	return &out
}

// BackfillOrg is one org a backfill ships and the event types it ships of it.
type BackfillOrg struct {
	OrgEntry
	EventTypes []string
}

// BackfillOrgs lists what a backfill ships: of every org (only the one named only, when set)
// with Salesforce credentials, the event types given, else those of its eventlogfile source;
// orgs left with none are left out. interval is the window's: the one given, else the first
// selected org's eventlogfile interval, else the source's default. A type given that is not an
// event type name, or nothing to ship, is an error.
func (c *Config) BackfillOrgs(only string, types []string, interval string) ([]BackfillOrg, string, error) {
	for _, t := range types {
		if t != shape.Wildcard && !validEventType(t) {
			return nil, "", fmt.Errorf("event types: "+notAnEventType, t)
		}
	}
	var out []BackfillOrg
	for _, o := range c.OrgList() {
		if only != "" && o.Name != only {
			continue
		}
		t := types
		if len(t) == 0 && o.Sources.EventLogFile.Enabled {
			t = o.Sources.EventLogFile.EventTypes
		}
		if len(t) == 0 || !o.Salesforce.Configured() {
			continue
		}
		if interval == "" {
			interval = o.Sources.EventLogFile.Interval
		}
		out = append(out, BackfillOrg{OrgEntry: o, EventTypes: t})
	}
	switch {
	case len(out) == 0 && only != "":
		return nil, "", fmt.Errorf("no org named %q has Salesforce credentials and event types to backfill (name the event types)", only)
	case len(out) == 0:
		return nil, "", errors.New("nothing to backfill: enable sources.eventlogfile with event_types, or name the event types")
	case interval == "":
		interval = eventlogfile.DefaultInterval
	}
	return out, interval, nil
}

// suffixed inserts the backfill suffix before a path's extension: state.json -> state-backfill.json.
func suffixed(p string) string {
	if p == "" {
		return p
	}
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + backfillSuffix + ext
}

// RequireSource refuses a configuration (or job group) with no source enabled: a run would end
// ok having shipped nothing, every time. It is not a validation error: the state and lease
// commands work on such a configuration.
func (c *Config) RequireSource() error {
	for _, org := range c.OrgList() {
		if org.Sources.Enabled() {
			return nil
		}
	}
	return errors.New("no source is enabled; enable at least one of sources.eventlogfile, sources.soql, " +
		"sources.apexlog or sources.pubsub (orgs[i].sources with orgs)")
}
