package config

// Egress caps what sf2loki sends to Loki. Each job group has its own caps and its own budget
// counter (it lives in the group's checkpoint document).
type Egress struct {
	LinesPerSecond    float64  `yaml:"lines_per_second" desc:"Cap on entries pushed per second (0 = no cap)."`
	BytesPerSecond    ByteSize `yaml:"bytes_per_second" desc:"Cap on entry bytes (line + structured metadata) pushed per second (0 = no cap)."`
	DailyBytes        ByteSize `yaml:"daily_bytes" desc:"Budget of entry bytes per UTC day, counted in the checkpoint document (0 = none)."`
	OnBudgetExhausted string   `yaml:"on_budget_exhausted" default:"pause" enum:"pause|drop" desc:"pause: stop and report budget_paused, nothing lost, the next UTC day continues; drop: discard the rest of the day's records (counted) and advance."`
	WarnFraction      float64  `yaml:"warn_fraction" default:"0.8" desc:"Log a warning once the day's use passes this fraction of daily_bytes."`
}

func (c *Config) validateEgress(errs *Errors) {
	e := c.Egress
	if e.LinesPerSecond < 0 {
		errs.add("egress.lines_per_second", "must not be negative")
	}
	if e.WarnFraction <= 0 || e.WarnFraction >= 1 {
		errs.add("egress.warn_fraction", "%v must be between 0 and 1", e.WarnFraction)
	}
	if e.DailyBytes > 0 && e.DailyBytes < c.Sink.Loki.LineMaxBytes {
		errs.add("egress.daily_bytes", "%s is smaller than one maximal line (sink.loki.line_max_bytes %s)", e.DailyBytes, c.Sink.Loki.LineMaxBytes)
	}
}
