package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the machine's aggregate CPU time from /proc/stat, in clock ticks.
type cpuTimes struct {
	busy  uint64 // user, nice, system, irq and softirq: time the guest's CPUs ran
	steal uint64 // time a guest CPU wanted to run while the hypervisor ran something else
}

// readCPUTimes reads the aggregate "cpu" line of /proc/stat; ok is false where there is none.
func readCPUTimes() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	return parseCPUTimes(string(b))
}

// parseCPUTimes reads the "cpu" line: user nice system idle iowait irq softirq steal ... (the
// fields after steal, guest time, are already counted in user and nice).
func parseCPUTimes(stat string) (cpuTimes, bool) {
	for line := range strings.Lines(stat) {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return cpuTimes{}, false
			}
			v[i] = n
		}
		return cpuTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], steal: v[7]}, true
	}
	return cpuTimes{}, false
}

// stealShare is the share of the CPU time the guest wanted between a and b that the hypervisor
// gave to others: on a crowded host every CPU-second figure of the run is slower than the code
// makes it (the vCPU shares caches and cores with other guests), so rates and times from such a
// run are not comparable with another machine's; ratios measured side by side in it still are.
func stealShare(a, b cpuTimes) (float64, bool) {
	if b.busy < a.busy || b.steal < a.steal {
		return 0, false
	}
	wanted := (b.busy - a.busy) + (b.steal - a.steal)
	if wanted == 0 {
		return 0, false
	}
	return float64(b.steal-a.steal) / float64(wanted), true
}

// startCPU is the machine's CPU time when the harness started (markStart).
var (
	startCPU   cpuTimes
	startCPUOK bool
)

// markStart reads the load average and the CPU time as the harness starts.
func markStart() {
	loadAverage = readLoadAverage()
	startCPU, startCPUOK = readCPUTimes()
}

// machineNote is the header's account of the machine while the harness ran: the load average at
// the start and the hypervisor's steal since then.
func machineNote() string {
	s := "load average " + loadAverage + " at the start"
	end, ok := readCPUTimes()
	if !startCPUOK || !ok {
		return s
	}
	if share, ok := stealShare(startCPU, end); ok {
		s += fmt.Sprintf(", hypervisor steal %.0f%% of the CPU time wanted while it ran", 100*share)
	}
	return s
}
