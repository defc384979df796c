package cli

import (
	"fmt"

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
	org := env.Org
	c := org.Sources.EventLogFile
	// Discovery (*) skips the categories the org's other sources ship, in any job group.
	owned := shape.Owned(env.Owners.Claims(org.SourcesPath()), eventlogfile.Name, env.Config.Shape.CategoryAliases)
	settle := c.SettleWindow.D()
	if settle == 0 {
		settle = -1 // the option's zero means its default; the key's 0 means off
	}
	return eventlogfile.Options{
		Client: env.Client, Shaper: sh,
		Interval: c.Interval, EventTypes: c.EventTypes, Exclude: c.Exclude, OwnedCategories: owned,
		Lookback: c.Lookback.D(), Start: c.Start.T(), SettleWindow: settle, DownloadMaxAge: c.DownloadMaxAge.D(),
		PageSize: c.PageSize, TimestampColumn: c.TimestampColumn, StringValues: !c.TypedValues,
		MaxRowBytes: int(c.MaxRowBytes.Int()), OrgID: org.Salesforce.OrgID, Labels: env.orgLabel(),
		Log: env.Log, Now: env.Now,
	}, nil
}
