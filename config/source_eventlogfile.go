package config

// EventLogFileSource configures the EventLogFile source.
type EventLogFileSource struct {
	Enabled bool `yaml:"enabled" desc:"Ship EventLogFile rows."`
}

func validateEventLogFile(s EventLogFileSource, path string, errs *Errors) {}
