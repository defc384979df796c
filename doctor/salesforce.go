package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
)

// Org is one Salesforce org to check, as configured.
type Org struct {
	// Name is the org's name in the orgs list; empty for the single-org form.
	Name string
	// Path is the configuration path of its salesforce section, for fixes ("salesforce",
	// "orgs[1].salesforce").
	Path string
	// Client talks to the org. When nil, ClientErr says why it could not be built.
	Client    *salesforce.Client
	ClientErr error
	// AuthMode and Username are shown in messages ("jwt_bearer", "integration@example.com").
	AuthMode string
	Username string
	// EventLogFile is set when the org ships EventLogFile rows.
	EventLogFile *EventLogFile
	// Objects are the sObjects the soql source polls (read access is checked with describe).
	Objects []string
	// ApexLog is set when the org ships ApexLog (read access on ApexLog is checked).
	ApexLog bool
	// PubSub is set when the org subscribes to Pub/Sub topics.
	PubSub *PubSub
}

// EventLogFile is the eventlogfile source of an org, as configured.
type EventLogFile struct {
	Interval   string   // Hourly or Daily
	EventTypes []string // may contain "*"
	Exclude    []string
}

// TopicGetter describes a Pub/Sub topic; *pubsub.Client implements it.
type TopicGetter interface {
	GetTopic(ctx context.Context, name string) (sfpubsub.Topic, error)
}

// PubSub is the pubsub source of an org, as configured.
type PubSub struct {
	// Client calls GetTopic. When nil, ClientErr says why it could not be built.
	Client    TopicGetter
	ClientErr error
	Endpoint  string
	Topics    []string // may contain "*"
}

// prefix is the check ID prefix of the org: "salesforce" or "salesforce[prod]".
func (o Org) prefix() string {
	if o.Name == "" {
		return "salesforce"
	}
	return "salesforce[" + o.Name + "]"
}

// Salesforce returns the checks of one org: authentication, API limits, read access to every
// object its sources use, which configured EventLogFile types the org produces, a LogFile
// download, and Pub/Sub topic access.
func Salesforce(o Org) []Check {
	p := o.prefix()
	auth := p + ".auth"
	checks := []Check{
		{ID: auth, Title: "Salesforce authentication", Run: o.checkAuth},
		{ID: p + ".limits", Title: "Salesforce API limits", Needs: []string{auth}, Run: o.checkLimits},
	}
	if objs := o.objects(); len(objs) > 0 {
		checks = append(checks, Check{ID: p + ".permissions", Title: "integration user's object access", Needs: []string{auth},
			Run: func(ctx context.Context) Result { return o.checkObjects(ctx, objs) }})
	}
	if o.EventLogFile != nil {
		types := p + ".eventlogfile.types"
		checks = append(checks,
			Check{ID: types, Title: "EventLogFile types produced", Needs: []string{p + ".permissions"}, Run: o.checkTypes},
			Check{ID: p + ".eventlogfile.download", Title: "EventLogFile download", Needs: []string{types}, Run: o.checkDownload})
	}
	if o.PubSub != nil {
		checks = append(checks, Check{ID: p + ".pubsub.topics", Title: "Pub/Sub topic access", Needs: []string{auth}, Run: o.checkTopics})
	}
	return checks
}

func (o Org) objects() []string {
	var out []string
	if o.EventLogFile != nil {
		out = append(out, "EventLogFile")
	}
	out = append(out, o.Objects...)
	if o.ApexLog {
		out = append(out, "ApexLog")
	}
	seen := map[string]bool{}
	return slices.DeleteFunc(out, func(s string) bool {
		k := strings.ToLower(s)
		defer func() { seen[k] = true }()
		return seen[k]
	})
}

func (o Org) checkAuth(ctx context.Context) Result {
	if o.Client == nil {
		return Fail("fix "+o.Path+" (sf2loki config check)", "cannot build the Salesforce client: %v", o.ClientErr)
	}
	s, err := o.Client.Session(ctx)
	if err != nil {
		return authFailure(o, err)
	}
	who := o.Username
	if who == "" {
		who = "the client-credentials run-as user"
	}
	msg := fmt.Sprintf("%s as %s at %s", o.AuthMode, who, s.InstanceURL)
	if s.OrgID != "" {
		msg += ", org " + s.OrgID
	}
	return Pass("%s", msg)
}

