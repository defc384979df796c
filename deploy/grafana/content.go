package grafana

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Content is the Salesforce content pack: dashboards (content/*.json) and a Loki ruler file of
// LogQL recording and alerting rules (content/*.yaml) on what sf2loki ships, with an org
// variable. docs/dashboards.md explains every query.
//
//go:embed content
var Content embed.FS

// ContentQuery is one LogQL query of the content pack.
type ContentQuery struct {
	// Where names it: file, then panel title and target, rule name, or variable.
	Where string
	// Expr is the LogQL expression (Grafana variables included).
	Expr string
	// Label is set instead of Expr for a template variable listing a label's values.
	Label string
}

// ContentDashboard is the part of a content dashboard its tests read.
type ContentDashboard struct {
	UID         string `json:"uid"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Templating  struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Query    any    `json:"query"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Targets     []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// ContentRules is a Loki ruler file.
type ContentRules struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ContentDashboards returns the dashboards of the content pack by file name.
func ContentDashboards() (map[string]ContentDashboard, error) {
	out := map[string]ContentDashboard{}
	err := fs.WalkDir(Content, "content", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".json" {
			return err
		}
		b, err := Content.ReadFile(p)
		if err != nil {
			return err
		}
		var db ContentDashboard
		if err := json.Unmarshal(b, &db); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out[path.Base(p)] = db
		return nil
	})
	return out, err
}

// ContentRuleFiles returns the rule files of the content pack by file name.
func ContentRuleFiles() (map[string]ContentRules, error) {
	out := map[string]ContentRules{}
	err := fs.WalkDir(Content, "content", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" {
			return err
		}
		b, err := Content.ReadFile(p)
		if err != nil {
			return err
		}
		var rf ContentRules
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&rf); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out[path.Base(p)] = rf
		return nil
	})
	return out, err
}

var labelValuesRE = regexp.MustCompile(`^label_values\(\s*(?:\{[^}]*\}\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)

// ContentQueries returns every LogQL query of the content pack: panel targets, recording and
// alerting rules, and the label of each query variable.
func ContentQueries() ([]ContentQuery, error) {
	dbs, err := ContentDashboards()
	if err != nil {
		return nil, err
	}
	var out []ContentQuery
	for _, file := range sortedNames(dbs) {
		db := dbs[file]
		for _, v := range db.Templating.List {
			if v.Type != "query" {
				continue
			}
			q, _ := v.Query.(string)
			m := labelValuesRE.FindStringSubmatch(q)
			if m == nil {
				return nil, fmt.Errorf("%s: variable %s: query %v is not label_values(label)", file, v.Name, v.Query)
			}
			out = append(out, ContentQuery{Where: fmt.Sprintf("%s: variable %s", file, v.Name), Label: m[1]})
		}
		for _, p := range db.Panels {
			for _, t := range p.Targets {
				out = append(out, ContentQuery{Where: fmt.Sprintf("%s: panel %q target %s", file, p.Title, t.RefID), Expr: t.Expr})
			}
		}
	}
	rfs, err := ContentRuleFiles()
	if err != nil {
		return nil, err
	}
	for _, file := range sortedNames(rfs) {
		for _, g := range rfs[file].Groups {
			for _, r := range g.Rules {
				name := r.Record + r.Alert
				out = append(out, ContentQuery{Where: fmt.Sprintf("%s: rule %s", file, name), Expr: r.Expr})
			}
		}
	}
	return out, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
