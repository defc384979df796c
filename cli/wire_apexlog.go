package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/apexlog"
)

// apexLogSource builds the apexlog source of one org (sources.apexlog or
// orgs[i].sources.apexlog). The returned *apexlog.Source reports its API calls through Calls.
func apexLogSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	org, ok := soqlOrg(env)
	if !ok {
		return nil, fmt.Errorf("%w the apexlog source: org %q is not configured", errWiring, env.Name)
	}
	opts := org.Sources.ApexLog.ApexLogOptions()
	opts.Client, opts.Shaper, opts.OrgID, opts.Log, opts.Now = env.Client, sh, org.Salesforce.OrgID, env.Log, env.Now
	if env.Name != "" {
		opts.Labels = []loki.Label{{Name: "org", Value: env.Name}}
	}
	src, err := apexlog.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w the apexlog source (%s.apexlog): %w", errWiring, soqlSourcesPath(env.Config, org), err)
	}
	return src, nil
}
