package config

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sf2loki/sf2loki/lease"
)

// The length bounds are checked apart from the patterns: a bounded repetition such as {0,251}
// compiles into as many copies of its element, which every process built at start (250 KB of
// heap and 2 000 allocations for these two).
var (
	orgNameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	k8sNameRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	apiVersionRE = regexp.MustCompile(`^[0-9]{2,3}\.[0-9]$`)
)

// validOrgName: 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit.
func validOrgName(s string) bool { return len(s) <= 63 && orgNameRE.MatchString(s) }

// validK8sName: a Kubernetes object name (a DNS subdomain): at most 253 lowercase letters,
// digits, '-' or '.', starting and ending with a letter or digit.
func validK8sName(s string) bool { return len(s) <= 253 && k8sNameRE.MatchString(s) }

// genericHosts are the login hosts that refuse the client-credentials flow.
var genericHosts = []string{"login.salesforce.com", "test.salesforce.com"}

// Validate checks enums, bounds and every cross-field rule, including the time-budget invariants.
// It returns all problems found, each naming its key.
func (c *Config) Validate() Errors {
	var errs Errors
	validateTree(reflect.ValueOf(c).Elem(), schema(), "", &errs)
	c.validateOrgs(&errs)
	c.validateSources(&errs)
	c.validateJobs(&errs)
	c.validateEgress(&errs)
	validateMetrics(c.Metrics, "metrics", &errs)
	c.validateShape(&errs)
	c.validateSink(&errs)
	c.validateHTTP(&errs)
	c.validateOrgSinks(&errs)
	c.validateState(&errs)
	c.validateLease(&errs)
	c.validateSchedule(&errs)
	c.validateTimeBudget(&errs)
	return errs
}

// validateTree applies the enum and min tags everywhere.
func validateTree(v reflect.Value, fields []*field, path string, errs *Errors) {
	for _, f := range fields {
		fv := v.Field(f.index)
		p := join(path, f.key)
		switch f.kind {
		case kindStruct:
			validateTree(fv, f.children, p, errs)
		case kindStructList:
			for i := 0; i < fv.Len(); i++ {
				validateTree(fv.Index(i), f.children, fmt.Sprintf("%s[%d]", p, i), errs)
			}
		case kindString:
			if len(f.enum) > 0 && !slices.Contains(f.enum, fv.String()) {
				msg := fmt.Sprintf("%q is not one of %s", fv.String(), strings.Join(f.enum, ", "))
				if s := suggest(fv.String(), f.enum); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				errs.add(p, "%s", msg)
			}
		case kindInt:
			if f.min != nil && fv.Int() < *f.min {
				errs.add(p, "%d is below the minimum %d", fv.Int(), *f.min)
			}
		}
	}
}

// OrgEntry is one org after the single-org shorthand is folded into the list.
type OrgEntry struct {
	Name       string // empty for the single-org shorthand: no org label, no key prefix
	Path       string // config path of its salesforce section
	Salesforce Salesforce
	Sources    Sources
	// Sink is what the org's entries are pushed with: sink.loki, with orgs[].sink.loki over it.
	Sink Loki
	// OwnSink reports that the org sets orgs[].sink.loki.
	OwnSink bool
}

// SourcesPath is the config path of the org's sources section ("sources" or
// "orgs[i].sources"), for messages.
func (o OrgEntry) SourcesPath() string {
	return strings.TrimSuffix(o.Path, "salesforce") + "sources"
}

// Org returns the org called name (empty: the single-org form).
func (c *Config) Org(name string) (OrgEntry, bool) {
	for _, o := range c.OrgList() {
		if o.Name == name {
			return o, true
		}
	}
	return OrgEntry{}, false
}

// OrgList returns the configured orgs: the orgs list, or the single salesforce section.
func (c *Config) OrgList() []OrgEntry {
	if len(c.Orgs) > 0 {
		out := make([]OrgEntry, len(c.Orgs))
		for i, o := range c.Orgs {
			out[i] = OrgEntry{Name: o.Name, Path: fmt.Sprintf("orgs[%d].salesforce", i), Salesforce: o.Salesforce, Sources: o.Sources,
				Sink: c.OrgSinkLoki(o.Sink.Loki), OwnSink: o.Sink.Loki.set()}
		}
		return out
	}
	return []OrgEntry{{Path: "salesforce", Salesforce: c.Salesforce, Sources: c.Sources, Sink: c.Sink.Loki}}
}

// Configured reports whether any credential of the section is set.
func (s Salesforce) Configured() bool {
	return s.ClientID != "" || s.Username != "" || s.PrivateKey != "" || s.ClientSecret != ""
}

