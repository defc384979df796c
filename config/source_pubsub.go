package config

// PubSubSource configures the Pub/Sub API source.
type PubSubSource struct {
	Enabled bool `yaml:"enabled" desc:"Subscribe to the configured topics."`
}

func validatePubSub(s PubSubSource, path string, errs *Errors) {}
