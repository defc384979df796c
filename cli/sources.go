package cli

import (
	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
)

// orgBindings builds the enabled sources of one org.
func orgBindings(env orgEnv, s config.Sources) ([]job.Binding, error) {
	var out []job.Binding
	_ = s
	_ = env
	return out, nil
}
