package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestPerRunCapsSayTheRunIsNotCaughtUp: the descriptions of the per-key caps of a run say that
// a key stopped there leaves the run not caught_up, listed under waiting in the run report (the
// sources end such a key with source.ErrWaiting), so no one reads caught_up as "the cap was
// never reached".
func TestPerRunCapsSayTheRunIsNotCaughtUp(t *testing.T) {
	for _, c := range []struct {
		key   string
		v     any
		field string
	}{
		{"sources.apexlog.max_records_per_run", ApexLogSource{}, "MaxRecordsPerRun"},
		{"sources.soql.objects[].max_records_per_run", SOQLObject{}, "MaxRecordsPerRun"},
		{"sources.pubsub.max_events", PubSubSource{}, "MaxEvents"},
	} {
		f, ok := reflect.TypeOf(c.v).FieldByName(c.field)
		if !ok {
			t.Fatalf("%s: no field %s", c.key, c.field)
		}
		d := f.Tag.Get("desc")
		for _, want := range []string{"not caught_up", "under waiting in the run report"} {
			if !strings.Contains(d, want) {
				t.Errorf("%s: the description does not say %q: %s", c.key, want, d)
			}
		}
	}
}
