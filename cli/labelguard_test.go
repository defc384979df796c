package cli

import (
	"fmt"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// shape.label_cardinality reaches the job: a promoted field with 12 values and a cap of 5 ships
// every row, 5 values as they are and the rest as the overflow value, counted in the report.
func TestLabelCardinalityCapFromTheConfiguration(t *testing.T) {
	w := newSimWorld(t, 21)
	at := time.Now().Add(-10 * time.Minute)
	for i := range 12 {
		if _, err := w.org.Insert("LoginHistory", simsf.Record{"LoginTime": at.Add(time.Duration(i) * time.Second), "Status": "Success",
			"SourceIp": fmt.Sprintf("10.0.0.%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := w.config(t, "", "  soql:\n    enabled: true\n    objects:\n      - name: LoginHistory\n        lookback: 1h\n",
		"shape:\n  types:\n    - type: LoginHistory\n      labels: [SourceIp]\n  label_cardinality:\n    max_values_per_day: 5\n    overflow_value: other\n")
	rep, stderr := runOnce(t, cfg)
	if rep.Outcome != job.OutcomeOK || rep.Records != 12 || rep.LabelOverflow["sourceip"] != 7 {
		t.Fatalf("run: %s, %d records, overflow %v\n%s", rep.Outcome, rep.Records, rep.LabelOverflow, stderr)
	}
	values := map[string]int{}
	for _, e := range w.receiver.Entries() {
		values[e.Label("sourceip")]++
		if e.Label("sourceip") == "other" && e.MetadataValue("sourceip"+job.OriginalMetadataSuffix) == "" {
			t.Errorf("an overflowed entry without its own value: %+v", e)
		}
	}
	if len(values) != 6 || values["other"] != 7 {
		t.Errorf("sourceip values at the receiver %v, want 5 values and 7 entries of other", values)
	}
}
