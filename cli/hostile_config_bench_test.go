package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/hostileconfig"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// BenchmarkHostileConfig runs `sf2loki config check` and `sf2loki run-once` processes on the
// worst configurations found under config.MaxFileBytes (internal/hostileconfig), and reports
// the wall time of one process (ns/op), its peak RSS (peak-RSS-MiB: the largest VmHWM of its
// own address space) and what it allocated (alloc-MiB). The promise it checks: no input under
// the cap takes more than 2 s or 100 MiB (docs/configuration.md, "Limits"). The processes run
// internal/bench/probe, which is cli.Main (what cmd/sf2loki runs) reporting its own counters;
// the "baseline" row is an empty configuration: what the process takes before any input.
//
//	go test -run '^$' -bench HostileConfig -benchtime 3x ./cli
func BenchmarkHostileConfig(b *testing.B) {
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "sf2loki")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/sf2loki/sf2loki/internal/bench/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	inputs := append([]hostileconfig.Input{{Name: "baseline", YAML: []byte("{}\n"), Want: ""}}, hostileconfig.Inputs(string(keys.KeyPEM))...)
	for _, in := range inputs {
		path := filepath.Join(dir, in.Name+".yaml")
		if err := os.WriteFile(path, in.YAML, 0o600); err != nil {
			b.Fatal(err)
		}
		for _, command := range [][]string{{"config", "check"}, {"run-once"}} {
			args := append(append([]string{}, command...), "--config", path)
			if in.Job != "" && command[0] == "run-once" {
				args = append(args, "--job", in.Job)
			}
			b.Run(in.Name+"/"+strings.Join(command, "-"), func(b *testing.B) {
				var peak, alloc uint64
				for b.Loop() {
					st := runMeasured(b, bin, args, in.Env)
					peak, alloc = max(peak, st.VmHWM), max(alloc, st.TotalAlloc)
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(float64(alloc)/(1<<20), "alloc-MiB")
			})
		}
	}
}

// probeStats are the counters internal/bench/probe writes to $SF2LOKI_BENCH_STATS.
type probeStats struct {
	TotalAlloc uint64 `json:"total_alloc"`
	VmHWM      uint64 `json:"vm_hwm"`
}

// runMeasured runs the probe with args and returns its counters.
func runMeasured(b *testing.B, bin string, args, env []string) probeStats {
	work := b.TempDir() // run-once of a configuration without state writes its document here
	stats := filepath.Join(work, "stats.json")
	cmd := exec.Command(bin, args...)
	cmd.Dir = work
	cmd.Env = append(append(childEnviron("", nil), env...), "SF2LOKI_BENCH_STATS="+stats)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		b.Fatalf("%v: %v", args, err)
	}
	if code := cmd.ProcessState.ExitCode(); code < 0 || code == ExitInternal {
		b.Fatalf("%v: exit %d, want a decision (0, 2, 3):\n%.2000s", args, code, stderr.String())
	}
	data, err := os.ReadFile(stats)
	if err != nil {
		b.Fatal(err)
	}
	var st probeStats
	if err := json.Unmarshal(data, &st); err != nil {
		b.Fatal(err)
	}
	return st
}
