package config

import (
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/apexlog"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/source/soql"
)

// The options each section maps to: what a key means for the package it configures is decided
// here, once. The caller adds what a configuration does not hold — clients, the shaper, the
// logger and the clock — and builds the part.

// ClientOptions maps a Loki section (sink.loki, or an org's effective sink) and the proxy of
// http onto the push client's options.
func (l Loki) ClientOptions(h HTTP) loki.Options {
	enc := loki.EncodingProtobuf
	if l.Encoding == "json" {
		enc = loki.EncodingJSON
	}
	return loki.Options{
		URL: l.URL, TenantID: l.TenantID, Username: l.Username, Password: l.Password.Value(),
		BearerToken: l.BearerToken.Value(), Headers: l.Headers,
		TLS: loki.TLSOptions{CAFile: l.TLS.CAFile, CertFile: l.TLS.CertFile, KeyFile: l.TLS.KeyFile,
			ServerName: l.TLS.ServerName, InsecureSkipVerify: l.TLS.InsecureSkipVerify},
		Timeout: l.Timeout.D(), Encoding: enc, Gzip: l.Gzip,
		TargetCompressedBytes: int(l.BatchTargetBytes), MaxRequestBytes: int(l.BatchMaxBytes),
		MaxEntriesPerRequest: l.BatchMaxEntries, MaxAttempts: l.MaxRetries + 1,
		MinBackoff: l.MinBackoff.D(), MaxBackoff: l.MaxBackoff.D(), MaxLineBytes: int(l.LineMaxBytes),
		Labels: loki.LabelOptions{ExtraAllowed: l.ExtraLabels}, Limits: l.ReceiverLimits(), Proxy: h.ProxyFunc(),
	}
}

// ReceiverLimits are the receiver's limits the client and the job predict rejections with.
func (l Loki) ReceiverLimits() loki.Limits {
	return loki.Limits{MaxAge: l.MaxAge.D(), CreationGracePeriod: l.CreationGrace.D(), OutOfOrderWindow: l.OutOfOrderWindow.D(),
		DisallowStructuredMetadata: !l.StructuredMetadata, MaxMetadataBytes: int(l.MetadataMaxBytes), MaxMetadataEntries: l.MetadataMaxEntries}
}

// ClientOptions maps one org's salesforce section and the proxy of http onto the client's
// options.
func (s Salesforce) ClientOptions(h HTTP) salesforce.Options {
	return salesforce.Options{
		LoginURL: s.EffectiveLoginURL(), InstanceURL: s.InstanceURL, APIVersion: s.APIVersion,
		AuthMode: salesforce.AuthMode(s.AuthMode), ClientID: s.ClientID, Username: s.Username,
		PrivateKeyPEM: []byte(s.PrivateKey.Value()), ClientSecret: s.ClientSecret.Value(), OrgID: s.OrgID,
		TokenLifetime: s.TokenLifetime.D(), HTTPTimeout: s.Timeout.D(), MaxAttempts: s.MaxRetries + 1,
		BatchSize: s.BatchSize, TLSCAFile: s.TLS.CAFile, TLSInsecureSkipVerify: s.TLS.InsecureSkipVerify,
		Proxy: h.ProxyFunc(),
	}
}

// ShaperOptions compiles the shape section with sink.loki.labels as the static stream labels.
func (c *Config) ShaperOptions() shape.Options {
	opts := c.Shape.ShapeOptions()
	opts.Labels = c.Sink.Loki.Labels
	return opts
}

// OrgLabels are the stream labels a multi-org configuration gives an org's entries (org=<name>);
// none for the single-org form.
func (o OrgEntry) OrgLabels() []loki.Label {
	if o.Name == "" {
		return nil
	}
	return []loki.Label{{Name: "org", Value: o.Name}}
}

// owned lists the categories the org's other sources ship, in every job group (ForJob restricts
// c to one group), so that a source's discovery (*) skips them.
func (c *Config) owned(o OrgEntry, source string) []string {
	owners := o.Sources
	if full, ok := c.Full().Org(o.Name); ok {
		owners = full.Sources
	}
	return shape.Owned(owners.Claims(o.SourcesPath()), source, c.Shape.CategoryAliases)
}

// EventLogFileOptions maps an org's eventlogfile section onto the source's options.
func (c *Config) EventLogFileOptions(o OrgEntry) eventlogfile.Options {
	e := o.Sources.EventLogFile
	settle := e.SettleWindow.D()
	if settle == 0 {
		settle = -1 // the option's zero means its default; the key's 0 means off
	}
	return eventlogfile.Options{
		Interval: e.Interval, EventTypes: e.EventTypes, Exclude: e.Exclude, OwnedCategories: c.owned(o, eventlogfile.Name),
		Lookback: e.Lookback.D(), Start: e.Start.T(), SettleWindow: settle, DownloadMaxAge: e.DownloadMaxAge.D(),
		PageSize: e.PageSize, TimestampColumn: e.TimestampColumn, StringValues: !e.TypedValues,
		MaxRowBytes: int(e.MaxRowBytes.Int()), OrgID: o.Salesforce.OrgID, Labels: o.OrgLabels(),
	}
}

// SOQLOptions maps an org's soql section onto the source's options.
func (o OrgEntry) SOQLOptions() soql.Options {
	opts := soql.Options{OrgID: o.Salesforce.OrgID, Labels: o.OrgLabels()}
	for _, obj := range o.Sources.SOQL.Objects {
		opts.Objects = append(opts.Objects, obj.SourceObject())
	}
	return opts
}

// ApexLogOptions maps an org's apexlog section onto the source's options.
func (o OrgEntry) ApexLogOptions() apexlog.Options {
	opts := o.Sources.ApexLog.ApexLogOptions()
	opts.OrgID, opts.Labels = o.Salesforce.OrgID, o.OrgLabels()
	return opts
}

// PubSubOptions maps an org's pubsub section onto the gRPC client's and the source's options.
func (c *Config) PubSubOptions(o OrgEntry) (sfpubsub.Options, pubsub.Options) {
	p := o.Sources.PubSub
	refresh := p.RefreshAfter.D()
	if refresh == 0 {
		refresh = -1 // the option's zero means its default; the key's 0 means never
	}
	var labels []loki.Label
	if o.Salesforce.OrgID != "" {
		labels = append(labels, loki.Label{Name: "sf_org_id", Value: o.Salesforce.OrgID})
	}
	start, startAt := p.Start.Preset()
	return p.ClientOptions(), pubsub.Options{
		Topics: p.Topics, MaxEvents: p.MaxEvents, NumRequested: p.NumRequested, Idle: p.Idle.D(),
		RefreshAfter: refresh, AgeWarning: p.AgeWarning.D(), ReplayLost: pubsub.ReplayLost(p.ReplayLost), Start: start, StartAt: startAt,
		OwnedCategories: c.owned(o, pubsub.Name), Labels: append(labels, o.OrgLabels()...),
	}
}

// ClientOptions maps the pubsub section onto the gRPC client's options.
func (p PubSubSource) ClientOptions() sfpubsub.Options {
	return sfpubsub.Options{Endpoint: p.Endpoint, Plaintext: p.Plaintext, TLSCAFile: p.TLS.CAFile,
		TLSServerName: p.TLS.ServerName, TLSInsecureSkipVerify: p.TLS.InsecureSkipVerify}
}
