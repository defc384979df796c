package cli

import (
	"log/slog"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
)

// orgEnv is what the source builders (wire_<source>.go) get for one org.
type orgEnv struct {
	// Org is the org's configuration entry; its Name is empty for the single-org form.
	Org config.OrgEntry
	// Owners is the org's sources across every job group (config.ForJob restricts Config to
	// one group), so that a source's discovery skips categories other groups ship.
	Owners config.Sources
	// Client talks to the org (one per org per invocation; its Stats feed the run report).
	Client *salesforce.Client
	// Config is the whole configuration (for sink.loki labels, shape, ...).
	Config *config.Config
	Log    *slog.Logger
	Now    func() time.Time
}

// newOrgEnv is the environment of one org of cfg.
func newOrgEnv(cfg *config.Config, org config.OrgEntry, client *salesforce.Client, log *slog.Logger) orgEnv {
	owners := org.Sources
	if full, ok := cfg.Full().Org(org.Name); ok {
		owners = full.Sources
	}
	return orgEnv{Org: org, Owners: owners, Client: client, Config: cfg, Log: log.With("org", org.Name), Now: time.Now}
}

// orgLabel is the org label of a multi-org configuration (none for the single-org form).
func (e orgEnv) orgLabel() []loki.Label {
	if e.Org.Name == "" {
		return nil
	}
	return []loki.Label{{Name: "org", Value: e.Org.Name}}
}
