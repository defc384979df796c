package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/soql"
)

// soqlSource builds the soql source of one org (sources.soql or orgs[i].sources.soql). The
// returned *soql.Source reports its API calls through Calls (for Binding.APICalls).
func soqlSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	org, ok := soqlOrg(env)
	if !ok {
		return nil, fmt.Errorf("%w the soql source: org %q is not configured", errWiring, env.Name)
	}
	opts := soql.Options{
		Client: env.Client, Shaper: sh, OrgID: org.Salesforce.OrgID, Log: env.Log, Now: env.Now,
	}
	if env.Name != "" {
		opts.Labels = []loki.Label{{Name: "org", Value: env.Name}}
	}
	for _, o := range org.Sources.SOQL.Objects {
		opts.Objects = append(opts.Objects, o.SourceObject())
	}
	src, err := soql.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w the soql source (%s.soql): %w", errWiring, soqlSourcesPath(env.Config, org), err)
	}
	return src, nil
}

// soqlOrg finds the configuration entry of env's org.
func soqlOrg(env orgEnv) (config.OrgEntry, bool) {
	for _, o := range env.Config.OrgList() {
		if o.Name == env.Name {
			return o, true
		}
	}
	return config.OrgEntry{}, false
}

// soqlSourcesPath is the config path of an org's sources section, for errors.
func soqlSourcesPath(cfg *config.Config, o config.OrgEntry) string {
	if len(cfg.Orgs) == 0 {
		return "sources"
	}
	return o.Path[:len(o.Path)-len(".salesforce")] + ".sources"
}
