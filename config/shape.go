package config

// Shape configures how records become Loki entries: transforms, sampling, field routing.
type Shape struct{}

// validateOverlap is the startup guard refusing two sources that feed one event category.
func validateOverlap(s Sources, path string, errs *Errors) {}

func (c *Config) validateShape(errs *Errors) {}
