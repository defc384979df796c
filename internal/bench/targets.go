package main

import (
	"fmt"
	"time"
)

// Targets (docs/performance.md, "Targets"). -strict exits 1 when one is missed.
const (
	// targetCeilingMBPerCore is the ceiling's CSV megabytes per CPU second.
	targetCeilingMBPerCore = 200
	// targetCeilingRatio is end-to-end rows per CPU second over the ceiling's, every size.
	targetCeilingRatio = 0.85
	// targetPeakRSS bounds the run-once's peak RSS shipping the targetRSSFileBytes file.
	targetPeakRSS      = 64 << 20
	targetRSSFileBytes = 1 << 30
	// targetRSSFlat bounds how much the peak RSS of the largest file may exceed the smallest's.
	targetRSSFlat = 0.10
	// targetNoopWall and targetNoopRSS bound a run-once with nothing to do (the minimal job).
	targetNoopWall = 20 * time.Millisecond
	targetNoopRSS  = 30 << 20
	// The SOQL scenario: rows per CPU second, bytes allocated per row, peak RSS.
	targetSOQLRowsPerCore = 150000
	targetSOQLAllocBytes  = 2048
	targetSOQLPeakRSS     = 64 << 20
	// targetApexSpeedup is the ApexLog scenario's logs per wall second with bodies fetched ahead
	// over one at a time (today's before the change), against an org answering in 50-200 ms.
	targetApexSpeedup = 4
	// targetPushCopies bounds the bytes a new client allocates for one push of 4 MiB, in
	// payloads: its encoding and its compressed form.
	targetPushCopies = 2
)

// allocBudget is an allocation regression check: the most allocations and bytes per row a
// scenario may cost. The budgets sit a quarter or more above what the recorded run measured,
// so that a change that allocates per row again fails -strict while noise does not.
type allocBudget struct {
	allocs, bytes float64
}

// allocCheckMinBytes is the smallest EventLogFile the per-row budgets apply to: below it the
// process's fixed cost (start, configuration, the first buffers) is a visible share per row.
const allocCheckMinBytes = 100 << 20

// allocBudgets are the checks, by scenario kind (docs/performance.md, "Allocation checks").
var allocBudgets = map[string]allocBudget{
	// Since a settled push's line memory is reused: a change that loses the reuse (about 800 B
	// per EventLogFile row, 450 per SOQL row) fails these.
	"ceiling":  {allocs: 0.1, bytes: 200}, // measured 0.02, 41-75 B
	"run-once": {allocs: 0.3, bytes: 300}, // measured 0.06-0.13, 60-144 B
	"soql":     {allocs: 0.6, bytes: 750}, // measured 0.35, 512-517 B, under its target (targetSOQLAllocBytes)
}

// allocVerdict checks a measure against its scenario's budget.
func allocVerdict(missed *bool, kind, name string, m Measure) string {
	b := allocBudgets[kind]
	return verdict(missed, m.AllocsPerRow() <= b.allocs && m.AllocBytesPerRow() <= b.bytes,
		"allocations of %s ≤ %.2f per row and ≤ %.0f B per row: %.2f, %.0f B", name, b.allocs, b.bytes, m.AllocsPerRow(), m.AllocBytesPerRow())
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }
