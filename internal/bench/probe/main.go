// Command probe is sf2loki's command line (cli.Main, exactly what cmd/sf2loki runs) with what the
// benchmark harness needs to look inside a run-once process: after Main returns it writes the
// process's allocation counters as JSON to $SF2LOKI_BENCH_STATS, and with
// $SF2LOKI_BENCH_CPUPROFILE it records a pprof CPU profile of the whole run; with
// $SF2LOKI_BENCH_HEAPPROFILE it writes heap profiles at RSS peaks, sampled every
// $SF2LOKI_BENCH_MEMPROFILERATE bytes when set.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

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
	// PeakAnon and PeakFile are the largest anonymous (heap, stacks) and file-backed (the
	// binary's pages) resident sizes seen by a 20 ms sampler, in bytes.
	PeakAnon int64 `json:"peak_anon"`
	PeakFile int64 `json:"peak_file"`
	// PeakLive and PeakGoal are the largest live heap after a collection and heap goal the
	// sampler saw (runtime/metrics), in bytes: what the anonymous peak follows, with less noise.
	PeakLive int64 `json:"peak_live"`
	PeakGoal int64 `json:"peak_goal"`
	// MinorFaults, UserNs and SysNs are the process's own rusage: its first touches of memory
	// (each a minor page fault, in system time) and its CPU time split.
	MinorFaults int64 `json:"minor_faults"`
	UserNs      int64 `json:"user_ns"`
	SysNs       int64 `json:"sys_ns"`
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
	if v := os.Getenv("SF2LOKI_BENCH_MEMPROFILERATE"); v != "" {
		// A finer heap profile than the default (one sample per 512 KiB): 1 records every
		// allocation, slowly.
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			runtime.MemProfileRate = n
		}
	}
	sampler := startSampler(os.Getenv("SF2LOKI_BENCH_HEAPPROFILE"))
	code := cli.Main(os.Args, os.Stdout, os.Stderr)
	anon, file, live, goal := sampler.stop()
	if path := os.Getenv("SF2LOKI_BENCH_STATS"); path != "" {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st := Stats{Mallocs: ms.Mallocs, TotalAlloc: ms.TotalAlloc, NumGC: ms.NumGC, HeapSys: ms.HeapSys, Sys: ms.Sys, VmHWM: status("VmHWM:"), PeakAnon: anon, PeakFile: file, PeakLive: live, PeakGoal: goal}
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			st.MinorFaults, st.UserNs, st.SysNs = ru.Minflt, ru.Utime.Nano(), ru.Stime.Nano()
		}
		b, _ := json.Marshal(st)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		}
	}
	return code
}

// sampler records the peak anonymous and file-backed RSS; with a heap profile path it writes
// the heap profile each time the anonymous peak grows by 1 MiB (the profile of the last
// collection before the peak).
type sampler struct {
	done       chan struct{}
	stopped    chan struct{}
	anon, file int64
	live, goal int64
}

func startSampler(heapProfile string) *sampler {
	s := &sampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		profiled := int64(0)
		heap := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
		statm, err := os.Open("/proc/self/statm")
		if err == nil {
			defer statm.Close()
		}
		var buf [128]byte
		for {
			a, f := rss(statm, buf[:])
			s.anon, s.file = max(s.anon, a), max(s.file, f)
			metrics.Read(heap)
			s.live = max(s.live, int64(heap[0].Value.Uint64())) //nolint:gosec // heap sizes fit
			s.goal = max(s.goal, int64(heap[1].Value.Uint64())) //nolint:gosec // heap sizes fit
			if heapProfile != "" && a > profiled+(1<<20) {
				profiled = a
				if out, err := os.Create(heapProfile); err == nil {
					_ = pprof.WriteHeapProfile(out)
					_ = out.Close()
				}
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() (anon, file, live, goal int64) {
	close(s.done)
	<-s.stopped
	return s.anon, s.file, s.live, s.goal
}

// rss reads the anonymous and file-backed resident sizes from /proc/self/statm (resident and
// shared pages; no shared memory here), in bytes, 0 when unknown. The sampler reads it every
// 20 ms with the file kept open and no allocation: its cost is the measured process's too, and
// /proc/self/status, opened and scanned per field, cost ~1% of a SOQL run's CPU time.
func rss(statm *os.File, buf []byte) (anon, file int64) {
	if statm == nil {
		return 0, 0
	}
	n, err := statm.ReadAt(buf, 0)
	if n == 0 || (err != nil && err != io.EOF) {
		return 0, 0
	}
	var v [3]int64 // size, resident, shared
	f := 0
	for _, c := range buf[:n] {
		switch {
		case c >= '0' && c <= '9':
			v[f] = v[f]*10 + int64(c-'0')
		case c == ' ' && f < 2:
			f++
		default:
			f = 3
		}
		if f == 3 {
			break
		}
	}
	page := int64(os.Getpagesize())
	return (v[1] - v[2]) * page, v[2] * page
}

// status reads a size field of /proc/self/status in bytes (0 when unknown).
func status(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
