package loki

import (
	"context"
	"runtime"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// TestPushBuffersSurviveCollections: a client keeps its working buffers between pushes even when
// a garbage collection empties the sync.Pools in between, so a run pushing batch after batch does
// not grow new multi-megabyte buffers after every collection.
func TestPushBuffersSurviveCollections(t *testing.T) {
	c := newClient(t, simloki.New(simloki.Options{}), nil)
	es := benchEntries(500)
	if res := c.Push(context.Background(), es); !res.OK() {
		t.Fatalf("push: %v", res.Err)
	}
	s, w := c.spareScratch.Load(), c.spareWire.Load()
	if s == nil || w == nil || cap(s.raw) == 0 || cap(w.b) == 0 {
		t.Fatal("no spare buffers kept after a push")
	}
	runtime.GC()
	runtime.GC() // twice: a sync.Pool's victim cache survives one collection
	if res := c.Push(context.Background(), es); !res.OK() {
		t.Fatalf("push: %v", res.Err)
	}
	if c.spareScratch.Load() != s || c.spareWire.Load() != w {
		t.Fatal("the second push did not reuse the client's buffers")
	}
}
