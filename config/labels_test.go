package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/loki"
)

// oneOrgSink is a multi-org configuration whose only org sets the static labels sink (YAML flow
// map); sink.loki is appended by the caller.
func oneOrgSink(labels string) string {
	return `
orgs:
  - name: a
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [Login]}
    sink:
      loki:
        labels: ` + labels + `
`
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
