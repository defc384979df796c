package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
)

// oneOrgSink is a multi-org configuration whose only org sets the static labels sink (YAML flow
// map); sink.loki is appended by the caller.
func oneOrgSink(labels string) string { return oneOrgLoki("        labels: " + labels + "\n") }

// oneOrgLoki is a multi-org configuration of one org whose sink.loki section is sink, indented
// under it.
func oneOrgLoki(sink string) string {
	return `
orgs:
  - name: a
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [Login]}
    sink:
      loki:
` + sink
}

// TestStaticLabelsAreTheLokiClientsToJudge: a static label config accepts, in sink.loki.labels or
// in an org's, is one the Loki client's static-label rule accepts (loki.ValidateStaticLabels):
// none it refuses (backfill, allowed through extra_labels or not, source, event_type) gets past
// config check to be refused at start or push. Each refusal names the key to change.
func TestStaticLabelsAreTheLokiClientsToJudge(t *testing.T) {
	extra := func(names ...string) string {
		return "sink:\n  loki:\n    extra_labels: [" + strings.Join(names, ", ") + "]\n"
	}
	global := func(labels string, extras ...string) string {
		return extra(extras...) + "    labels: " + labels + "\n"
	}
	for _, tc := range []struct {
		name, yaml string
		want       []string // "" for none
	}{
		{"backfill allowed through extra_labels", global("{backfill: \"true\"}", "backfill"), []string{"sink.loki.labels.backfill: "}},
		{"source", global("{source: s}"), []string{"sink.loki.labels.source: "}},
		{"event_type", global("{event_type: Login}"), []string{"sink.loki.labels.event_type: "}},
		{"an org's backfill allowed through extra_labels", oneOrgSink("{backfill: \"true\"}") + extra("backfill"), []string{"orgs[0].sink.loki.labels.backfill: "}},
		{"an org's backfill", oneOrgSink("{backfill: \"true\"}"), []string{"orgs[0].sink.loki.labels.backfill: "}},
		{"an org's source", oneOrgSink("{source: s}"), []string{"orgs[0].sink.loki.labels.source: "}},
		{"an org's org", oneOrgSink("{org: o}"), []string{"orgs[0].sink.loki.labels.org: is set per entry"}},
		{"a name outside the allowlist", global("{team: t}"), []string{"sink.loki.labels.team: ", "sink.loki.extra_labels"}},
		{"an org's name outside the allowlist", oneOrgSink("{team: t}"), []string{"orgs[0].sink.loki.labels.team: ", "sink.loki.extra_labels"}},
		{"an empty value", global("{environment: \"\"}"), []string{"sink.loki.labels.environment: "}},
		{"an extra name Loki reserves", extra("__team"), []string{"sink.loki.extra_labels: "}},
		{"an extra name Loki refuses", extra("team-a"), []string{"sink.loki.extra_labels: "}},
		{"allowlisted names", global("{environment: prod, job: sf2loki, service_name: sf, sf_org_id: x}"), nil},
		{"a name allowed through extra_labels", global("{team: sec}", "team") + oneOrgSink("{team: t, environment: e}"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want no error, got: %v", err)
				}
				return
			}
			wantErrors(t, err, tc.want...)
		})
	}
}

// TestStaticLabelVerdictsAreTheLokiClients: for every name of the Loki client's allowlist and
// one allowed through extra_labels, config check accepts a static label of that name exactly when
// loki.ValidateStaticLabels does: the allowlist and the names a static label may not take have
// one home, the loki package.
func TestStaticLabelVerdictsAreTheLokiClients(t *testing.T) {
	for _, n := range append(loki.AllowedLabelNames(), "team") {
		lokiErr := loki.ValidateStaticLabels(map[string]string{n: "v"}, loki.LabelOptions{ExtraAllowed: []string{"team"}})
		for _, yaml := range []string{
			"sink:\n  loki:\n    extra_labels: [team]\n    labels: {" + n + ": v}\n",
			fmt.Sprintf("sink:\n  loki:\n    extra_labels: [team]\n"+oneOrgSink("{%s: v}"), n),
		} {
			_, err := load(t, yaml)
			if n == "org" && strings.Contains(yaml, "orgs:") {
				// An org's entries carry org=<its name>: a static org label is config's to refuse.
				if err == nil {
					t.Errorf("an org's static label org: config check accepts it")
				}
				continue
			}
			if (err == nil) != (lokiErr == nil) {
				t.Errorf("static label %s:\nconfig check: %v\nloki.ValidateStaticLabels: %v\nconfig:\n%s", n, err, lokiErr, yaml)
			}
		}
	}
}

