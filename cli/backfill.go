package cli

import (
	"path/filepath"
	"strings"

	"github.com/sf2loki/sf2loki/config"
)

// backfillSuffix marks the backfill's own document and lease.
const backfillSuffix = "-backfill"

// backfillConfig returns the configuration of the backfill's own document and lease, like a
// job group's: lease "<name>-backfill", document "<path>-backfill<ext>" (file), "<key>-backfill<ext>"
// (S3 key, GCS object), ConfigMap "<name>-backfill". A backfill never reads or fences the live
// document.
func backfillConfig(cfg *config.Config) *config.Config {
	out := *cfg
	name := cfg.Lease.Name
	if name == "" {
		name = "sf2loki"
	}
	out.Lease.Name = name + backfillSuffix
	out.State.File.Path = suffixed(cfg.State.File.Path)
	out.State.S3.Key = suffixed(cfg.State.S3.Key)
	out.State.GCS.Object = suffixed(cfg.State.GCS.Object)
	out.State.ConfigMap.Name = cfg.State.ConfigMap.Name + backfillSuffix
	return &out
}

// suffixed inserts the backfill suffix before a path's extension: state.json -> state-backfill.json.
func suffixed(p string) string {
	if p == "" {
		return p
	}
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + backfillSuffix + ext
}
