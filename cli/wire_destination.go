package cli

import (
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
)

// destinations builds one job.Destination per distinct receiver, tenant and credentials that
// orgs[].sink.loki names, so that orgs sharing one are pushed together.
type destinations struct {
	cfg     *config.Config
	allowed []string // promoted label names, allowed by every client's label guard
	log     *slog.Logger
	built   []builtDestination
}

// builtDestination is a destination and the settings its client was built from.
type builtDestination struct {
	loki config.Loki
	dest *job.Destination
}

// forOrg returns the destination of an org's entries (nil: sink.loki's client, the default)
// and the shaper carrying its static labels.
func (d *destinations) forOrg(org config.OrgEntry, sh *shape.Shaper) (*job.Destination, *shape.Shaper, error) {
	if !org.OwnSink {
		return nil, sh, nil
	}
	if !maps.Equal(org.Sink.Labels, d.cfg.Sink.Loki.Labels) {
		sh = sh.WithMap(org.Sink.Labels) // merged over sink.loki.labels: each replaces its namesake
	}
	if config.SameReceiver(org.Sink, d.cfg.Sink.Loki) {
		return nil, sh, nil // only labels differ: the default client serves it
	}
	for _, b := range d.built {
		if config.SameReceiver(b.loki, org.Sink) {
			return b.dest, sh, nil
		}
	}
	lo := lokiOptions(org.Sink, d.cfg.HTTP, d.log)
	lo.Labels.ExtraAllowed = append(lo.Labels.ExtraAllowed, d.allowed...)
	c, err := loki.New(lo)
	if err != nil {
		return nil, nil, fmt.Errorf("%w the Loki client (%s): %w", errWiring, strings.TrimSuffix(org.Path, "salesforce")+"sink.loki", err)
	}
	dest := &job.Destination{Name: d.cfg.DestinationName(org.Sink), Sink: c}
	d.built = append(d.built, builtDestination{loki: org.Sink, dest: dest})
	return dest, sh, nil
}

// replayBindings returns the bindings of a dead-letter replay (job.ReplayBindings): one source
// per destination of the configuration.
func (d *destinations) replayBindings(path string, sh *shape.Shaper) ([]job.Binding, error) {
	var dests []*job.Destination
	for _, org := range d.cfg.OrgList() {
		dest, _, err := d.forOrg(org, sh)
		if err != nil {
			return nil, err
		}
		dests = append(dests, dest)
	}
	return job.ReplayBindings(path, d.cfg.DestinationName(d.cfg.Sink.Loki), dests), nil
}
