package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/soql"
)

// soqlSource builds the soql source of one org (sources.soql or orgs[i].sources.soql). The
// returned *soql.Source reports its API calls through Calls (for Binding.APICalls).
func soqlSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	org := env.Org
	opts := soql.Options{
		Client: env.Client, Shaper: sh, OrgID: org.Salesforce.OrgID, Labels: env.orgLabel(), Log: env.Log, Now: env.Now,
	}
	for _, o := range org.Sources.SOQL.Objects {
		opts.Objects = append(opts.Objects, o.SourceObject())
	}
	src, err := soql.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w the soql source (%s.soql): %w", errWiring, org.SourcesPath(), err)
	}
	return src, nil
}
