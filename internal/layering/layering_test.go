package layering

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sf2loki/sf2loki/"

// forbidden lists, per package (and its sub-packages), the packages its non-test code must not
// import, directly or not: everything above it in the map of docs/architecture.md.
var forbidden = map[string][]string{
	"store":      {"lease", "job", "source", "loki", "shape", "salesforce", "config", "cli", "doctor", "obs"},
	"lease":      {"job", "source", "loki", "shape", "salesforce", "config", "cli", "doctor", "obs"},
	"salesforce": {"store", "lease", "job", "source", "loki", "shape", "config", "cli", "doctor", "obs"},
	"loki":       {"store", "lease", "job", "source", "shape", "salesforce", "config", "cli", "doctor", "obs"},
	"shape":      {"store", "lease", "job", "source", "salesforce", "config", "cli", "doctor", "obs"},
	"source":     {"store", "lease", "job", "config", "cli", "doctor", "obs"},
	"job":        {"config", "cli", "doctor", "obs"},
	"obs":        {"config", "cli", "doctor"},
	"schedule":   {"config", "cli", "doctor", "obs"},
	"doctor":     {"cli"},
	"config":     {"cli", "doctor", "lambda"},
	// Rendering helpers every presenting package shares: a leaf.
	"internal/human": {"store", "lease", "salesforce", "loki", "shape", "source", "job", "obs", "schedule", "doctor", "config", "cli"},
}

// TestDependenciesPointDown fails on an upward import: a lower package that imports (directly
// or through another package) one of the packages above it.
func TestDependenciesPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	checked := 0
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		fields := strings.Fields(string(line))
		pkg := strings.TrimPrefix(fields[0], module)
		deny := rulesFor(pkg)
		if deny == nil {
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			rel, ok := strings.CutPrefix(dep, module)
			if !ok {
				continue
			}
			for _, d := range deny {
				if rel == d || strings.HasPrefix(rel, d+"/") {
					t.Errorf("%s imports %s (through its dependencies or directly): %s is above it; see docs/architecture.md", pkg, rel, d)
				}
			}
		}
	}
	if checked < len(forbidden) {
		t.Fatalf("only %d packages matched the rules: is the module path %q still right?", checked, module)
	}
}

// rulesFor returns the rules of pkg: those of the longest rule prefix it falls under.
func rulesFor(pkg string) []string {
	best := ""
	for p := range forbidden {
		if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil
	}
	return forbidden[best]
}
