package testenv_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestIterations(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"", 3}, {"100", 100}, {"0", 3}, {"-5", 3}, {"many", 3},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(testenv.EnvIterations, tc.env)
			if got := testenv.Iterations(3); got != tc.want {
				t.Fatalf("Iterations(3) with %q = %d, want %d", tc.env, got, tc.want)
			}
		})
	}
}