func (c *Config) validateOrgs(errs *Errors) {
	if len(c.Orgs) > 0 && c.Salesforce.Configured() {
		errs.add("orgs", "both salesforce and orgs are set; move the single org into the orgs list")
	}
	seen := map[string]int{}
	for i, o := range c.Orgs {
		p := fmt.Sprintf("orgs[%d].name", i)
		switch {
		case o.Name == "":
			errs.add(p, "is required: every org needs a short name for its label and checkpoint keys")
		case !validOrgName(o.Name):
			errs.add(p, "%q must be 1-63 letters, digits, '.', '_' or '-'", o.Name)
		}
		if j, dup := seen[o.Name]; dup && o.Name != "" {
			errs.add(p, "%q is also the name of orgs[%d]", o.Name, j)
		}
		seen[o.Name] = i
	}
	for _, o := range c.OrgList() {
		validateSalesforce(o.Salesforce, o.Path, len(c.Orgs) > 0 || o.Sources.Enabled(), errs)
	}
}

func validateSalesforce(s Salesforce, path string, required bool, errs *Errors) {
	validateURL(s.EffectiveLoginURL(), join(path, "login_url"), errs)
	validateEnvironment(s, path, errs)
	validateLimits(s.Limits, join(path, "limits"), errs)
	if s.InstanceURL != "" {
		validateURL(s.InstanceURL, join(path, "instance_url"), errs)
	}
	if !apiVersionRE.MatchString(s.APIVersion) {
		errs.add(join(path, "api_version"), "%q is not an API version such as 62.0", s.APIVersion)
	}
	if s.TokenLifetime.D() < 2*time.Minute {
		errs.add(join(path, "token_lifetime"), "%s is too short; at least 2m (shorter makes every call mint a token)", s.TokenLifetime)
	}
	if s.BatchSize > 2000 {
		errs.add(join(path, "batch_size"), "%d is above Salesforce's maximum 2000", s.BatchSize)
	}
	if s.OrgID != "" && len(s.OrgID) != 18 {
		errs.add(join(path, "org_id"), "%q must be the 18-character org id", s.OrgID)
	}
	if !required && !s.Configured() {
		return // not set up yet; commands that talk to Salesforce say so
	}
	if s.ClientID == "" {
		errs.add(join(path, "client_id"), "is required (the consumer key of the connected app)")
	}
	switch s.AuthMode {
	case "jwt_bearer":
		if s.Username == "" {
			errs.add(join(path, "username"), "is required for auth_mode jwt_bearer")
		}
		if s.PrivateKey == "" {
			errs.add(join(path, "private_key_file"), "is required for auth_mode jwt_bearer (PEM RSA private key)")
		} else if !strings.Contains(s.PrivateKey.Value(), "PRIVATE KEY-----") {
			errs.add(join(path, "private_key"), "is not a PEM private key (expected a -----BEGIN ... PRIVATE KEY----- block)")
		}
	case "client_credentials":
		if s.ClientSecret == "" {
			errs.add(join(path, "client_secret_file"), "is required for auth_mode client_credentials")
		}
		if u, err := url.Parse(s.EffectiveLoginURL()); err == nil && slices.Contains(genericHosts, strings.ToLower(u.Hostname())) {
			errs.add(join(path, "login_url"), "client_credentials needs your My Domain URL (https://<domain>.my.salesforce.com); %s refuses it", u.Hostname())
		}
	}
}

// validateURL requires an absolute http(s) URL; plain http only to loopback hosts.
func validateURL(raw, path string, errs *Errors) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		errs.add(path, "%q is not an absolute http(s) URL", raw)
		return
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		errs.add(path, "%q uses plain http to a non-local host; use https", raw)
	}
}

func isLoopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}

// maxPushBytes bounds sink.loki.batch_max_bytes: a protobuf push travels as one snappy block,
// whose decoded length a receiver reads as 32 bits (from 4GiB on the body is corrupt to it), and
// the client holds a push and its encoding in memory whole.
const maxPushBytes = 1 << 30

