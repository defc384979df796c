package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// sourceBuilder builds one source of one org from the configuration.
type sourceBuilder struct {
	name    string
	enabled func(config.Sources) bool
	build   func(orgEnv, *shape.Shaper) (source.Source, error)
}

// sourceBuilders lists every source in the order the job serves them.
var sourceBuilders = []sourceBuilder{
	{"eventlogfile", func(s config.Sources) bool { return s.EventLogFile.Enabled }, eventLogFileSource},
	{"soql", func(s config.Sources) bool { return s.SOQL.Enabled }, soqlSource},
	{"apexlog", func(s config.Sources) bool { return s.ApexLog.Enabled }, apexLogSource},
	{"pubsub", func(s config.Sources) bool { return s.PubSub.Enabled }, pubSubSource},
}

// orgBindings builds the enabled sources of one org.
func orgBindings(env orgEnv, s config.Sources, sh *shape.Shaper) ([]job.Binding, error) {
	var out []job.Binding
	for _, b := range sourceBuilders {
		if !b.enabled(s) {
			continue
		}
		src, err := b.build(env, sh)
		if err != nil {
			return nil, fmt.Errorf("org %s, source %s: %w", displayOrgName(env.Org.Name), b.name, err)
		}
		out = append(out, job.Binding{Org: env.Org.Name, Source: src})
	}
	return out, nil
}

func displayOrgName(name string) string {
	if name == "" {
		return "(single org)"
	}
	return name
}
