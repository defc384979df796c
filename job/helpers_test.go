package job_test

import (
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// checkpoints reads the stored cursors.
func checkpoints(t *testing.T, coord *jobtest.Coordinator) map[string]int {
	t.Helper()
	out := map[string]int{}
	for k, v := range coord.Stored(t) {
		n, err := sourcetest.DecodeCursor(v)
		if err != nil {
			t.Fatalf("stored cursor of %s: %v", k, err)
		}
		out[k] = n
	}
	return out
}

// loseLease makes the lease of the coordinator's latest session lost with cause.
func loseLease(coord *jobtest.Coordinator, cause error) {
	sessions := coord.Sessions()
	sessions[len(sessions)-1].LoseLease(cause)
}

// receiver starts a strict simulated Loki and returns it with a client pushing to it.
func receiver(t *testing.T, opts simloki.Options) (*simloki.Server, *loki.Client) {
	t.Helper()
	srv := simloki.New(opts)
	c, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// delivered counts, per key and number, how often the receiver holds each numbered record.
func delivered(t *testing.T, srv *simloki.Server) map[string]map[int]int {
	t.Helper()
	out := map[string]map[int]int{}
	for _, e := range srv.Entries() {
		k, n, ok := sourcetest.ParseLine(e.Line)
		if !ok {
			t.Fatalf("unexpected line at the receiver: %q", e.Line)
		}
		if out[k] == nil {
			out[k] = map[int]int{}
		}
		out[k][n]++
	}
	return out
}

// assertExactlyOnce checks that records 1..totals[k] of every key arrived exactly once.
func assertExactlyOnce(t *testing.T, got map[string]map[int]int, totals map[string]int) {
	t.Helper()
	for k, total := range totals {
		for n := 1; n <= total; n++ {
			if c := got[k][n]; c != 1 {
				t.Fatalf("%s #%d delivered %d times, want exactly once", k, n, c)
			}
		}
		if len(got[k]) != total {
			t.Fatalf("%s: %d distinct records delivered, want %d", k, len(got[k]), total)
		}
	}
}

func baseOptions() job.Options {
	return job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second, ReleaseReserve: time.Second}
}
