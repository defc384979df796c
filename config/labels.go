package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
)

// The stream labels: which names a static label may take is the Loki client's rule
// (loki.ValidateStaticLabels, its allowlist loki.AllowedLabelNames), never a copy of it here: a
// configuration that passes config check must not have its entries refused at start or push.

// validateExtraLabels checks each sink.loki.extra_labels name with the Loki client's name rule
// (loki.CheckLabelName), which its label guard applies at start.
func validateExtraLabels(extra []string, errs *Errors) {
	for _, n := range extra {
		if msg := invalidName(n); msg != "" {
			errs.add("sink.loki.extra_labels", "%s", msg)
		}
	}
}

// invalidName says why name is not a label name the Loki client sends (loki.CheckLabelName), or
// "" when it is one.
func invalidName(name string) string {
	var le *loki.LabelError
	if err := loki.CheckLabelName(name); errors.As(err, &le) {
		return fmt.Sprintf("%q is not a valid Loki label name: %s", name, le.Problem)
	}
	return ""
}

// validateStaticLabels checks static stream labels, reported at path.<name>, with the Loki
// client's rule (loki.ValidateStaticLabels): a name in its allowlist or in sink.loki.extra_labels,
// none of those sf2loki sets on each stream itself, a value. The extra_labels names it cannot
// take are left out: validateExtraLabels reports them.
func validateStaticLabels(labels map[string]string, extra []string, path string, errs *Errors) {
	extra = slices.DeleteFunc(slices.Clone(extra), func(n string) bool { return invalidName(n) != "" })
	err := loki.ValidateStaticLabels(labels, loki.LabelOptions{ExtraAllowed: extra})
	allowed := append(loki.AllowedLabelNames(), extra...)
	for _, e := range joined(err) {
		var le *loki.LabelError
		if !errors.As(e, &le) || le.Name == "" {
			errs.add(path, "%v", e)
			continue
		}
		msg := le.Problem
		switch {
		case invalidName(le.Name) != "":
			msg = invalidName(le.Name)
		case !slices.Contains(allowed, le.Name):
			msg += "; to send it as a label, add it to sink.loki.extra_labels"
		}
		errs.add(path+"."+le.Name, "%s", msg)
	}
}

// validateOrgLabels checks orgs[i].sink.loki.labels: the static labels' rule, and not org, which
// an org's entries carry with its name.
func validateOrgLabels(labels map[string]string, extra []string, path string, errs *Errors) {
	if _, ok := labels["org"]; ok {
		errs.add(path+".org", "is set per entry (org=<orgs[].name>) and cannot be a static label")
		labels = maps.Clone(labels)
		delete(labels, "org")
	}
	validateStaticLabels(labels, extra, path, errs)
}

// validateSinkLabels checks sink.loki.labels: the static labels' rule, and in the multi-org form
// not org, which every org's entries carry with its name (it would replace the static value).
// The single-org form sets no org label: there a static one is kept.
func validateSinkLabels(labels map[string]string, extra []string, multiOrg bool, errs *Errors) {
	if _, ok := labels["org"]; ok && multiOrg {
		errs.add("sink.loki.labels.org", "is set per org in the multi-org form: every org's entries carry org=<orgs[].name>, which would replace this value; remove it and name each org with orgs[].name")
		labels = maps.Clone(labels)
		delete(labels, "org")
	}
	validateStaticLabels(labels, extra, "sink.loki.labels", errs)
}

