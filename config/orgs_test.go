package config

import "testing"

func TestOrgLookupAndSourcesPath(t *testing.T) {
	cfg := Defaults()
	if o, ok := cfg.Org(""); !ok || o.SourcesPath() != "sources" || o.Path != "salesforce" {
		t.Fatalf("single org: %+v %v, sources path %q", o, ok, o.SourcesPath())
	}
	cfg.Orgs = []Org{{Name: "eu"}, {Name: "us"}}
	if o, ok := cfg.Org("us"); !ok || o.SourcesPath() != "orgs[1].sources" || o.Path != "orgs[1].salesforce" {
		t.Fatalf("orgs[1]: %+v %v, sources path %q", o, ok, o.SourcesPath())
	}
	if _, ok := cfg.Org("nope"); ok {
		t.Fatal("an unknown org was found")
	}
}
