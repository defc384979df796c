package loki

import (
	"errors"
	"strings"
	"testing"
)

func TestLabelsCanonicalForm(t *testing.T) {
	cases := []struct {
		in   []Label
		want string
	}{
		{nil, "{}"},
		{[]Label{{"job", "x"}}, `{job="x"}`},
		{[]Label{{"source", "s"}, {"job", "x"}}, `{job="x", source="s"}`},
		{[]Label{{"job", `a"b\c` + "\nd"}}, `{job="a\"b\\c\nd"}`},
		{[]Label{{"job", "é日🦆"}}, `{job="é日🦆"}`},
		{[]Label{{"job", "tab\there"}}, `{job="tab\there"}`},
		{[]Label{{"job", ""}, {"org", "o"}}, `{org="o"}`},  // empty value dropped
		{[]Label{{"job", "a"}, {"job", "b"}}, `{job="b"}`}, // last wins
	}
	for _, tc := range cases {
		if got := NewLabels(tc.in...).String(); got != tc.want {
			t.Errorf("NewLabels(%q).String() = %s, want %s", tc.in, got, tc.want)
		}
	}
	var zero Labels
	if zero.String() != "{}" || zero.Len() != 0 {
		t.Errorf("zero Labels = %s", zero.String())
	}
}

func TestLabelsAccessors(t *testing.T) {
	l := LabelsFromMap(map[string]string{"job": "j", "org": "o", "environment": ""})
	if l.Len() != 2 || l.At(0) != (Label{"job", "j"}) {
		t.Fatalf("labels %v", l)
	}
	if v, ok := l.Get("org"); !ok || v != "o" {
		t.Fatalf("Get(org) = %q, %v", v, ok)
	}
	if _, ok := l.Get("environment"); ok {
		t.Fatal("empty-valued label kept")
	}
	m := l.With(Label{"source", "s"}, Label{"org", ""})
	if m.String() != `{job="j", source="s"}` || l.String() != `{job="j", org="o"}` {
		t.Fatalf("With: %s (original now %s)", m, l)
	}
	if len(m.Map()) != 2 {
		t.Fatalf("Map %v", m.Map())
	}
}

func TestLabelGuardCheck(t *testing.T) {
	g, err := NewLabelGuard(LabelOptions{ExtraAllowed: []string{"region"}, MaxValueBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	many := []Label{{"service_name", "s"}}
	for i := range 15 {
		many = append(many, Label{Name: "x" + strings.Repeat("a", i), Value: "v"})
	}
	gBig, _ := NewLabelGuard(LabelOptions{ExtraAllowed: namesOf(many)})
	cases := []struct {
		name   string
		guard  *LabelGuard
		labels Labels
		label  string // offending label, "" for a set problem, "-" for valid
	}{
		{"allowlisted", g, lbl("job", "a", "source", "b", "event_type", "c", "sf_org_id", "d", "environment", "e", "org", "f", "service_name", "g"), "-"},
		{"extra allowed", g, lbl("region", "eu"), "-"},
		{"not allowed", g, lbl("job", "a", "user_id", "u"), "user_id"},
		{"reserved prefix", g, lbl("__name__", "x"), "__name__"},
		{"bad syntax", g, lbl("job-name", "x"), "job-name"},
		{"leading digit", g, lbl("1job", "x"), "1job"},
		{"value too long", g, lbl("job", "12345678901"), "job"},
		{"value at limit", g, lbl("job", "1234567890"), "-"},
		{"invalid utf-8", g, lbl("job", "\xff"), "job"},
		{"empty set", g, NewLabels(), ""},
		{"15 plus service_name", gBig, NewLabels(many...), "-"},
		{"16 labels", gBig, NewLabels(append(many, Label{"job", "j"})...), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.guard.Check(tc.labels)
			if tc.label == "-" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want nil", tc.labels, err)
				}
				return
			}
			var le *LabelError
			if !errors.As(err, &le) || !errors.Is(err, ErrInvalidLabel) || le.Name != tc.label {
				t.Fatalf("Check(%s) = %v, want a LabelError naming %q", tc.labels, err, tc.label)
			}
		})
	}
}

func namesOf(ls []Label) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func TestValidateStaticLabels(t *testing.T) {
	if err := ValidateStaticLabels(map[string]string{"job": "sf2loki", "environment": "prod", "service_name": "sf2loki"}, LabelOptions{}); err != nil {
		t.Fatalf("valid static labels: %v", err)
	}
	err := ValidateStaticLabels(map[string]string{"job": "x", "source": "s", "team": "t", "org": ""}, LabelOptions{})
	for _, name := range []string{`"source"`, `"team"`, `"org"`} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
	if !errors.Is(err, ErrInvalidLabel) {
		t.Errorf("error %v does not wrap ErrInvalidLabel", err)
	}
	if err := ValidateStaticLabels(map[string]string{"team": "t"}, LabelOptions{ExtraAllowed: []string{"team"}}); err != nil {
		t.Errorf("explicitly allowed extra: %v", err)
	}
}

// TestCheckLabelNameIsTheGuards: CheckLabelName accepts exactly the names the label guard takes
// as extra allowed names.
func TestCheckLabelNameIsTheGuards(t *testing.T) {
	for _, n := range []string{"team", "_x", "a1", "", "__x", "1a", "a-b", "é", strings.Repeat("a", maxLabelNameBytes), strings.Repeat("a", maxLabelNameBytes+1)} {
		_, guardErr := NewLabelGuard(LabelOptions{ExtraAllowed: []string{n}})
		err := CheckLabelName(n)
		if (err == nil) != (guardErr == nil) || (err != nil && !errors.Is(err, ErrInvalidLabel)) {
			t.Errorf("CheckLabelName(%.20q) = %v, the guard says %v", n, err, guardErr)
		}
	}
}

func TestParseLabelsInvertsString(t *testing.T) {
	for _, l := range []Labels{
		NewLabels(),
		lbl("job", "sf2loki"),
		lbl("event_type", `Quote"Back\slash é日, x="y"`, "job", "sf2loki", "source", "eventlogfile"),
	} {
		got, err := ParseLabels(l.String())
		if err != nil || got.String() != l.String() {
			t.Fatalf("ParseLabels(%s) = %s, %v", l, got, err)
		}
	}
	for _, bad := range []string{"", "job=x", `{job=x}`, `{job="x" source="y"}`, `{1job="x"}`, `{job="x}`} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("ParseLabels(%q) accepted", bad)
		}
	}
}
