package config

// ApexLogSource configures the ApexLog source.
type ApexLogSource struct {
	Enabled bool `yaml:"enabled" desc:"Ship ApexLog debug logs."`
}

func validateApexLog(s ApexLogSource, path string, errs *Errors) {}
