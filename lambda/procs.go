package lambda

import (
	"strconv"
	"strings"
)

// MemorySizeEnv is set by the Lambda service (and the Runtime Interface Emulator) to the
// function's memory size in MB.
const MemorySizeEnv = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"

// OneVCPUMemoryMB is the memory size at which Lambda gives a function one vCPU of time; it gives
// CPU in proportion to memory, so below it a function has less than one.
const OneVCPUMemoryMB = 1769

// Procs is the GOMAXPROCS a function's bootstrap should run with, or 0 to keep the runtime's
// choice. A job's run has two stages that run side by side on two threads (the download and
// shaping; the encoding, push and commit); with less than one vCPU of time they cannot gain
// from it, and running them on two threads costs CPU the function is billed for as duration
// (docs/performance.md, "One P"). So a function under OneVCPUMemoryMB runs with 1, unless its
// environment sets GOMAXPROCS itself or the memory size is unknown.
func Procs(lookup func(string) (string, bool)) int {
	if _, set := lookup("GOMAXPROCS"); set {
		return 0
	}
	v, _ := lookup(MemorySizeEnv)
	mb, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || mb <= 0 || mb >= OneVCPUMemoryMB {
		return 0
	}
	return 1
}
