package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// OrgSink is one org's destination: where its entries go instead of sink.loki.
type OrgSink struct {
	Loki OrgLoki `yaml:"loki" desc:"This org's Loki receiver or tenant; every key left empty is taken from sink.loki (with its own url, credentials, headers and TLS are not inherited)."`
}

// OrgLoki overrides, for one org, the parts of sink.loki that name a receiver and a tenant. The
// push behaviour (batching, retries, limits, encoding) is sink.loki's for every org.
type OrgLoki struct {
	URL         string            `yaml:"url" desc:"Push URL of this org's receiver (empty = sink.loki.url)."`
	TenantID    string            `yaml:"tenant_id" example:"acme" desc:"X-Scope-OrgID of this org's tenant (empty = sink.loki.tenant_id). For VictoriaLogs, leave it empty and set headers AccountID and ProjectID."`
	Username    string            `yaml:"username" desc:"Basic auth user for this org's receiver."`
	Password    Secret            `yaml:"password" desc:"Basic auth password; prefer password_file."`
	BearerToken Secret            `yaml:"bearer_token" desc:"Bearer token; prefer bearer_token_file."`
	Headers     map[string]string `yaml:"headers" desc:"Extra HTTP headers on this org's pushes, over sink.loki.headers (VictoriaLogs tenants: AccountID, ProjectID)."`
	TLS         TLS               `yaml:"tls" desc:"TLS settings for this org's receiver (empty = sink.loki.tls, unless url is set)."`
	Labels      map[string]string `yaml:"labels" example:"{environment: acme-prod}" desc:"Static stream labels of this org's entries, over sink.loki.labels (allowlisted names only)."`
}

// set reports whether the org overrides anything.
func (o OrgLoki) set() bool {
	return o.URL != "" || o.TenantID != "" || o.Username != "" || o.Password != "" || o.BearerToken != "" ||
		len(o.Headers) > 0 || o.TLS != (TLS{}) || len(o.Labels) > 0
}

// credentials reports whether the override names credentials of its own.
func (o OrgLoki) credentials() bool {
	return o.Username != "" || o.Password != "" || o.BearerToken != ""
}

// OrgSinkLoki returns the Loki settings an org's entries are pushed with: sink.loki with the
// org's overrides. An org with a URL of its own inherits no credentials, headers or TLS from
// sink.loki: they belong to another receiver, and sending them elsewhere would leak them.
func (c *Config) OrgSinkLoki(o OrgLoki) Loki {
	l := c.Sink.Loki
	if !o.set() {
		return l
	}
	if o.URL != "" && o.URL != l.URL {
		l.URL, l.Username, l.Password, l.BearerToken, l.Headers, l.TLS = o.URL, "", "", "", nil, TLS{}
	}
	if o.TenantID != "" {
		l.TenantID = o.TenantID
	}
	if o.credentials() {
		l.Username, l.Password, l.BearerToken = o.Username, o.Password, o.BearerToken
	}
	if len(o.Headers) > 0 {
		l.Headers = maps.Clone(l.Headers)
		if l.Headers == nil {
			l.Headers = map[string]string{}
		}
		maps.Copy(l.Headers, o.Headers)
	}
	if o.TLS != (TLS{}) {
		l.TLS = o.TLS
	}
	if len(o.Labels) > 0 {
		l.Labels = maps.Clone(l.Labels)
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		maps.Copy(l.Labels, o.Labels)
	}
	return l
}

// DestinationName names the receiver and tenant of Loki settings, the way the job keeps its
// stream heads and the run report and the metrics break pushes down: the tenant for
// sink.loki's URL (sink.loki's own heads keep their names), tenant@host for another receiver
// (host alone without a tenant). Two orgs with the same name push to the same receiver and
// tenant, and share their stream heads.
func (c *Config) DestinationName(l Loki) string {
	if l.URL == c.Sink.Loki.URL {
		return l.TenantID
	}
	host := l.URL
	if u, err := url.Parse(l.URL); err == nil && u.Host != "" {
		host = u.Host
	}
	if l.TenantID == "" {
		return host
	}
	return l.TenantID + "@" + host
}

