package lambda

import "testing"

// TestProcsOneUnderOneVCPU: a function with less than one vCPU of time (memory under 1769 MB)
// runs on one P; at and above it, with an unknown size, or when the environment sets GOMAXPROCS
// the runtime's choice stands.
func TestProcsOneUnderOneVCPU(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want int
	}{
		{"128 MB", map[string]string{MemorySizeEnv: "128"}, 1},
		{"1768 MB", map[string]string{MemorySizeEnv: "1768"}, 1},
		{"1769 MB: one vCPU", map[string]string{MemorySizeEnv: "1769"}, 0},
		{"3008 MB", map[string]string{MemorySizeEnv: "3008"}, 0},
		{"set by the user", map[string]string{MemorySizeEnv: "256", "GOMAXPROCS": "2"}, 0},
		{"set empty by the user", map[string]string{MemorySizeEnv: "256", "GOMAXPROCS": ""}, 0},
		{"size unknown", map[string]string{}, 0},
		{"size not a number", map[string]string{MemorySizeEnv: "256MB"}, 0},
		{"size zero", map[string]string{MemorySizeEnv: "0"}, 0},
	}
	for _, tc := range cases {
		got := Procs(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if got != tc.want {
			t.Errorf("%s: Procs = %d, want %d", tc.name, got, tc.want)
		}
	}
}
