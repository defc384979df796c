package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/apexlog"
)

// apexLogSource builds the apexlog source of one org (sources.apexlog or
// orgs[i].sources.apexlog). The returned *apexlog.Source reports its API calls through Calls.
func apexLogSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	org := env.Org
	opts := org.Sources.ApexLog.ApexLogOptions()
	opts.Client, opts.Shaper, opts.OrgID, opts.Log, opts.Now = env.Client, sh, org.Salesforce.OrgID, env.Log, env.Now
	opts.Labels = env.orgLabel()
	src, err := apexlog.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w the apexlog source (%s.apexlog): %w", errWiring, org.SourcesPath(), err)
	}
	return src, nil
}