// authFailure turns a refused or failed token request into a FAIL with the fix for its cause.
func authFailure(o Org, err error) Result {
	var ae *salesforce.AuthError
	if errors.As(err, &ae) {
		p := o.Path
		desc := strings.ToLower(ae.Description)
		fix := "check " + p + ".client_id, " + p + ".username and the connected app's OAuth policies"
		switch {
		case strings.Contains(desc, "invalid assertion"):
			fix = "the JWT was not signed by the key whose certificate is on the connected app: set " + p +
				".private_key_file to the key matching the uploaded certificate (or upload the certificate of this key)"
		case strings.Contains(desc, "approved"):
			fix = "pre-authorize the user on the connected app (Permitted Users: Admin approved users are pre-authorized, then add the user's profile or permission set)"
		case strings.Contains(desc, "audience"):
			fix = "set " + p + ".login_url to your My Domain URL, https://login.salesforce.com or https://test.salesforce.com (sandboxes)"
		case strings.Contains(desc, "expired"):
			fix = "the JWT was outside its validity window: synchronize this host's clock (NTP)"
		case strings.Contains(desc, "inactive"):
			fix = "activate the integration user " + o.Username
		case ae.Code == "invalid_client_id":
			fix = "set " + p + ".client_id to the consumer key of a connected app in this org"
		case ae.Code == "invalid_client":
			fix = "set " + p + ".client_secret_file to the connected app's consumer secret"
		case strings.Contains(desc, "domain"):
			fix = "the client-credentials flow needs your My Domain URL in " + p + ".login_url"
		case strings.Contains(desc, "client credentials user"):
			fix = "choose a Run As user in the connected app's client credentials flow settings"
		case strings.Contains(desc, "refresh_token"):
			fix = "add the refresh_token, offline_access scope to the connected app"
		}
		return Fail(fix, "Salesforce refused the %s login: %s %s", o.AuthMode, ae.Code, ae.Description)
	}
	if errors.Is(err, salesforce.ErrUnavailable) {
		return Fail("check "+o.Path+".login_url, DNS, proxies and firewalls between this host and Salesforce", "cannot reach Salesforce: %v", err)
	}
	return Fail("check "+o.Path, "authentication failed: %v", err)
}

func (o Org) checkLimits(ctx context.Context) Result {
	limits, err := o.Client.Limits(ctx)
	if err != nil {
		return Warn("the integration user may lack View Setup and Configuration; runs do not need it", "cannot read /limits: %v", err)
	}
	l, ok := limits["DailyApiRequests"]
	if !ok || l.Max <= 0 {
		return Info("the org reports no DailyApiRequests limit")
	}
	used := l.Max - l.Remaining
	if l.Remaining*10 < l.Max {
		return Warn("runs stop with REQUEST_LIMIT_EXCEEDED when it reaches 0; lower the schedule frequency or raise the org's allocation",
			"only %d of %d daily API requests remain", l.Remaining, l.Max)
	}
	return Pass("%d of %d daily API requests used", used, l.Max)
}

// accessFix says which permission grants read access to an object.
func accessFix(object string) string {
	switch strings.ToLower(object) {
	case "eventlogfile":
		return "give the integration user the View Event Log Files permission (permission set), with API Enabled"
	case "setupaudittrail":
		return "give the integration user View Setup and Configuration"
	case "apexlog":
		return "give the integration user View All Data (ApexLog is readable only with it) or Manage Users"
	}
	if strings.HasSuffix(strings.ToLower(object), "event") || strings.HasSuffix(strings.ToLower(object), "eventstore") {
		return "give the integration user View Real-Time Event Monitoring Data (and the Event Monitoring license)"
	}
	return "grant Read on " + object + " to the integration user in a permission set"
}

