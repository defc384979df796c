package cli

import (
	"fmt"
	"slices"

	"github.com/sf2loki/sf2loki/loki"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// pubSubSource builds the Pub/Sub source of one org (sources.pubsub or orgs[i].sources.pubsub).
// It opens its own gRPC client per invocation (authenticated with the org's shared Salesforce
// session) and closes it when the run has closed every topic's stream. Keys are unprefixed
// ("pubsub:<topic>"); the job adds the org prefix.
func pubSubSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	org, path := env.Org, env.Org.SourcesPath()
	c := org.Sources.PubSub
	client, err := sfpubsub.New(env.Client, sfpubsub.Options{
		Endpoint: c.Endpoint, Plaintext: c.Plaintext, TLSCAFile: c.TLS.CAFile, TLSServerName: c.TLS.ServerName,
		TLSInsecureSkipVerify: c.TLS.InsecureSkipVerify, Logger: env.Log, Now: env.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("%w the pubsub source (%s.pubsub): %w", errWiring, path, err)
	}
	// Discovery (*) skips the categories the org's other sources ship.
	owned := shape.Owned(org.Sources.Claims(path), pubsub.Name, env.Config.Shape.CategoryAliases)
	refresh := c.RefreshAfter.D()
	if refresh == 0 {
		refresh = -1 // the option's zero means its default; the key's 0 means never
	}
	var labels []loki.Label
	if org.Salesforce.OrgID != "" {
		labels = append(labels, loki.Label{Name: "sf_org_id", Value: org.Salesforce.OrgID})
	}
	labels = append(labels, env.orgLabel()...)
	start, startAt := c.Start.Preset()
	src, err := pubsub.New(client, env.Client, pubsub.Options{
		Topics: c.Topics, MaxEvents: c.MaxEvents, NumRequested: c.NumRequested, Idle: c.Idle.D(),
		RefreshAfter: refresh, AgeWarning: c.AgeWarning.D(), ReplayLost: pubsub.ReplayLost(c.ReplayLost), Start: start, StartAt: startAt,
		SkipDiscovered: func(topic string) bool { return slices.Contains(owned, sh.Category(topic)) },
		Shaper:         sh, Labels: labels,
		Closer: client, Log: env.Log, Now: env.Now,
	})
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%w the pubsub source (%s.pubsub): %w", errWiring, path, err)
	}
	return src, nil
}
