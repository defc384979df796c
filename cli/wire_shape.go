package cli

import (
	"fmt"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/shape"
)

// buildShaper compiles the shape section, with sink.loki.labels as the static stream labels.
// One Shaper serves every org and source; per-org labels (org, sf_org_id) are added by the
// source builders through Shaper.With or their schemas. The Loki client's label guard must allow
// Shaper.PromotedLabelNames (per-type promoted fields) besides sink.loki.extra_labels.
func buildShaper(cfg *config.Config) (*shape.Shaper, error) {
	opts := cfg.Shape.ShapeOptions()
	opts.Labels = cfg.Sink.Loki.Labels
	sh, err := shape.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w shaping (shape): %w", errWiring, err)
	}
	return sh, nil
}
