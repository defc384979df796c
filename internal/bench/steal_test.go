package main

import (
	"math"
	"testing"
)

// TestStealShare: the steal share is the hypervisor's part of the CPU time the guest wanted
// between two readings of /proc/stat (busy time plus steal), from the aggregate line only.
func TestStealShare(t *testing.T) {
	const before = "cpu  1000 10 200 5000 30 5 15 100 0 0\ncpu0 500 5 100 2500 15 2 7 50 0 0\nintr 1 2 3\n"
	// 600 ticks busy (400 user, 0 nice, 150 system, 20 irq, 30 softirq), 300 stolen, 900 idle.
	const after = "cpu  1400 10 350 5900 30 25 45 400 0 0\ncpu0 700 5 175 2950 15 12 22 200 0 0\n"
	a, ok := parseCPUTimes(before)
	if !ok || a.busy != 1230 || a.steal != 100 {
		t.Fatalf("before: %+v, %v; want busy 1230, steal 100", a, ok)
	}
	b, ok := parseCPUTimes(after)
	if !ok || b.busy != 1830 || b.steal != 400 {
		t.Fatalf("after: %+v, %v; want busy 1830, steal 400", b, ok)
	}
	share, ok := stealShare(a, b)
	if !ok || math.Abs(share-300.0/900) > 1e-9 {
		t.Fatalf("steal share %v, %v; want 1/3", share, ok)
	}
	if _, ok := stealShare(b, a); ok {
		t.Fatal("a reading going backwards gave a share")
	}
	if _, ok := stealShare(a, a); ok {
		t.Fatal("no CPU time wanted gave a share")
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu  1 2 3 4 5 6 7\n", "cpu  1 2 x 4 5 6 7 8\n"} {
		if c, ok := parseCPUTimes(bad); ok {
			t.Errorf("parseCPUTimes(%q) = %+v; want no reading", bad, c)
		}
	}
}
