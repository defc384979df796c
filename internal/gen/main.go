// Command gen regenerates sf2loki's generated files (make generate) or, with -check, fails when
// one has drifted from its source (make test).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/deploy/grafana"
)

// output is one generated file and the function producing its content.
type output struct {
	path string
	gen  func() ([]byte, error)
}

func outputs() []output {
	return append([]output{
		{"docs/config-reference.md", func() ([]byte, error) { return config.Reference(), nil }},
		{"docs/config.schema.json", func() ([]byte, error) {
			b, err := config.JSONSchema()
			return append(b, '\n'), err
		}},
		{"docs/config-example.yaml", func() ([]byte, error) { return config.Example(), nil }},
		// The chart cannot read files outside its directory: its PrometheusRule renders this copy.
		{"charts/sf2loki/files/sf2loki-alerts.yaml", func() ([]byte, error) { return grafana.Alerts, nil }},
	}, protoOutputs()...)
}

func main() {
	check := flag.Bool("check", false, "report drift instead of writing")
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	drift := 0
	for _, o := range outputs() {
		want, err := o.gen()
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen: %s: %v\n", o.path, err)
			os.Exit(1)
		}
		path := filepath.Join(*root, o.path)
		have, _ := os.ReadFile(path)
		if bytes.Equal(have, want) {
			continue
		}
		if *check {
			fmt.Fprintf(os.Stderr, "gen: %s is out of date; run 'make generate' and commit the result\n", o.path)
			drift++
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "gen: %v\n", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "gen: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("gen: wrote %s\n", o.path)
	}
	if drift > 0 {
		os.Exit(1)
	}
}
