package cli

import (
	"log/slog"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/salesforce"
)

// orgEnv is what the source builders (wire_<source>.go) get for one org.
type orgEnv struct {
	// Name is the org's name from the orgs list; empty for the single-org form.
	Name string
	// Client talks to the org (one per org per invocation; its Stats feed the run report).
	Client *salesforce.Client
	// Config is the whole configuration (for sink.loki labels, shape, ...).
	Config *config.Config
	// Full is the configuration before a job group restricted it (config.ForJob), so that a
	// source's discovery skips categories that sources of other groups ship; nil means Config.
	Full *config.Config
	Log  *slog.Logger
	Now  func() time.Time
}
