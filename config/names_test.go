package config

import (
	"strings"
	"testing"
)

// TestNameLengthBounds: the org and Kubernetes name rules hold their length bounds, checked apart
// from their patterns, at the boundary and one past it, and their patterns still refuse what they
// refused.
func TestNameLengthBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   func(string) bool
		s    string
		want bool
	}{
		{"org, 63 characters", validOrgName, "a" + strings.Repeat("b", 62), true},
		{"org, 64 characters", validOrgName, "a" + strings.Repeat("b", 63), false},
		{"org, one character", validOrgName, "a", true},
		{"org, starts with '-'", validOrgName, "-prod", false},
		{"org, inner '.', '_' and '-'", validOrgName, "eu_prod.main-1", true},
		{"org, a space", validOrgName, "eu prod", false},
		{"k8s, 253 characters", validK8sName, "a" + strings.Repeat("b", 251) + "c", true},
		{"k8s, 254 characters", validK8sName, "a" + strings.Repeat("b", 252) + "c", false},
		{"k8s, one character", validK8sName, "a", true},
		{"k8s, ends with '-'", validK8sName, "sf2loki-", false},
		{"k8s, upper case", validK8sName, "Sf2loki", false},
		{"k8s, dotted", validK8sName, "sf2loki.prod", true},
		{"k8s, empty", validK8sName, "", false},
	} {
		if got := c.ok(c.s); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
