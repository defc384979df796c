package config

// SOQLSource configures SOQL polling of event objects and Big Objects.
type SOQLSource struct {
	Enabled bool `yaml:"enabled" desc:"Poll the configured objects."`
}

func validateSOQL(s SOQLSource, path string, errs *Errors) {}
