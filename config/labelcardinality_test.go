package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/store"
)

func TestLabelCardinalityValidationAndWarnings(t *testing.T) {
	_, err := load(t, "shape:\n  label_cardinality:\n    max_values_per_day: 20000\n    overflow_value: ' '\n")
	wantErrors(t, err, "shape.label_cardinality.max_values_per_day: 20000 is above 10000", "shape.label_cardinality.overflow_value: must not be empty")

	types := "shape:\n  types:\n    - type: Login\n      labels: [LOGIN_STATUS, user_id]\n"
	cfg := mustLoad(t, types)
	w := strings.Join(cfg.Warnings(), "\n")
	if !strings.Contains(w, "shape.types[0].labels[1]: user_id takes a value per user") || !strings.Contains(w, "max_values_per_day") {
		t.Errorf("warnings:\n%s", w)
	}
	if strings.Contains(w, "LOGIN_STATUS") {
		t.Errorf("a low-cardinality field is warned about:\n%s", w)
	}
	capped := mustLoad(t, types+"  label_cardinality:\n    max_values_per_day: 100\n")
	if w := strings.Join(capped.Warnings(), "\n"); !strings.Contains(w, "user_id") || strings.Contains(w, "cap it with") {
		t.Errorf("with a cap the warning still names the field, without suggesting the cap:\n%s", w)
	}
	if capped.Shape.LabelCardinality.OverflowValue != "__overflow__" {
		t.Errorf("overflow value %q, want the default", capped.Shape.LabelCardinality.OverflowValue)
	}
}

// TestLabelGuardMustFitTheStore: a cap whose counters would fill more than half of the store's
// document limit is refused (a full document stops every commit: the job would stall), for the
// ConfigMap store's ~1 MiB, not for the 16 MiB of the others.
func TestLabelGuardMustFitTheStore(t *testing.T) {
	cm := "state:\n  store: configmap\n  configmap:\n    name: sf2loki\n"
	types := "shape:\n  types:\n    - type: Login\n      labels: [LOGIN_STATUS, API_TYPE]\n    - type: API\n      labels: [login_status]\n"
	_, err := load(t, cm+types+"  label_cardinality:\n    max_values_per_day: 5000\n")
	wantErrors(t, err, "shape.label_cardinality.max_values_per_day: 5000 values a day of 2 promoted labels keep about 1953 KiB")
	mustLoad(t, cm+types+"  label_cardinality:\n    max_values_per_day: 1000\n")
	mustLoad(t, types+"  label_cardinality:\n    max_values_per_day: 10000\n") // the file store: 16 MiB
}

// TestLabelValueBytesCoversACounter keeps the estimate honest: the guard's counters, named and
// stamped as the job writes them, cost at most labelValueBytes each in the encoded document.
func TestLabelValueBytesCoversACounter(t *testing.T) {
	doc := &store.Document{Schema: 2, Checkpoints: map[string]store.Checkpoint{}, Counters: map[string]store.Counter{}}
	empty, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		name := fmt.Sprintf("%sapi_user_type_long:%016x", job.LabelValueCounterPrefix, uint64(i)*0x9e3779b97f4a7c15)
		doc.Counters[name] = store.Counter{Value: 1, Window: "2026-12-01", Epoch: 1 << 40, UpdatedAt: time.Now()}
	}
	full, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if per := (len(full) - len(empty)) / n; per > labelValueBytes {
		t.Fatalf("a counter costs %d bytes in the document, the estimate says %d", per, labelValueBytes)
	}
}
