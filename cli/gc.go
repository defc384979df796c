package cli

import (
	"runtime"
	"runtime/debug"
)

// The heap goal. sf2loki runs with GOGC=75 (the heap may grow 75% over what the last collection
// left live, not Go's 100%): the memory targets of a large file need the margin
// (docs/performance.md). Until the first collection it runs with GOGC=200, whose goal is 8 MB
// on a small heap (the runtime's floor is 4 MB scaled by GOGC): a run with nothing to do
// allocates about 6 MB, most of it the package inits', and at GOGC=75 its goal of 3 MB was passed
// as main began, so it paid for a collection whose work and pages cost more than the garbage it
// freed (wall time and peak RSS both fall without it). A run with work collects first at 8 MB,
// far under its steady goal, and runs at GOGC=75 from that collection on.
const (
	gcPercent      = 75
	startGCPercent = 200
)

// gcSentinel is allocated once and dropped at once: the first collection finds it unreachable
// and runs its cleanup. It holds a pointer so that the runtime does not batch it with other
// small pointer-free objects (whose shared slot could keep it alive).
type gcSentinel struct{ _ *byte }

// tuneGC sets the heap goal unless the environment sets GOGC (an explicit GOGC, "off" included,
// wins and is left alone). lookup is os.LookupEnv outside tests.
func tuneGC(lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); set {
		return
	}
	debug.SetGCPercent(startGCPercent)
	runtime.AddCleanup(new(gcSentinel), func(int) { debug.SetGCPercent(gcPercent) }, 0)
}
