package obs

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryInstrument keeps docs/metrics.md in step with the catalog: one table row per
// instrument with its Prometheus name, kind and labels.
func TestDocsListEveryInstrument(t *testing.T) {
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, in := range Instruments() {
		row := "| `" + in.PrometheusName() + "` | " + string(in.Kind) + " | "
		i := strings.Index(doc, row)
		if i < 0 {
			t.Errorf("docs/metrics.md has no row for %s (%s)", in.PrometheusName(), in.Kind)
			continue
		}
		line := doc[i : i+strings.IndexByte(doc[i:], '\n')]
		if !strings.Contains(line, strings.Join(in.Labels, ", ")) {
			t.Errorf("docs/metrics.md: the row of %s does not list its labels %v", in.PrometheusName(), in.Labels)
		}
	}
}
