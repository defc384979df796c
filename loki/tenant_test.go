package loki

import (
	"regexp"
	"strings"
	"testing"
)

// tenantRule is Loki's tenant rule as a regular expression: validTenant must agree with it.
var tenantRule = regexp.MustCompile(`^[A-Za-z0-9!\-_.*'()]{1,150}$`)

func TestValidTenantIsLokisRule(t *testing.T) {
	for _, s := range []string{"", "a", "tenant-1", "A.b_c*d'e(f)g!", strings.Repeat("x", 150), strings.Repeat("x", 151),
		"a b", "a/b", "a|b", "é", "ab\x00", "..", "a:b", "a+b", "a@b", "a,b"} {
		if got, want := validTenant(s), tenantRule.MatchString(s); got != want {
			t.Errorf("validTenant(%q) = %v, the rule says %v", s, got, want)
		}
	}
}

func FuzzValidTenant(f *testing.F) {
	for _, s := range []string{"a", "tenant-1", "a b", "é", strings.Repeat("y", 151)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validTenant(s), tenantRule.MatchString(s); got != want {
			t.Fatalf("validTenant(%q) = %v, the rule says %v", s, got, want)
		}
	})
}
