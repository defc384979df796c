package cli

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc reads the runtime's current GOGC.
func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("/gc/gogc:percent not supported: %v", s[0].Value.Kind())
	}
	return int(s[0].Value.Uint64())
}

// settleGC collects, so that the sentinels of earlier calls of Main in this test binary have
// run their cleanups before a test reads the heap goal, and sets GOGC=100 until the test ends.
func settleGC(t *testing.T) {
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
}

func TestHeapGoalRaisedUntilTheFirstCollection(t *testing.T) {
	settleGC(t)
	tuneGC(func(string) (string, bool) { return "", false })
	if got := gogc(t); got != startGCPercent {
		t.Fatalf("GOGC before the first collection = %d, want %d", got, startGCPercent)
	}
	runtime.GC() // the sentinel is unreachable: its cleanup is queued by this collection
	deadline := time.Now().Add(10 * time.Second)
	for gogc(t) != gcPercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC after a collection = %d, want %d", gogc(t), gcPercent)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHeapGoalLeftToAnExplicitGOGC(t *testing.T) {
	settleGC(t)
	tuneGC(func(k string) (string, bool) { return "off", k == "GOGC" })
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC with GOGC set in the environment = %d, want it untouched (100)", got)
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // a cleanup, had one been added, runs soon after the collection
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC after a collection with GOGC set in the environment = %d, want 100", got)
	}
}
