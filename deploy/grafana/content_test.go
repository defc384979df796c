package grafana

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestContentDashboardsHaveTheOrgVariableAndDescriptions: each content dashboard has a uid, a
// description, a Loki data source variable and an org variable over the org label whose "All"
// also matches entries without it; every panel has a description, and every selector of every
// query is restricted by org=~"$org".
func TestContentDashboardsHaveTheOrgVariableAndDescriptions(t *testing.T) {
	dbs, err := ContentDashboards()
	if err != nil {
		t.Fatal(err)
	}
	if len(dbs) != 2 {
		t.Fatalf("%d dashboards in content/, want the security and operations ones", len(dbs))
	}
	selectorRE := regexp.MustCompile(`\{[^{}]*\}`)
	uids := map[string]bool{}
	for file, db := range dbs {
		if db.UID == "" || uids[db.UID] || db.Description == "" {
			t.Errorf("%s: uid %q (unique, required) and a description are required", file, db.UID)
		}
		uids[db.UID] = true
		vars := map[string]string{}
		for _, v := range db.Templating.List {
			q, _ := v.Query.(string)
			vars[v.Name] = v.Type + " " + q + " " + v.AllValue
		}
		if vars["datasource"] != "datasource loki " || vars["org"] != "query label_values(org) .*" {
			t.Errorf("%s: variables %v; want datasource (loki) and org = label_values(org) with all value .*", file, vars)
		}
		panels := 0
		for _, p := range db.Panels {
			if p.Type == "row" {
				continue
			}
			panels++
			if p.Title == "" || p.Description == "" || len(p.Targets) == 0 {
				t.Errorf("%s: panel %d %q needs a title, a description and a query", file, p.ID, p.Title)
			}
			for _, tg := range p.Targets {
				for _, sel := range selectorRE.FindAllString(strings.ReplaceAll(tg.Expr, "{{", "(("), -1) {
					if !strings.Contains(sel, `org=~"$org"`) {
						t.Errorf("%s: panel %q: selector %s ignores the org variable", file, p.Title, sel)
					}
				}
			}
		}
		if panels < 8 {
			t.Errorf("%s: %d panels", file, panels)
		}
	}
}

// TestContentRulesAreWellFormed: every rule records or alerts with an expression; alerts have a
// known severity and a summary; names are unique.
func TestContentRulesAreWellFormed(t *testing.T) {
	rfs, err := ContentRuleFiles()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var alerts, records int
	for file, rf := range rfs {
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				name := r.Record + r.Alert
				switch {
				case (r.Record == "") == (r.Alert == ""), strings.TrimSpace(r.Expr) == "":
					t.Errorf("%s: rule %q: exactly one of record and alert, and an expr", file, name)
				case r.Alert != "":
					alerts++
					if s := r.Labels["severity"]; s != "info" && s != "warning" && s != "critical" || r.Annotations["summary"] == "" {
						t.Errorf("%s: alert %s: severity %q and a summary are required", file, name, s)
					}
				default:
					records++
					if !regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`).MatchString(r.Record) {
						t.Errorf("%s: recording rule %s is not named level:metric:operations", file, name)
					}
				}
				if seen[name] {
					t.Errorf("%s: rule %s defined twice", file, name)
				}
				seen[name] = true
			}
		}
	}
	if alerts < 5 || records < 3 {
		t.Errorf("%d alerts and %d recording rules", alerts, records)
	}
}

// TestDashboardsDocExplainsEveryQuery: docs/dashboards.md names every panel and every rule of the
// content pack (each is explained there in words).
func TestDashboardsDocExplainsEveryQuery(t *testing.T) {
	b, err := os.ReadFile("../../docs/dashboards.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	dbs, err := ContentDashboards()
	if err != nil {
		t.Fatal(err)
	}
	for file, db := range dbs {
		if !strings.Contains(doc, "## "+db.Title) {
			t.Errorf("docs/dashboards.md has no section for %s (%s)", db.Title, file)
		}
		for _, p := range db.Panels {
			if !strings.Contains(doc, "**"+p.Title+"**") && !strings.Contains(doc, "### "+p.Title) {
				t.Errorf("docs/dashboards.md does not explain panel %q of %s", p.Title, file)
			}
		}
	}
	rfs, err := ContentRuleFiles()
	if err != nil {
		t.Fatal(err)
	}
	for file, rf := range rfs {
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if name := r.Record + r.Alert; !strings.Contains(doc, "`"+name+"`") {
					t.Errorf("docs/dashboards.md does not explain rule %s of %s", name, file)
				}
			}
		}
	}
}