func (c *Config) validateSink(errs *Errors) {
	l := c.Sink.Loki
	if u, err := url.Parse(l.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		errs.add("sink.loki.url", "%q is not an absolute http(s) URL", l.URL)
	}
	if l.Password != "" && l.Username == "" {
		errs.add("sink.loki.username", "is required when sink.loki.password is set")
	}
	if l.BearerToken != "" && (l.Username != "" || l.Password != "") {
		errs.add("sink.loki.bearer_token", "set either basic auth (username/password) or a bearer token, not both")
	}
	if l.Gzip && l.Encoding != "json" {
		errs.add("sink.loki.gzip", "applies to encoding json only (protobuf is always snappy-compressed)")
	}
	if l.BatchTargetBytes <= 0 || l.BatchMaxBytes <= 0 {
		errs.add("sink.loki.batch_max_bytes", "batch sizes must be positive")
	} else if l.BatchMaxBytes > maxPushBytes {
		errs.add("sink.loki.batch_max_bytes", "%s is too large; at most 1GiB (Loki's own limits are far lower: its default ingestion burst is 6MiB)", l.BatchMaxBytes)
	} else if l.BatchTargetBytes > l.BatchMaxBytes {
		errs.add("sink.loki.batch_target_bytes", "%s exceeds batch_max_bytes %s", l.BatchTargetBytes, l.BatchMaxBytes)
	}
	if l.LineMaxBytes < 1024 {
		errs.add("sink.loki.line_max_bytes", "%s is too small; at least 1KiB", l.LineMaxBytes)
	} else if l.LineMaxBytes > l.BatchMaxBytes {
		errs.add("sink.loki.line_max_bytes", "%s exceeds batch_max_bytes %s: a maximal line could never be pushed", l.LineMaxBytes, l.BatchMaxBytes)
	}
	if l.MinBackoff > l.MaxBackoff {
		errs.add("sink.loki.min_backoff", "%s exceeds max_backoff %s", l.MinBackoff, l.MaxBackoff)
	}
	if l.Timeout == 0 {
		errs.add("sink.loki.timeout", "must be positive")
	}
	if l.MaxAge <= 0 {
		errs.add("sink.loki.max_age", "must be positive")
	}
	if l.OutOfOrderWindow <= 0 {
		errs.add("sink.loki.out_of_order_window", "must be positive")
	}
	if l.CreationGrace <= 0 {
		errs.add("sink.loki.creation_grace_period", "must be positive")
	} else if l.OutOfOrderWindow > 0 && l.CreationGrace >= l.OutOfOrderWindow {
		errs.add("sink.loki.creation_grace_period", "%s is not below out_of_order_window %s: an entry stamped now could be too far behind a stream whose newest entry is in the future", l.CreationGrace, l.OutOfOrderWindow)
	}
	if l.MetadataMaxBytes <= 0 {
		errs.add("sink.loki.metadata_max_bytes", "must be positive")
	}
	validateExtraLabels(l.ExtraLabels, errs)
	validateSinkLabels(l.Labels, l.ExtraLabels, len(c.Orgs) > 0, errs)
}

func (c *Config) validateState(errs *Errors) {
	s := c.State
	switch s.Store {
	case "file":
		if s.File.Path == "" {
			errs.add("state.file.path", "is required for store file")
		}
	case "s3":
		if s.S3.Bucket == "" {
			errs.add("state.s3.bucket", "is required for store s3")
		}
		if s.S3.Key == "" {
			errs.add("state.s3.key", "is required for store s3")
		}
		if s.S3.Endpoint != "" {
			validateURL(s.S3.Endpoint, "state.s3.endpoint", errs)
		}
		if (s.S3.AccessKeyID == "") != (s.S3.SecretAccessKey == "") {
			errs.add("state.s3.access_key_id", "access_key_id and secret_access_key go together (or leave both empty for the default credential chain)")
		}
	case "gcs":
		if s.GCS.Bucket == "" {
			errs.add("state.gcs.bucket", "is required for store gcs")
		}
		if s.GCS.Object == "" {
			errs.add("state.gcs.object", "is required for store gcs")
		}
	case "configmap":
		if !validK8sName(s.ConfigMap.Name) {
			errs.add("state.configmap.name", "%q is not a valid Kubernetes object name", s.ConfigMap.Name)
		}
		if s.ConfigMap.Key == "" {
			errs.add("state.configmap.key", "is required for store configmap")
		}
	}
}

func (c *Config) validateLease(errs *Errors) {
	l := c.Lease
	if !validK8sName(l.Name) {
		errs.add("lease.name", "%q must be a lowercase DNS name (letters, digits, '-', '.')", l.Name)
	}
	if l.Duration == 0 {
		errs.add("lease.duration", "must be positive")
	}
	if l.RenewInterval == 0 {
		errs.add("lease.renew_interval", "must be positive")
	} else if l.RenewInterval.D() > l.Duration.D()/3 {
		errs.add("lease.renew_interval", "%s is above lease.duration/3 (%s): a holder must get at least three renewal attempts per lease duration", l.RenewInterval, Duration(l.Duration.D()/3))
	}
}

func (c *Config) validateSchedule(errs *Errors) {
	if _, err := time.LoadLocation(c.Schedule.Timezone); err != nil {
		errs.add("schedule.timezone", "%q is not a known time zone (e.g. UTC, Europe/Berlin)", c.Schedule.Timezone)
	}
	if _, err := cron.ParseStandard(c.Schedule.Spec); err != nil {
		errs.add("schedule.spec", "%q is not a cron spec: %v", c.Schedule.Spec, err)
	}
}

