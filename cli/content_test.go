package cli

import (
	"context"
	"fmt"
	"github.com/sf2loki/sf2loki/internal/demo"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/deploy/grafana"
	"github.com/sf2loki/sf2loki/internal/logql"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
)

// shipDemo ships the demo's data set with the demo's configuration — in its orgs form, so that
// entries carry the org label the content pack's org variable reads — changed by mod, until
// every source is caught up, and returns what the strict receiver holds per stream.
func shipDemo(t *testing.T, mod func(*config.Config)) []logql.Stream {
	t.Helper()
	org, keys, err := demo.NewOrg()
	if err != nil {
		t.Fatal(err)
	}
	sf, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sf.Close() })
	receiver := simloki.Start(t, simloki.Options{})
	cfg := demo.Config(sf.URL, string(keys.KeyPEM), receiver.PushURL(), filepath.Join(t.TempDir(), "state.json"), 100_000)
	cfg.Orgs = []config.Org{{Name: "demo", Salesforce: cfg.Salesforce, Sources: cfg.Sources}}
	cfg.Salesforce, cfg.Sources = config.Defaults().Salesforce, config.Defaults().Sources
	cfg.Run.Drain = true
	if mod != nil {
		mod(cfg)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("demo configuration: %v", errs)
	}
	log := slog.New(slog.DiscardHandler)
	for i := 0; ; i++ {
		rep := runInvocation(context.Background(), cfg, log, invocationFlags{})
		if rep.Outcome != job.OutcomeOK {
			t.Fatalf("run %d: %s: %s", i+1, rep.Outcome, rep.Error)
		}
		if rep.CaughtUp {
			break
		}
		if i == 5 {
			t.Fatalf("not caught up after %d runs", i+1)
		}
	}
	byStream := map[string]*logql.Stream{}
	for _, e := range receiver.Entries() {
		st := byStream[e.Stream]
		if st == nil {
			st = &logql.Stream{Labels: map[string]string{}, Metadata: map[string]bool{}, Fields: map[string]bool{}}
			for _, l := range e.Labels {
				st.Labels[l.Name] = l.Value
			}
			byStream[e.Stream] = st
		}
		for _, m := range e.Metadata {
			st.Metadata[m.Name] = true
		}
		logql.JSONFields(e.Line, st.Fields)
	}
	var out []logql.Stream
	for _, k := range slices.Sorted(maps.Keys(byStream)) {
		out = append(out, *byStream[k])
	}
	return out
}

// contentProblems checks every query of the content pack against the shipped streams: each
// selector selects some stream, each name used is in every stream it selects, and each
// variable's label is on some stream.
func contentProblems(t *testing.T, streams []logql.Stream) []string {
	t.Helper()
	queries, err := grafana.ContentQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 20 {
		t.Fatalf("only %d queries in the content pack", len(queries))
	}
	var problems []string
	for _, q := range queries {
		if q.Label != "" {
			if !slices.ContainsFunc(streams, func(s logql.Stream) bool { return s.Labels[q.Label] != "" }) {
				problems = append(problems, fmt.Sprintf("%s: no shipped stream has the label %q", q.Where, q.Label))
			}
			continue
		}
		parsed, err := logql.Parse(q.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", q.Where, err))
			continue
		}
		for _, p := range logql.Check(parsed, streams) {
			problems = append(problems, q.Where+": "+p)
		}
	}
	return problems
}

// TestContentPackUsesOnlyWhatSf2lokiShips: every label, structured metadata and JSON field the
// dashboards and rules of deploy/grafana/content use exists in what the demo's data set ships
// through the real job and the shaping, with the demo's configuration.
func TestContentPackUsesOnlyWhatSf2lokiShips(t *testing.T) {
	streams := shipDemo(t, nil)
	if problems := contentProblems(t, streams); len(problems) > 0 {
		var cat strings.Builder
		for _, s := range streams {
			fmt.Fprintf(&cat, "\n  %s metadata %v fields %v", s, slices.Sorted(maps.Keys(s.Metadata)), slices.Sorted(maps.Keys(s.Fields)))
		}
		t.Fatalf("the content pack uses what sf2loki does not ship:\n  %s\nshipped:%s", strings.Join(problems, "\n  "), cat.String())
	}
}

// TestContentPackCheckFailsWhenShapingRemovesAField: the same check fails, naming the panels and
// rules, when the shaping configuration takes away a field they use (drop_field on
// LOGIN_STATUS), so the check above is not one that cannot fail.
func TestContentPackCheckFailsWhenShapingRemovesAField(t *testing.T) {
	streams := shipDemo(t, func(cfg *config.Config) {
		cfg.Shape.Transforms = append(cfg.Shape.Transforms, config.ShapeTransform{Op: "drop_field", Types: []string{"Login"}, Fields: []string{"LOGIN_STATUS"}})
	})
	problems := strings.Join(contentProblems(t, streams), "\n")
	for _, want := range []string{
		`salesforce-security.json: panel "Failed logins" target A: filter "LOGIN_STATUS" is not in stream`,
		`salesforce-rules.yaml: rule salesforce:login_failures:count5m: filter "LOGIN_STATUS" is not in stream`,
		`salesforce-rules.yaml: rule SalesforceLoginFailuresFromOneIP: filter "LOGIN_STATUS"`,
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems do not include %q:\n%s", want, problems)
		}
	}
	if strings.Contains(problems, "EXEC_TIME") {
		t.Errorf("a field the transform did not touch is reported:\n%s", problems)
	}
}
