package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

// eventLogFileSource builds the EventLogFile source of one org (sources.eventlogfile or
// orgs[i].sources.eventlogfile). Keys are unprefixed ("eventlogfile:<EventType>"); the job
// adds the org prefix.
func eventLogFileSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	opts, err := eventLogFileOptions(env, sh)
	if err != nil {
		return nil, err
	}
	src, err := eventlogfile.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w the eventlogfile source: %w", errWiring, err)
	}
	return src, nil
}

// eventLogFileOptions maps the org's eventlogfile section onto the source's options.
func eventLogFileOptions(env orgEnv, sh *shape.Shaper) (eventlogfile.Options, error) {
	org, path, ok := findOrg(env.Config, env.Name)
	if !ok {
		return eventlogfile.Options{}, fmt.Errorf("%w the eventlogfile source: no org named %q", errWiring, env.Name)
	}
	c := org.Sources.EventLogFile
	// Discovery (*) skips the categories the org's other sources ship, in any job group.
	owners := org.Sources
	if env.Full != nil {
		if full, _, ok := findOrg(env.Full, env.Name); ok {
			owners = full.Sources
		}
	}
	owned := shape.Owned(owners.Claims(path), eventlogfile.Name, env.Config.Shape.CategoryAliases)
	settle := c.SettleWindow.D()
	if settle == 0 {
		settle = -1 // the option's zero means its default; the key's 0 means off
	}
	var labels []loki.Label
	if env.Name != "" {
		labels = append(labels, loki.Label{Name: "org", Value: env.Name})
	}
	return eventlogfile.Options{
		Client: env.Client, Shaper: sh,
		Interval: c.Interval, EventTypes: c.EventTypes, Exclude: c.Exclude, OwnedCategories: owned,
		Lookback: c.Lookback.D(), Start: c.Start.T(), SettleWindow: settle, DownloadMaxAge: c.DownloadMaxAge.D(),
		PageSize: c.PageSize, TimestampColumn: c.TimestampColumn, StringValues: !c.TypedValues,
		MaxRowBytes: int(c.MaxRowBytes.Int()), OrgID: org.Salesforce.OrgID, Labels: labels,
		Log: env.Log, Now: env.Now,
	}, nil
}

// findOrg returns the org called name (empty: the single-org form) and its sources path.
func findOrg(cfg *config.Config, name string) (config.OrgEntry, string, bool) {
	for i, o := range cfg.OrgList() {
		if o.Name != name {
			continue
		}
		if len(cfg.Orgs) > 0 {
			return o, fmt.Sprintf("orgs[%d].sources", i), true
		}
		return o, "sources", true
	}
	return config.OrgEntry{}, "", false
}
