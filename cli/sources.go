package cli

import (
	"fmt"
	"log/slog"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/apexlog"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/source/soql"
)

// orgEnv is what a source builder gets for one org: the configuration maps the org's sections
// onto the source's options (config.Config.EventLogFileOptions, ...), the builder adds the
// org's client, the shaper and the logger.
type orgEnv struct {
	cfg    *config.Config
	org    config.OrgEntry // Name is empty for the single-org form
	client *salesforce.Client
	sh     *shape.Shaper
	log    *slog.Logger
}

// sourceBuilder builds one source of one org from the configuration.
type sourceBuilder struct {
	name    string
	enabled func(config.Sources) bool
	build   func(orgEnv) (source.Source, error)
}

// sourceBuilders lists every source in the order the job serves them. Keys are unprefixed
// ("eventlogfile:<EventType>"); the job adds the org prefix.
var sourceBuilders = []sourceBuilder{
	{eventlogfile.Name, func(s config.Sources) bool { return s.EventLogFile.Enabled }, func(e orgEnv) (source.Source, error) {
		o := e.cfg.EventLogFileOptions(e.org)
		o.Client, o.Shaper, o.Log = e.client, e.sh, e.log
		return eventlogfile.New(o)
	}},
	{soql.Name, func(s config.Sources) bool { return s.SOQL.Enabled }, func(e orgEnv) (source.Source, error) {
		o := e.org.SOQLOptions()
		o.Client, o.Shaper, o.Log = e.client, e.sh, e.log
		return soql.New(o)
	}},
	{apexlog.Name, func(s config.Sources) bool { return s.ApexLog.Enabled }, func(e orgEnv) (source.Source, error) {
		o := e.org.ApexLogOptions()
		o.Client, o.Shaper, o.Log = e.client, e.sh, e.log
		return apexlog.New(o)
	}},
	// Pub/Sub opens its own gRPC client per invocation (authenticated with the org's Salesforce
	// session); the source closes it when the run has closed every topic's stream.
	{pubsub.Name, func(s config.Sources) bool { return s.PubSub.Enabled }, func(e orgEnv) (source.Source, error) {
		co, o := e.cfg.PubSubOptions(e.org)
		co.Logger = e.log
		client, err := sfpubsub.New(e.client, co)
		if err != nil {
			return nil, err
		}
		o.Shaper, o.Closer, o.Log = e.sh, client, e.log
		src, err := pubsub.New(client, e.client, o)
		if err != nil {
			_ = client.Close()
		}
		return src, err
	}},
}

// orgBindings builds the enabled sources of one org.
func orgBindings(cfg *config.Config, org config.OrgEntry, client *salesforce.Client, sh *shape.Shaper, log *slog.Logger) ([]job.Binding, error) {
	env := orgEnv{cfg: cfg, org: org, client: client, sh: sh, log: log.With("org", org.Name)}
	var out []job.Binding
	for _, b := range sourceBuilders {
		if !b.enabled(org.Sources) {
			continue
		}
		src, err := b.build(env)
		if err != nil {
			return nil, fmt.Errorf("%w the %s source (%s.%s): %w", errWiring, b.name, org.SourcesPath(), b.name, err)
		}
		out = append(out, job.Binding{Org: org.Name, Source: src})
	}
	return out, nil
}

// buildShaper compiles the shape section, with sink.loki.labels as the static stream labels.
// One Shaper serves every org and source; per-org labels (org, sf_org_id) are added by the
// source builders through Shaper.With or their schemas. The Loki client's label guard must allow
// Shaper.PromotedLabelNames (per-type promoted fields) besides sink.loki.extra_labels.
func buildShaper(cfg *config.Config) (*shape.Shaper, error) {
	sh, err := shape.New(cfg.ShaperOptions())
	if err != nil {
		return nil, fmt.Errorf("%w shaping (shape): %w", errWiring, err)
	}
	return sh, nil
}
