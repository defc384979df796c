// Command maxrss runs a command (its arguments) with this process's standard streams and
// environment, and writes the command's peak resident set size as JSON ({"vm_hwm": bytes}) to
// $SF2LOKI_BENCH_STATS, the file the benchmark harness reads its probe's counters from. It exits
// with the command's exit code.
//
// It measures the shipped binary itself, not the probe build (which carries the harness's
// sampler): wait4's ru_maxrss of a child counts the resident size of the process that started
// it until the exec as well, so the launcher has to be smaller than what it measures. This one
// links a few standard packages and nothing else, and stays at about 2 MiB.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: maxrss command [argument...]")
		return 2
	}
	stats := os.Getenv("SF2LOKI_BENCH_STATS")
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SF2LOKI_BENCH_STATS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "maxrss:", err)
		return 2
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if stats != "" && ok {
		b, _ := json.Marshal(map[string]int64{"vm_hwm": ru.Maxrss * 1024}) // Linux reports KiB
		if werr := os.WriteFile(stats, b, 0o600); werr != nil {
			fmt.Fprintln(os.Stderr, "maxrss:", werr)
			return 2
		}
	}
	return cmd.ProcessState.ExitCode()
}
