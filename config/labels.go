package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sf2loki/sf2loki/loki"
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

// joined returns the errors err joins (errors.Join), err alone, or none for nil.
func joined(err error) []error {
	var list interface{ Unwrap() []error }
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
		return list.Unwrap()
	}
	return []error{err}
}