// TestPromotedLabelsLeaveRoomForStaticLabels: each static label allowed through extra_labels, in
// sink.loki.labels or an org's, is one more label on every stream of the org. Config check lets a
// type promote only as many fields as the Loki client's guard then accepts on the org's streams,
// a backfill's included (backfill), and its refusal names the type, the org, the static labels
// and how many promoted labels fit.
func TestPromotedLabelsLeaveRoomForStaticLabels(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sink      string // the body of sink.loki
		orgLabels string // orgs[0].sink.loki.labels
		want      []string
	}{
		{"sink.loki.labels", "    extra_labels: [team]\n    labels: {team: sec, environment: prod}\n", "{}",
			[]string{"sink.loki.labels.team"}},
		{"an org's labels", "    extra_labels: [team, region]\n    labels: {environment: prod}\n", "{team: sec, region: eu}",
			[]string{"orgs[0].sink.loki.labels.region", "orgs[0].sink.loki.labels.team"}},
		{"both", "    extra_labels: [team, region]\n    labels: {team: sec, environment: prod}\n", "{region: eu}",
			[]string{"orgs[0].sink.loki.labels.region", "sink.loki.labels.team"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := func(n int) string {
				var promoted []string
				for i := range n {
					promoted = append(promoted, fmt.Sprintf("F%d", i))
				}
				return oneOrgSink(tc.orgLabels) + "sink:\n  loki:\n" + tc.sink +
					"shape:\n  types:\n    - type: Login\n      labels: [" + strings.Join(promoted, ", ") + "]\n"
			}
			// Every label the org's backfill streams of Login carry with no field promoted.
			set, _ := orgStream(t, mustLoad(t, yaml(0)))
			room := loki.MaxLabelNames - (set.Len() - 1) // service_name is not counted
			for _, n := range []int{room, room + 1} {
				cfg, err := load(t, yaml(n))
				if n > room {
					wantErrors(t, err, append([]string{"shape.types[0].labels: ", "Login", "org a", fmt.Sprintf("at most %d", room)}, tc.want...)...)
					continue
				}
				if err != nil {
					t.Fatalf("%d promoted labels: %v", n, err)
				}
				set, g := orgStream(t, cfg)
				if err := g.Check(set); err != nil {
					t.Errorf("config check accepted %d promoted labels, but the guard refuses the stream %s: %v", n, set, err)
				}
			}
		})
	}
	// The single-org form: no org to name.
	_, err := load(t, "sink:\n  loki:\n    extra_labels: [team]\n    labels: {team: sec}\n"+
		"shape:\n  types:\n    - type: API\n      labels: [A, B, C, D, E, F, G, H]\n")
	wantErrors(t, err, "shape.types[0].labels: 8 promoted labels of API", "sink.loki.labels.team", "at most 7")
	// Static labels that leave no room for the labels sf2loki sets are refused whatever is promoted.
	var names []string
	for i := range loki.MaxLabelNames {
		names = append(names, fmt.Sprintf("l%d", i))
	}
	_, err = load(t, oneOrgSink("{"+strings.Join(names, ": v, ")+": v}")+"sink:\n  loki:\n    extra_labels: ["+strings.Join(names, ", ")+"]\n")
	wantErrors(t, err, "orgs[0].sink.loki.labels: ", "org a")
}

// orgStream returns the labels the first org's backfill entries of Login carry, every promoted
// field set, the way the run builds them (sink.loki.labels, the org's over them, org, sf_org_id,
// backfill), and the Loki client's label guard for them.
func orgStream(t *testing.T, cfg *Config) (loki.Labels, *loki.LabelGuard) {
	t.Helper()
	sh, err := shape.New(cfg.ShaperOptions())
	if err != nil {
		t.Fatal(err)
	}
	org := cfg.OrgList()[0]
	sh = sh.WithMap(org.Sink.Labels).With(org.OrgLabels()...)
	var promoted []string
	for _, tr := range cfg.Shape.Types {
		promoted = append(promoted, tr.Labels...)
	}
	p := sh.Plan(shape.Schema{Source: "eventlogfile", Type: "Login", Fields: promoted,
		Labels: []loki.Label{{Name: "sf_org_id", Value: "00D000000000001"}}})
	var r shape.Record
	for _, f := range promoted {
		r.AppendString(f, shape.String, "v")
	}
	e, _ := p.Shape(&r)
	g, err := loki.NewLabelGuard(loki.LabelOptions{ExtraAllowed: append(slices.Clone(org.Sink.ExtraLabels), sh.PromotedLabelNames()...)})
	if err != nil {
		t.Fatal(err)
	}
	return e.Labels.With(loki.Label{Name: "backfill", Value: "true"}), g // eventlogfile.BackfillLabel
}

