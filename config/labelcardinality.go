package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/store/configmap"
	"github.com/sf2loki/sf2loki/store/file"
)

// LabelCardinality caps the distinct values of the promoted labels (shape.types[].labels).
type LabelCardinality struct {
	MaxValuesPerDay int    `yaml:"max_values_per_day" default:"0" min:"0" desc:"Distinct values each promoted label may take per UTC day (0 = no cap). Entries past it are shipped with the label set to overflow_value and their own value in structured metadata <label>_original; counted in the run report (label_overflow) and sf2loki_records_label_overflow_total. The day's values are kept, hashed, in the checkpoint document (a counter of about 200 bytes each): at most 10000, and labels × values may fill at most half of the store's document (about 2400 in all with the ConfigMap store, 40000 with the others)."`
	OverflowValue   string `yaml:"overflow_value" default:"__overflow__" desc:"Label value of the entries past max_values_per_day."`
}

// maxLabelValuesPerDay bounds the counters the guard keeps in the checkpoint document.
const maxLabelValuesPerDay = 10_000

// labelValueBytes is what one admitted value costs in the checkpoint document: its counter
// (name with the label and the value's hash, the day, the epoch, the time) is about 180 bytes.
const labelValueBytes = 200

// highCardinalityFields are record fields whose values are unbounded (one per user, address,
// session, request or record): promoted to a label, each makes a stream per value.
var highCardinalityFields = []string{
	"USER_ID", "USER_ID_DERIVED", "USER_NAME", "CLIENT_IP", "SOURCE_IP", "SESSION_KEY", "LOGIN_KEY", "REQUEST_ID",
	"URI", "URI_ID_DERIVED", "TIMESTAMP", "TIMESTAMP_DERIVED", "ENTITY_ID", "RECORD_ID", "QUERY", "SESSION_ID",
	"Id", "UserId", "Username", "SourceIp", "LoginKey", "SessionKey", "CreatedById", "LoginTime", "EventDate", "ReplayId",
}

func (c *Config) validateLabelCardinality(errs *Errors) {
	lc := c.Shape.LabelCardinality
	if lc.MaxValuesPerDay > maxLabelValuesPerDay {
		errs.add("shape.label_cardinality.max_values_per_day", "%d is above %d: the day's values are kept in the checkpoint document", lc.MaxValuesPerDay, maxLabelValuesPerDay)
	}
	if n, limit := c.guardedLabels(), c.storeMaxSize(); lc.MaxValuesPerDay > 0 && n*lc.MaxValuesPerDay*labelValueBytes > limit/2 {
		errs.add("shape.label_cardinality.max_values_per_day", "%d values a day of %d promoted labels keep about %d KiB of counters in the checkpoint document, "+
			"more than half of the %d KiB a %s store holds (the document is rewritten at every commit and a full one stops every commit): "+
			"lower the cap, promote fewer fields, or use a store with room (file, s3 and gcs hold %d MiB)",
			lc.MaxValuesPerDay, n, n*lc.MaxValuesPerDay*labelValueBytes>>10, limit>>10, c.State.Store, file.DefaultMaxSize>>20)
	}
	if strings.TrimSpace(lc.OverflowValue) == "" {
		errs.add("shape.label_cardinality.overflow_value", "must not be empty (an empty value removes the label)")
	}
}

// labelCardinalityWarnings names the promoted fields known to take a value per user, address,
// session or record.
func (c *Config) labelCardinalityWarnings() []string {
	var w []string
	for i, t := range c.Shape.Types {
		for k, f := range t.Labels {
			if !highCardinality(f) {
				continue
			}
			msg := fmt.Sprintf("shape.types[%d].labels[%d]: %s takes a value per user, address, session or record; as a label it makes a stream per value (prefer metadata)", i, k, f)
			if c.Shape.LabelCardinality.MaxValuesPerDay == 0 {
				msg += ", or cap it with shape.label_cardinality.max_values_per_day"
			}
			w = append(w, msg)
		}
	}
	return w
}

func highCardinality(field string) bool {
	return slices.ContainsFunc(highCardinalityFields, func(f string) bool { return strings.EqualFold(f, field) })
}

// guardedLabels counts the labels the guard caps: the shaper's promoted labels (none while the
// shape section is invalid; that is reported on its own).
func (c *Config) guardedLabels() int {
	sh, err := shape.New(c.ShaperOptions())
	if err != nil {
		return 0
	}
	return len(sh.PromotedLabelNames())
}

// storeMaxSize is the largest document state.store holds.
func (c *Config) storeMaxSize() int {
	if c.State.Store == "configmap" {
		return configmap.DefaultMaxSize
	}
	return file.DefaultMaxSize
}