// Budget is the time budget of one invocation (docs/fencing.md, "The time budget"), derived from config.
type Budget struct {
	MaxDuration, Push, Commit, Release, Startup, Margin, AcquireWait time.Duration
	LeaseDuration, RenewInterval, ClockSkew                          time.Duration
	SchedulePeriod, Deadline, TerminationGrace                       time.Duration // zero = not given
}

// Budget returns the time budget described by the run and lease sections.
func (c *Config) Budget() Budget {
	return Budget{
		MaxDuration: c.Run.MaxDuration.D(), Push: c.Run.PushTimeout.D(), Commit: c.Run.CommitTimeout.D(),
		Release: c.Run.ReleaseTimeout.D(), Startup: c.Run.StartupReserve.D(), Margin: c.Run.Margin.D(),
		AcquireWait: c.Lease.AcquireWait.D(), LeaseDuration: c.Lease.Duration.D(), RenewInterval: c.Lease.RenewInterval.D(),
		ClockSkew: c.Lease.MaxClockSkew.D(), SchedulePeriod: c.Run.SchedulePeriod.D(), Deadline: c.Run.Deadline.D(),
		TerminationGrace: c.Run.TerminationGrace.D(),
	}
}

// IntakeWindow is how long the invocation may pull before it must stop to push, commit and release.
func (b Budget) IntakeWindow() time.Duration { return b.MaxDuration - (b.Push + b.Commit + b.Release) }

func (c *Config) validateTimeBudget(errs *Errors) {
	b := c.Budget()
	if b.Push == 0 || b.Commit == 0 || b.Release == 0 {
		errs.add("run", "push_timeout, commit_timeout and release_timeout must all be positive")
		return
	}
	if c.Sink.Loki.Timeout.D() > b.Push {
		errs.add("sink.loki.timeout", "%s exceeds run.push_timeout %s: one request could outlive the push reserve", c.Sink.Loki.Timeout, c.Run.PushTimeout)
	}
	if b.IntakeWindow() <= 0 {
		errs.add("run.max_duration", "%s leaves no time to pull: it must exceed push_timeout + commit_timeout + release_timeout = %s",
			c.Run.MaxDuration, b.Push+b.Commit+b.Release)
	}
	if b.Deadline > 0 {
		need := b.Startup + b.AcquireWait + b.MaxDuration + b.Release + b.Margin
		if need > b.Deadline {
			errs.add("run.max_duration", "startup_reserve + lease.acquire_wait + max_duration + release_timeout + margin = %s exceeds the scheduler deadline run.deadline %s; lower max_duration to at most %s",
				need, b.Deadline, max(0, b.Deadline-(need-b.MaxDuration)))
		}
	}
	if b.TerminationGrace > 0 {
		need := b.Commit + b.Release + b.Margin
		if b.TerminationGrace < need {
			errs.add("run.termination_grace", "%s is shorter than commit_timeout + release_timeout + margin = %s: after SIGTERM the final commit could be killed; raise terminationGracePeriodSeconds",
				b.TerminationGrace, need)
		}
	}
	if b.SchedulePeriod > 0 {
		need := b.LeaseDuration + b.ClockSkew + b.Startup
		if need >= b.SchedulePeriod {
			errs.add("lease.duration", "lease.duration + lease.max_clock_skew + run.startup_reserve = %s is not below the schedule period run.schedule_period %s: a crashed run would make the next tick busy",
				need, b.SchedulePeriod)
		}
	}
}

// Warnings returns advice that is not an error (printed by config check and at startup).
func (c *Config) Warnings() []string {
	var w []string
	if pw := lease.PairingWarning(c.Lease.Type, c.State.Store); pw != "" {
		w = append(w, pw)
	}
	if c.Sink.Loki.TLS.InsecureSkipVerify {
		w = append(w, "sink.loki.tls.insecure_skip_verify is on: the Loki server's certificate is not checked")
	}
	for _, o := range c.OrgList() {
		if o.Salesforce.TLS.InsecureSkipVerify {
			w = append(w, o.Path+".tls.insecure_skip_verify is on: Salesforce's certificate is not checked")
		}
	}
	w = append(w, c.orgSinkWarnings()...)
	w = append(w, c.labelCardinalityWarnings()...)
	if c.Sink.Loki.BatchMaxBytes > 6<<20 {
		w = append(w, "sink.loki.batch_max_bytes is above Loki's default ingestion burst (6 MiB); make sure the receiver's limit is higher")
	}
	return w
}
