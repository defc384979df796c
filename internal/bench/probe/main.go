// Command probe is sf2loki's command line (cli.Main, exactly what cmd/sf2loki runs) with what the
// benchmark harness needs to look inside a run-once process: after Main returns it writes the
// process's allocation counters as JSON to $SF2LOKI_BENCH_STATS, and with
// $SF2LOKI_BENCH_CPUPROFILE it records a pprof CPU profile of the whole run.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/sf2loki/sf2loki/cli"
)

// Stats are the counters written to $SF2LOKI_BENCH_STATS.
type Stats struct {
	Mallocs    uint64 `json:"mallocs"`
	TotalAlloc uint64 `json:"total_alloc"`
	NumGC      uint32 `json:"num_gc"`
	HeapSys    uint64 `json:"heap_sys"`
	Sys        uint64 `json:"sys"`
	// VmHWM is the peak resident set size of the process's own address space, in bytes
	// (/proc/self/status), to cross-check the harness's rusage reading.
	VmHWM int64 `json:"vm_hwm"`
}

func main() {
	os.Exit(run())
}

func run() int {
	if path := os.Getenv("SF2LOKI_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "probe: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "probe: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	code := cli.Main(os.Args, os.Stdout, os.Stderr)
	if path := os.Getenv("SF2LOKI_BENCH_STATS"); path != "" {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b, _ := json.Marshal(Stats{Mallocs: ms.Mallocs, TotalAlloc: ms.TotalAlloc, NumGC: ms.NumGC, HeapSys: ms.HeapSys, Sys: ms.Sys, VmHWM: vmHWM()})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		}
	}
	return code
}

// vmHWM reads the peak RSS of this process's address space (0 when unknown).
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