func (o Org) checkObjects(ctx context.Context, objects []string) Result {
	var denied, fixes, ok []string
	for _, obj := range objects {
		_, err := o.Client.Describe(ctx, obj)
		var ae *salesforce.APIError
		switch {
		case err == nil:
			ok = append(ok, obj)
		case errors.As(err, &ae) && (ae.StatusCode == http.StatusNotFound || ae.ErrorCode == salesforce.CodeNotFound ||
			ae.ErrorCode == salesforce.CodeInsufficientAccess || ae.ErrorCode == salesforce.CodeInvalidType):
			denied = append(denied, obj)
			fixes = append(fixes, accessFix(obj))
		case errors.As(err, &ae) && ae.ErrorCode == "API_DISABLED_FOR_ORG":
			return Fail("give the integration user API Enabled (profile or permission set)", "the REST API is disabled for the user: %v", err)
		default:
			return Fail("retry; if it persists check the network to "+o.Path+".login_url", "describe %s failed: %v", obj, err)
		}
	}
	if len(denied) > 0 {
		return Fail(strings.Join(slices.Compact(fixes), "; "),
			"the integration user cannot read %s (describe answers NOT_FOUND)", strings.Join(denied, ", ")).With("readable: " + orNone(ok))
	}
	return Pass("the integration user can read %s", strings.Join(ok, ", "))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// checkTypes compares the configured EventLogFile types with the types the org has files of.
func (o Org) checkTypes(ctx context.Context) Result {
	e := o.EventLogFile
	// One query per interval: an aggregate over EventLogFile without a filter on Interval
	// under-reports (docs/architecture.md, "Salesforce facts").
	produced := map[string]map[string]int64{} // interval -> type -> files
	names := map[string]string{}              // lower -> as the org spells it
	for _, iv := range []string{"Hourly", "Daily"} {
		q := "SELECT EventType, COUNT(Id) n FROM EventLogFile WHERE Interval = " + salesforce.QuoteString(iv) + " GROUP BY EventType"
		produced[iv] = map[string]int64{}
		for rec, err := range o.Client.Records(ctx, q) {
			if err != nil {
				return Fail("retry; if it persists check the integration user's access to EventLogFile", "listing EventLogFile types: %v", err)
			}
			t, _ := rec.String("EventType")
			n, _ := rec.Int64("n")
			produced[iv][t] += n
			if iv == e.Interval {
				names[strings.ToLower(t)] = t
			}
		}
	}
	have := produced[e.Interval]
	var details, missing, otherInterval []string
	wildcard := false
	for _, t := range e.EventTypes {
		if t == "*" {
			wildcard = true
			continue
		}
		n := have[names[strings.ToLower(t)]]
		switch {
		case n > 0 && names[strings.ToLower(t)] != t:
			missing = append(missing, t)
			details = append(details, fmt.Sprintf("%s: the org spells it %s (event types are case-sensitive in SOQL)", t, names[strings.ToLower(t)]))
		case n > 0:
			details = append(details, fmt.Sprintf("%s: %d %s files", t, n, e.Interval))
		default:
			missing = append(missing, t)
			for iv, m := range produced {
				if iv != e.Interval && m[t] > 0 {
					otherInterval = append(otherInterval, fmt.Sprintf("%s has %d %s files but no %s ones", t, m[t], iv, e.Interval))
				}
			}
		}
	}
	if wildcard {
		var found []string
		for t := range have {
			if !slices.ContainsFunc(e.Exclude, func(x string) bool { return strings.EqualFold(x, t) }) {
				found = append(found, t)
			}
		}
		sort.Strings(found)
		details = append(details, fmt.Sprintf("* discovers %d %s types now: %s", len(found), e.Interval, orNone(found)))
	}
	details = append(details, otherInterval...)
	if len(missing) > 0 {
		fix := "check the names (case-sensitive) and the org's Event Monitoring license; a type appears once there was activity of its kind"
		if len(otherInterval) > 0 {
			fix = "set sources.eventlogfile.interval to the interval the org produces (free-tier orgs have Daily files only)"
		}
		return Warn(fix, "the org has no %s EventLogFile of %s yet: those types ship nothing", e.Interval, strings.Join(missing, ", ")).With(details...)
	}
	if len(have) == 0 {
		return Warn("check the org's Event Monitoring license (free orgs produce a few Daily types only) and sources.eventlogfile.interval",
			"the org has no %s EventLogFile at all yet", e.Interval).With(details...)
	}
	if wildcard && len(e.EventTypes) == 1 {
		return Info("event types are discovered at run time").With(details...)
	}
	return Pass("every configured type has %s files", e.Interval).With(details...)
}

// checkDownload downloads the first bytes of the newest file of a configured type: listing
// and downloading are separate permissions in some orgs.
func (o Org) checkDownload(ctx context.Context) Result {
	e := o.EventLogFile
	var explicit []string
	for _, t := range e.EventTypes {
		if t != "*" && salesforce.ValidateIdentifier(t) == nil {
			explicit = append(explicit, t)
		}
	}
	q := "SELECT Id, EventType, LogFileLength FROM EventLogFile WHERE Interval = " + salesforce.QuoteString(e.Interval)
	if len(explicit) > 0 {
		q += " AND EventType IN " + salesforce.QuoteStrings(explicit)
	}
	q += " ORDER BY CreatedDate DESC LIMIT 1"
	var id, typ string
	for rec, err := range o.Client.Records(ctx, q) {
		if err != nil {
			return Fail("retry; if it persists check the integration user's access to EventLogFile", "finding a file to download: %v", err)
		}
		id, _ = rec.String("Id")
		typ, _ = rec.String("EventType")
	}
	if id == "" {
		return Skip("no %s file of the configured types to download yet", e.Interval)
	}
	dl, err := o.Client.DownloadEventLogFile(ctx, id)
	if err != nil {
		var ae *salesforce.APIError
		if errors.As(err, &ae) && (ae.StatusCode == http.StatusForbidden || ae.ErrorCode == salesforce.CodeInsufficientAccess) {
			return Fail(accessFix("EventLogFile"), "the integration user can list EventLogFile but may not download its LogFile (%s %s)", ae.ErrorCode, ae.Message)
		}
		return Fail("retry; if it persists check the network to Salesforce", "downloading %s file %s: %v", typ, id, err)
	}
	defer func() { _ = dl.Close() }()
	head := make([]byte, 512)
	n, err := io.ReadFull(dl, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Fail("retry; if it persists check proxies between this host and Salesforce", "reading %s file %s: %v", typ, id, err)
	}
	line, _, _ := strings.Cut(string(head[:n]), "\n")
	return Pass("downloaded the start of the newest %s %s file (%s)", e.Interval, typ, id).With("header: " + truncate(line, 120))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (o Org) checkTopics(ctx context.Context) Result {
	ps := o.PubSub
	if ps.Client == nil {
		return Fail("fix the pubsub section of "+o.Path, "cannot build the Pub/Sub client: %v", ps.ClientErr)
	}
	var ok, details, denied []string
	wildcard := false
	for _, t := range ps.Topics {
		if t == "*" {
			wildcard = true
			continue
		}
		info, err := ps.Client.GetTopic(ctx, t)
		switch {
		case err == nil:
			ok = append(ok, t)
			details = append(details, fmt.Sprintf("%s: subscribe allowed, schema %s", t, info.SchemaID))
		case errors.Is(err, sfpubsub.ErrTopic):
			denied = append(denied, t)
			details = append(details, fmt.Sprintf("%s: %v", t, err))
		case errors.Is(err, salesforce.ErrUnavailable):
			return Fail("check sources.pubsub.endpoint ("+ps.Endpoint+") and that port 7443 is open to Salesforce", "cannot reach the Pub/Sub API at %s: %v", ps.Endpoint, err)
		default:
			return Fail("check sources.pubsub and the integration user", "GetTopic %s: %v", t, err)
		}
	}
	if wildcard {
		details = append(details, "*: event streams are discovered at run time")
	}
	if len(denied) > 0 {
		return Fail("Real-Time Event Monitoring streams need View Real-Time Event Monitoring Data; platform events need Read on the event; change events need Read on the object; also check the topic names",
			"the integration user may not subscribe to %s", strings.Join(denied, ", ")).With(details...)
	}
	if len(ok) == 0 {
		return Info("topics are discovered at run time").With(details...)
	}
	return Pass("the integration user may subscribe to %s", strings.Join(ok, ", ")).With(details...)
}
