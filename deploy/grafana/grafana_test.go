package grafana

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sf2loki/sf2loki/obs"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertExprs returns every rule's expression by alert name, checking each rule's shape.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	var rf ruleFile
	if err := yaml.Unmarshal(Alerts, &rf); err != nil {
		t.Fatalf("alerts: %v", err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: alert, expr and a summary annotation are required", r.Alert)
			}
			if !slices.Contains([]string{"info", "warning", "critical"}, r.Labels["severity"]) {
				t.Errorf("rule %s: severity %q", r.Alert, r.Labels["severity"])
			}
			if _, dup := out[r.Alert]; dup {
				t.Errorf("rule %s defined twice", r.Alert)
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// dashboardExprs returns every query of the dashboard by panel title (and variable).
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if d.UID == "" {
		t.Error("dashboard has no uid")
	}
	out := map[string]string{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d missing or reused", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			out[p.Title+"#"+string(rune('A'+i))] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out["variable "+v.Name] = v.Definition
		}
	}
	return out
}

var (
	metricRE   = regexp.MustCompile(`\b(sf2loki_[a-zA-Z0-9_]+)(\{([^}]*)\})?`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"`)
	groupingRE = regexp.MustCompile(`\b(?:by|without|ignoring|on)\s*\(([^)]*)\)`)
)

// checkExpr verifies that every metric an expression reads is an sf2loki instrument's series and
// that every label it matches or groups by is one of the labels those instruments carry.
func checkExpr(t *testing.T, where, expr string) []string {
	t.Helper()
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
		t.Errorf("%s: unbalanced brackets in %q", where, expr)
	}
	var names []string
	labels := map[string]bool{"le": true}
	for _, m := range metricRE.FindAllStringSubmatch(expr, -1) {
		in, ok := obs.SeriesInstrument(m[1])
		if !ok {
			t.Errorf("%s: %s is not a series of any sf2loki instrument", where, m[1])
			continue
		}
		names = append(names, in.Name)
		for _, l := range in.Labels {
			labels[l] = true
		}
		for _, mm := range matcherRE.FindAllStringSubmatch(m[3], -1) {
			if !slices.Contains(in.Labels, mm[1]) {
				t.Errorf("%s: %s has no label %q", where, m[1], mm[1])
			}
		}
	}
	if len(names) == 0 {
		t.Errorf("%s: reads no sf2loki metric: %q", where, expr)
	}
	for _, g := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labels[l] {
				t.Errorf("%s: groups by %q, which none of its metrics carries", where, l)
			}
		}
	}
	return names
}

// TestEveryQueriedMetricExists checks the dashboard's and the alerts' queries against the
// instrument catalog (names as Prometheus exposes them, and their labels).
func TestEveryQueriedMetricExists(t *testing.T) {
	for title, expr := range dashboardExprs(t) {
		checkExpr(t, "dashboard panel "+title, expr)
	}
	for alert, expr := range alertExprs(t) {
		checkExpr(t, "alert "+alert, expr)
	}
}

// TestCoversTheJobSignals: the dashboard and the alerts cover what an operator of a scheduled
// job watches (issue 12): the age of the last successful run, outcomes by name, busy/fenced
// rates, epoch jumps, ingest lag, API usage, Loki drops and the replay id age.
func TestCoversTheJobSignals(t *testing.T) {
	reads := func(exprs map[string]string) map[string]bool {
		out := map[string]bool{}
		for where, e := range exprs {
			for _, n := range checkExpr(t, where, e) {
				out[n] = true
			}
		}
		return out
	}
	dash, alerts := reads(dashboardExprs(t)), reads(alertExprs(t))
	for _, signal := range []string{
		"sf2loki_last_success_timestamp_seconds", "sf2loki_runs", "sf2loki_epoch", "sf2loki_ingest_lag_seconds",
		"sf2loki_salesforce_api_remaining", "sf2loki_records_dropped", "sf2loki_pubsub_replay_id_age_seconds",
	} {
		if !dash[signal] {
			t.Errorf("the dashboard does not show %s", signal)
		}
		if !alerts[signal] {
			t.Errorf("no alert reads %s", signal)
		}
	}
	ex := alertExprs(t)
	for _, name := range []string{"SF2LokiNoSuccessfulRun", "SF2LokiBusyOrFencedOften", "SF2LokiEpochJump", "SF2LokiNeedsHuman"} {
		if ex[name] == "" {
			t.Errorf("alert %s is missing", name)
		}
	}
	// Durable facts only (docs/metrics.md): the age alert must survive the job not pushing any more.
	if !strings.Contains(ex["SF2LokiNoSuccessfulRun"], "max_over_time(sf2loki_last_success_timestamp_seconds") {
		t.Error("SF2LokiNoSuccessfulRun must read the last success time through max_over_time")
	}
}
