package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sf2loki/sf2loki/shape"
)

// EventLogFileSource configures the EventLogFile source.
type EventLogFileSource struct {
	Enabled         bool     `yaml:"enabled" desc:"Ship EventLogFile rows."`
	Interval        string   `yaml:"interval" default:"Hourly" enum:"Hourly|Daily" desc:"Which files to ship; Daily and Hourly hold the same events, so ship one (free-tier orgs have Daily only)."`
	EventTypes      []string `yaml:"event_types" example:"[Login, Logout, API, Report]" desc:"Event types to ship (Login, API, URI, ...), or * for every type the org produces (minus exclude and minus types whose category another source ships); required when enabled."`
	Exclude         []string `yaml:"exclude" desc:"Event types * discovery leaves out."`
	Lookback        Duration `yaml:"lookback" default:"24h" desc:"How far back a type with no checkpoint starts (by CreatedDate)."`
	Start           Time     `yaml:"start" example:"2024-06-01T00:00:00Z" desc:"Instead of lookback: the RFC 3339 time (by CreatedDate) a type with no checkpoint starts from; ignored once the type has one. Salesforce keeps EventLogFiles 30 days (1 year with Shield)."`
	SettleWindow    Duration `yaml:"settle_window" default:"5m" desc:"Files created less than this long ago (Salesforce's clock) wait for the next run: a just-listed file may still be being written (0 = off)."`
	DownloadMaxAge  Duration `yaml:"download_max_age" default:"24h" desc:"A file whose download keeps failing is abandoned (error log, file_abandoned counter) once older than this; younger, the type stops at it and retries next run."`
	PageSize        int      `yaml:"page_size" default:"1000" min:"1" desc:"Files listed per query (SOQL LIMIT, at most 2000); one listing per type per run while the page is not used up."`
	TimestampColumn string   `yaml:"timestamp_column" default:"TIMESTAMP_DERIVED" desc:"CSV column giving each row's time; then TIMESTAMP, then the file's LogDate."`
	TypedValues     bool     `yaml:"typed_values" default:"true" desc:"Write Number and Boolean columns (per LogFileFieldTypes) as JSON numbers and booleans instead of strings."`
	MaxRowBytes     ByteSize `yaml:"max_row_bytes" default:"8MiB" desc:"A CSV row longer than this (e.g. an unterminated quote) is skipped and counted instead of held in memory; 64KiB to 1GiB."`
}

// eventTypeRE is an EventLogFile event type name (a Salesforce API name).
var eventTypeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// notAnEventType is the refusal of a name validEventType refuses (format with the name).
const notAnEventType = "%q is not an event type name (letters, digits and underscores, starting with a letter) or *"

// validEventType reports whether t can name an event type (and be interpolated into SOQL).
func validEventType(t string) bool { return eventTypeRE.MatchString(t) && !strings.HasSuffix(t, "_") }

func validateEventLogFile(s EventLogFileSource, path string, errs *Errors) {
	if !s.Enabled {
		return
	}
	if len(s.EventTypes) == 0 {
		errs.add(path+".event_types", "is required: list the event types to ship (Login, API, ...) or * for all the org produces")
	}
	seen := map[string]bool{}
	for i, t := range s.EventTypes {
		p := fmt.Sprintf("%s.event_types[%d]", path, i)
		switch {
		case t == shape.Wildcard:
		case !validEventType(t):
			errs.add(p, notAnEventType, t)
		case seen[strings.ToLower(t)]:
			errs.add(p, "%q is listed twice", t)
		}
		seen[strings.ToLower(t)] = true
	}
	for i, t := range s.Exclude {
		if !eventTypeRE.MatchString(t) {
			errs.add(fmt.Sprintf("%s.exclude[%d]", path, i), "%q is not an event type name", t)
		}
	}
	if s.PageSize > 2000 {
		errs.add(path+".page_size", "%d is above 2000 (one listing page)", s.PageSize)
	}
	if s.Lookback == 0 {
		errs.add(path+".lookback", "must be positive")
	}
	if s.DownloadMaxAge == 0 {
		errs.add(path+".download_max_age", "must be positive")
	}
	if s.TimestampColumn == "" {
		errs.add(path+".timestamp_column", "must not be empty")
	}
	switch {
	case s.MaxRowBytes < 64<<10:
		errs.add(path+".max_row_bytes", "%s is too small; at least 64KiB", s.MaxRowBytes)
	case s.MaxRowBytes > maxRecordBytes:
		errs.add(path+".max_row_bytes", "%s is too large; at most 1GiB", s.MaxRowBytes)
	}
}

// maxRecordBytes bounds the settings that decide how large one record may grow (a CSV row, an
// Apex log body): a record's values are addressed with 32-bit offsets on their way to a line,
// and a record this large would also have to fit in memory whole.
const maxRecordBytes = 1 << 30

// claims lists the configured event types for the overlap guard (the wildcard included: two
// discovering sources would overlap on every shared category).
func (s EventLogFileSource) claims(path string) []shape.Claim {
	if !s.Enabled {
		return nil
	}
	out := make([]shape.Claim, 0, len(s.EventTypes))
	for i, t := range s.EventTypes {
		out = append(out, shape.Claim{Source: "eventlogfile", Name: t, Path: fmt.Sprintf("%s.event_types[%d]", path, i)})
	}
	return out
}