// TestLabelDescriptionsMatchTheLokiClient: the descriptions of sink.loki.extra_labels and
// shape.types[].labels (struct tags: literal text, nothing computed) name the Loki client's fixed
// allowlist, which a promoted field may not take either, and shape's count of the labels a type
// may promote.
func TestLabelDescriptionsMatchTheLokiClient(t *testing.T) {
	desc := func(v any, name string) string {
		f, _ := reflect.TypeOf(v).FieldByName(name)
		return f.Tag.Get("desc")
	}
	list := regexp.MustCompile(`\(([a-z_]+(?:, [a-z_]+)+)\)`)
	want := loki.AllowedLabelNames()
	slices.Sort(want)
	for _, d := range []string{desc(Loki{}, "ExtraLabels"), desc(ShapeType{}, "Labels")} {
		m := list.FindStringSubmatch(d)
		if m == nil {
			t.Errorf("the description does not list the allowlist in parentheses: %s", d)
			continue
		}
		got := strings.Split(m[1], ", ")
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("the description lists %v, the Loki client's allowlist is %v: %s", got, want, d)
		}
	}
	d := desc(ShapeType{}, "Labels")
	if want := fmt.Sprintf("at most %d per type", shape.PromotedLabelRoom(0)); !strings.Contains(d, want) {
		t.Errorf("the description does not say %q: %s", want, d)
	}
}

// TestLabelNameFromTwoSourcesIsRefused: a static label (sink.loki.labels or an org's) and a field
// a type promotes that become the same label name would put that name twice on the type's
// streams; the run would keep the promoted value and drop the static one without a word (or drop
// both when the field is empty). Config check refuses it, naming both keys and the label, and
// counts the name once toward the room left for promoted labels. An org's static label over
// sink.loki.labels' of its name is the documented merge, not a duplicate.
func TestLabelNameFromTwoSourcesIsRefused(t *testing.T) {
	types := func(fields ...string) string {
		return "shape:\n  types:\n    - type: API\n    - type: Login\n      labels: [" + strings.Join(fields, ", ") + "]\n"
	}
	sink := func(body string) string { return "sink:\n  loki:\n" + body }
	for _, tc := range []struct {
		name, yaml string
		want       []string
		not        string
	}{
		{"sink.loki.labels", sink("    extra_labels: [team]\n    labels: {team: sec}\n") + types("LOGIN_STATUS", "Team"),
			[]string{`shape.types[1].labels[1]: field "Team" becomes label "team", which sink.loki.labels.team sets too`}, ""},
		{"sink.loki.labels in the multi-org form", oneOrgSink("{environment: e}") + sink("    extra_labels: [team]\n    labels: {team: sec}\n") + types("TEAM"),
			[]string{`shape.types[1].labels[0]: field "TEAM" becomes label "team", which sink.loki.labels.team sets too`}, ""},
		{"an org's labels", oneOrgSink("{region: eu}") + sink("    extra_labels: [region]\n") + types("Region"),
			[]string{`shape.types[1].labels[0]: field "Region" becomes label "region", which orgs[0].sink.loki.labels.region sets too`}, ""},
		{"an org's labels over sink.loki.labels'", oneOrgSink("{region: eu}") + sink("    extra_labels: [region]\n    labels: {region: us}\n") + types("Region"),
			[]string{`shape.types[1].labels[0]: field "Region" becomes label "region", which orgs[0].sink.loki.labels.region sets too`}, ""},
		// Without the duplicate, 8 promoted labels beside team are one too many; with it, the
		// stream carries 7 besides team, which fit: only the duplicate is at fault.
		{"at the room's limit", sink("    extra_labels: [team]\n    labels: {team: sec}\n") + types("A", "B", "C", "D", "E", "F", "G", "TEAM"),
			[]string{`shape.types[1].labels[7]: field "TEAM" becomes label "team", which sink.loki.labels.team sets too`}, "at most 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			wantErrors(t, err, tc.want...)
			if err != nil && tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("the name is counted twice toward the room for promoted labels:\n%v", err)
			}
		})
	}
	if _, err := load(t, oneOrgSink("{environment: e, team: t}")+sink("    extra_labels: [team]\n    labels: {environment: prod, team: sec}\n")+types("LOGIN_STATUS")); err != nil {
		t.Errorf("an org's static labels over sink.loki.labels' are refused: %v", err)
	}
}

// TestStaticOrgLabelRefusedInTheMultiOrgForm: in the multi-org form every entry carries
// org=<orgs[].name>, which replaced a static org label of sink.loki.labels without a word.
// Config check refuses it there, naming the key; the single-org form sets no org label, and a
// static one is kept.
func TestStaticOrgLabelRefusedInTheMultiOrgForm(t *testing.T) {
	_, err := load(t, oneOrgSink("{environment: e}")+"sink:\n  loki:\n    labels: {org: acme, environment: prod}\n")
	wantErrors(t, err, "sink.loki.labels.org: ", "is set per org in the multi-org form", "orgs[].name")
	if err != nil && strings.Contains(err.Error(), "environment") {
		t.Errorf("environment is refused too: %v", err)
	}
	cfg, err := load(t, "sink:\n  loki:\n    labels: {org: acme}\n")
	if err != nil {
		t.Fatalf("the single-org form: %v", err)
	}
	if set, _ := orgStream(t, cfg); set.Map()["org"] != "acme" {
		t.Errorf("the single-org form does not keep the static org label: %s", set)
	}
}