// SameReceiver reports whether two Loki settings make the same client: the same receiver,
// tenant, credentials, headers and TLS (the push behaviour is sink.loki's for every org). Orgs
// whose settings are the same receiver are pushed together.
func SameReceiver(a, b Loki) bool {
	return a.URL == b.URL && a.TenantID == b.TenantID && a.Username == b.Username && a.Password == b.Password &&
		a.BearerToken == b.BearerToken && a.TLS == b.TLS && maps.Equal(a.Headers, b.Headers)
}

// Receiver is one Loki receiver and tenant the configuration pushes to.
type Receiver struct {
	// Name is its DestinationName.
	Name string
	Loki Loki
	// Default marks sink.loki itself.
	Default bool
	// FirstAtURL marks the first receiver at its URL (the one whose clock is worth reading).
	FirstAtURL bool
}

// Receivers lists sink.loki and then every orgs[].sink.loki that is another receiver, once
// each, in the order of orgs.
func (c *Config) Receivers() []Receiver {
	out := []Receiver{{Name: c.DestinationName(c.Sink.Loki), Loki: c.Sink.Loki, Default: true, FirstAtURL: true}}
	urls := []string{c.Sink.Loki.URL}
	for _, org := range c.OrgList() {
		if !org.OwnSink || slices.ContainsFunc(out, func(r Receiver) bool { return SameReceiver(r.Loki, org.Sink) }) {
			continue
		}
		r := Receiver{Name: c.DestinationName(org.Sink), Loki: org.Sink}
		if !slices.Contains(urls, org.Sink.URL) {
			urls = append(urls, org.Sink.URL)
			r.FirstAtURL = true
		}
		out = append(out, r)
	}
	return out
}

// validateOrgSinks checks every orgs[].sink.loki: what sink.loki's rules would say of the
// merged settings, for the keys the org sets.
func (c *Config) validateOrgSinks(errs *Errors) {
	for i, o := range c.Orgs {
		ol := o.Sink.Loki
		if !ol.set() {
			continue
		}
		p := fmt.Sprintf("orgs[%d].sink.loki", i)
		if ol.URL != "" {
			if u, err := url.Parse(ol.URL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				errs.add(p+".url", "%q is not an absolute http(s) URL", ol.URL)
			}
		}
		if strings.Contains(ol.TenantID, "|") {
			errs.add(p+".tenant_id", "%q names several tenants; a push goes to one", ol.TenantID)
		}
		if ol.Password != "" && ol.Username == "" {
			errs.add(p+".username", "is required when %s.password is set", p)
		}
		if ol.BearerToken != "" && (ol.Username != "" || ol.Password != "") {
			errs.add(p+".bearer_token", "set either basic auth (username/password) or a bearer token, not both")
		}
		validateOrgLabels(ol.Labels, c.Sink.Loki.ExtraLabels, p+".labels", errs)
	}
}

// orgSinkWarnings advises on per-org destinations.
func (c *Config) orgSinkWarnings() []string {
	var w []string
	for i, o := range c.Orgs {
		ol := o.Sink.Loki
		if ol.TLS.InsecureSkipVerify {
			w = append(w, fmt.Sprintf("orgs[%d].sink.loki.tls.insecure_skip_verify is on: the receiver's certificate is not checked", i))
		}
		if ol.URL != "" && ol.URL != c.Sink.Loki.URL && !ol.credentials() && (c.Sink.Loki.Username != "" || c.Sink.Loki.BearerToken != "") {
			w = append(w, fmt.Sprintf("orgs[%d].sink.loki.url names another receiver and no credentials: sink.loki's credentials are not sent there; set orgs[%d].sink.loki.username/password or bearer_token if it needs any", i, i))
		}
	}
	return w
}