// validateLabelRoom refuses, for each org, a type promoting more fields than fit in the Loki
// client's count beside the labels sf2loki sets, backfill, and the org's static labels beyond the
// allowlist (those sink.loki.extra_labels allows): every stream of the org carries them, and the
// guard would refuse every entry of the type. The count is shape's (shape.PromotedLabelRoom);
// without such static labels shape.Validate reports it. Orgs whose static labels come from the
// same keys are reported together.
func (c *Config) validateLabelRoom(errs *Errors) {
	type group struct {
		keys  []string // the static labels beyond the allowlist, by config key
		names []string // and by name
		orgs  []string
		path  string // where to report static labels that leave no room at all
	}
	var groups []*group
	allowlist := loki.AllowedLabelNames()
	for i, o := range c.OrgList() {
		var own map[string]string // the org's labels, over sink.loki.labels
		if len(c.Orgs) > 0 {
			own = c.Orgs[i].Sink.Loki.Labels
		}
		var keys, names []string
		path := "sink.loki.labels"
		for _, n := range slices.Sorted(maps.Keys(o.Sink.Labels)) {
			if slices.Contains(allowlist, n) {
				continue
			}
			key := staticLabelKey(own, i, n)
			if strings.HasPrefix(key, "orgs[") {
				path = fmt.Sprintf("orgs[%d].sink.loki.labels", i)
			}
			keys, names = append(keys, key), append(names, n)
		}
		if len(keys) == 0 {
			continue
		}
		if k := slices.IndexFunc(groups, func(g *group) bool { return slices.Equal(g.keys, keys) }); k >= 0 {
			groups[k].orgs = append(groups[k].orgs, o.Name)
			continue
		}
		groups = append(groups, &group{keys: keys, names: names, orgs: []string{o.Name}, path: path})
	}
	for _, g := range groups {
		of := ""
		switch {
		case len(g.orgs) == 1 && g.orgs[0] != "":
			of = " of org " + g.orgs[0]
		case len(g.orgs) > 1:
			of = " of orgs " + strings.Join(g.orgs, ", ")
		}
		room := shape.PromotedLabelRoom(len(g.keys))
		if room < 0 {
			errs.add(g.path, "the %d static labels%s allowed by sink.loki.extra_labels (%s) do not fit in Loki's %d labels per stream (service_name not counted) beside the labels sf2loki sets (backfill included); at most %d fit, and each leaves room for one promoted label less",
				len(g.keys), of, strings.Join(g.keys, ", "), loki.MaxLabelNames, shape.PromotedLabelRoom(0))
			continue
		}
		for i, t := range c.Shape.Types {
			// A field promoted to a static label's name is not one more label: validatePromotedStatic
			// refuses it on its own.
			n := 0
			for _, f := range t.Labels {
				if !slices.Contains(g.names, shape.LabelName(f)) {
					n++
				}
			}
			if n > room {
				errs.add(fmt.Sprintf("shape.types[%d].labels", i), "%d promoted labels of %s do not fit in Loki's %d labels per stream (service_name not counted) beside the labels sf2loki sets (backfill included) and the static labels%s allowed by sink.loki.extra_labels (%s); promote at most %d",
					n, t.Type, loki.MaxLabelNames, of, strings.Join(g.keys, ", "), room)
			}
		}
	}
}

// staticLabelKey returns the key that sets the static label name of the i-th org, whose own
// labels are own: orgs[i].sink.loki.labels.<name> over sink.loki.labels.<name>.
func staticLabelKey(own map[string]string, i int, name string) string {
	if _, ok := own[name]; ok {
		return fmt.Sprintf("orgs[%d].sink.loki.labels.%s", i, name)
	}
	return "sink.loki.labels." + name
}

// validatePromotedStatic refuses a field a type promotes to the name of a static label of an
// org (sink.loki.labels or the org's own, names sink.loki.extra_labels allows): a stream carries
// a label name once, so the run would replace the static value with the field's on every stream
// of the type, or drop the label where the field is empty, without a word. Each promoted field
// is reported with each key that sets its name.
func (c *Config) validatePromotedStatic(errs *Errors) {
	allowlist := loki.AllowedLabelNames()
	seen := map[string]bool{}
	for i, o := range c.OrgList() {
		var own map[string]string
		if len(c.Orgs) > 0 {
			own = c.Orgs[i].Sink.Loki.Labels
		}
		for ti, t := range c.Shape.Types {
			for j, f := range t.Labels {
				n := shape.LabelName(f)
				if _, static := o.Sink.Labels[n]; !static || slices.Contains(allowlist, n) {
					continue // an allowlisted name is refused as reserved by shape.Validate
				}
				path, key := fmt.Sprintf("shape.types[%d].labels[%d]", ti, j), staticLabelKey(own, i, n)
				if seen[path+" "+key] {
					continue
				}
				seen[path+" "+key] = true
				errs.add(path, "field %q becomes label %q, which %s sets too: a stream carries a label name once, and the field's value would replace the static one; remove the static label or stop promoting the field (it stays in the line; shape.types[%d].metadata can send it as structured metadata)",
					f, n, key, ti)
			}
		}
	}
}
