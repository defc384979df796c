package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv/toolcache"
)

// Environment variables the harness reads.
const (
	// EnvRequireRealServers set to "1" turns "cannot build the server" from a skip into a failure
	// (make test and make e2e set it).
	EnvRequireRealServers = "SF2LOKI_REQUIRE_REAL_SERVERS"
	// EnvIterations overrides the iteration count of concurrency, crash and soak tests.
	EnvIterations = "SF2LOKI_TEST_ITERATIONS"
)

// Names of the tools EnsureTool knows.
const (
	ToolVictoriaLogs          = toolcache.ToolVictoriaLogs
	ToolVersitygw             = toolcache.ToolVersitygw
	ToolKubeAPIServer         = toolcache.ToolKubeAPIServer
	ToolKubeControllerManager = toolcache.ToolKubeControllerManager
	ToolEtcd                  = toolcache.ToolEtcd
	ToolHelm                  = toolcache.ToolHelm
	ToolGolangciLint          = toolcache.ToolGolangciLint
	ToolGoreleaser            = toolcache.ToolGoreleaser
	ToolCycloneDXGomod        = toolcache.ToolCycloneDXGomod
	ToolKo                    = toolcache.ToolKo
	ToolLambdaRIE             = toolcache.ToolLambdaRIE
)

// EnsureTool returns the absolute path of the named tool (see toolcache.Names), building it once into the cache outside
// the repository when it is missing (see package toolcache). Concurrent calls, also from other
// test binaries, build a tool at most once; a failed build is not retried within the process.
func EnsureTool(ctx context.Context, name string) (string, error) {
	return toolcache.Ensure(ctx, name)
}

// Iterations returns SF2LOKI_TEST_ITERATIONS when it is a positive integer, else def.
func Iterations(def int) int {
	if n, err := strconv.Atoi(os.Getenv(EnvIterations)); err == nil && n > 0 {
		return n
	}
	return def
}

// shared holds the servers that live for the whole test binary.
var shared struct {
	sync.Mutex
	mainRunning bool
	stops       []sharedStop
}

type sharedStop struct {
	name string
	stop func()
	tail func() string // log tails, printed when the run failed
}

// Main runs the tests, stops the shared servers, and exits with the tests' status. Call it from
// TestMain in every package that uses a Shared* server.
func Main(m *testing.M) {
	shared.Lock()
	shared.mainRunning = true
	shared.Unlock()
	code := m.Run()
	stopShared(code != 0)
	os.Exit(code)
}

// registerShared records a shared server to stop when Main ends.
func registerShared(name string, stop func(), tail func() string) {
	shared.Lock()
	defer shared.Unlock()
	shared.stops = append(shared.stops, sharedStop{name: name, stop: stop, tail: tail})
}

func stopShared(failed bool) {
	shared.Lock()
	stops := shared.stops
	shared.stops = nil
	shared.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		s := stops[i]
		if failed && s.tail != nil {
			fmt.Fprintf(os.Stderr, "testenv: shared %s:\n%s\n", s.name, s.tail())
		}
		s.stop()
	}
}

func mainRunning() bool {
	shared.Lock()
	defer shared.Unlock()
	return shared.mainRunning
}

// needTool applies the skip/fail policy to a server test: skip under -short; build the tool
// (once, cached); when it cannot be built, fail if SF2LOKI_REQUIRE_REAL_SERVERS=1, else skip.
func needTool(t testing.TB, server, tool string) string {
	t.Helper()
	skipShort(t, server)
	path, err := EnsureTool(t.Context(), tool)
	if err != nil {
		unavailable(t, server, err)
	}
	return path
}

func skipShort(t testing.TB, server string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs a real %s; runs without -short (make e2e)", server)
	}
}

func unavailable(t testing.TB, server string, err error) {
	t.Helper()
	if os.Getenv(EnvRequireRealServers) == "1" {
		t.Fatalf("needs a real %s, which cannot be obtained here (%s=1): %v", server, EnvRequireRealServers, err)
	}
	t.Skipf("needs a real %s, which cannot be obtained here (set %s=1 to fail instead): %v", server, EnvRequireRealServers, err)
}

// cleanupServer stops the server's processes when the test ends and prints their log tails if
// the test failed.
func cleanupServer(t testing.TB, procs ...*process) {
	t.Cleanup(func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
		if t.Failed() {
			for _, p := range procs {
				t.Log(p.tail())
			}
		}
	})
}
