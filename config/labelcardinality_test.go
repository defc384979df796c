package config

import (
	"strings"
	"testing"
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
