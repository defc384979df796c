package kubeclient_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheBinaryLinksNoClientset keeps client-go's clientset, its scheme and the API groups
// sf2loki does not use out of the sf2loki binary: each one linked is initialised at every start.
func TestTheBinaryLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/sf2loki/sf2loki/cmd/sf2loki").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	used := map[string]bool{"k8s.io/api/core/v1": true, "k8s.io/api/coordination/v1": true}
	var apis int
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "k8s.io/client-go/kubernetes" || strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/"):
			t.Errorf("the binary links %s: build Kubernetes clients with kubeclient.New", pkg)
		case strings.HasPrefix(pkg, "k8s.io/api/"):
			if !used[pkg] {
				t.Errorf("the binary links %s, an API group sf2loki does not use", pkg)
			}
			apis++
		}
	}
	if apis == 0 {
		t.Fatalf("no k8s.io/api package among the binary's dependencies: is the import path still right?")
	}
}
