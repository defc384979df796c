package shape

import (
	"sync"
	"sync/atomic"
)

// Line memory. A Plan shapes each row straight into a chunk of lineChunkSize bytes and hands out
// the entry's line and metadata values as strings over the bytes written. A chunk used to become
// garbage once its last entry did, so a run allocated about as many bytes as it shipped and the
// collector ran every few megabytes (about a tenth of the EventLogFile pipeline's CPU). Now a
// consumer that knows when nothing refers to an entry any more (the job, once a push is settled)
// releases its Lines, and a chunk whose every line is released is written again.
//
// The rule that keeps it safe: a chunk is reused only when every line handed out in it was
// released. A consumer that never releases (or releases only some entries) costs collections,
// never data: its chunks stay as they are until the collector frees them.

// lineChunk is one chunk of line memory and the count of what holds it: every line handed out in
// it and not released yet, once its plan has moved on. While the plan still writes into it, the
// count is chunkBias less the lines released so far: the plan counts the lines it hands out in a
// plain integer (Plan.handed) and adds them, less the bias, when it leaves the chunk. One atomic
// add per line cost about 1% of the shaping pipeline's time; now it is one per chunk, and the
// count still reaches zero exactly once, after the plan has left and every line is released.
type lineChunk struct {
	buf  []byte
	refs atomic.Int32
	pool *linePool
}

// Lines is the line memory of one shaped entry (its line and its metadata values). The zero
// Lines holds nothing: the entry was skipped, or its line outgrew the chunk into memory of its
// own.
type Lines struct{ c *lineChunk }

// Release tells the plan that nothing refers to the entry's line or metadata values any more:
// they may be overwritten by later rows. Call it at most once per entry, and only when every
// copy of the entry's strings is dropped (a string kept, a substring included, must be cloned
// first). Safe for concurrent use with the plan shaping other rows.
func (l Lines) Release() {
	if l.c != nil {
		l.c.drop()
	}
}

// chunkBias is what a plan holds of the chunk it writes into: more than the lines a chunk can
// hold (one a byte at most), so releases alone never bring the count to zero.
const chunkBias = 1 << 30

func (c *lineChunk) drop() { c.settle(c.refs.Add(-1)) }

// leave ends the plan's hold of the chunk, in which it handed out handed lines.
func (c *lineChunk) leave(handed int32) { c.settle(c.refs.Add(handed - chunkBias)) }

// settle acts on the count a drop or leave left: the chunk is reused at zero.
func (c *lineChunk) settle(n int32) {
	switch {
	case n == 0:
		c.pool.put(c)
	case n < 0:
		panic("shape: line memory released more often than it was handed out")
	}
}

// maxPooledChunks bounds the chunks a Shaper keeps for reuse (16 MiB): twice the lines of the
// two pushes in flight at the default batch_max_bytes, so that a settled push's chunks serve the
// next ones.
const maxPooledChunks = 256

// linePool holds released chunks for the plans of one Shaper. The puller shapes while the job
// releases, so it is locked; it is touched once per chunk, not per row.
type linePool struct {
	mu     sync.Mutex
	free   []*lineChunk
	reused atomic.Int64
}

func (p *linePool) get() *lineChunk {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return nil
	}
	c := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	p.reused.Add(1)
	return c
}

func (p *linePool) put(c *lineChunk) {
	if cap(c.buf) != lineChunkSize { // a chunk made for one long row is left to the collector
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < maxPooledChunks {
		p.free = append(p.free, c)
	}
}

// newChunk starts the chunk the plan writes the next rows into, with room for need bytes: a
// released one when it is large enough, else a new one. The chunk written so far is let go: it is
// reused once every line handed out in it is released.
func (p *Plan) newChunk(need int) {
	if p.cur != nil {
		p.cur.leave(p.handed)
	}
	var c *lineChunk
	if need <= lineChunkSize {
		c = p.sh.lines.get()
	}
	if c == nil {
		c = &lineChunk{buf: make([]byte, 0, max(lineChunkSize, need)), pool: p.sh.lines}
	}
	c.refs.Store(chunkBias)
	p.cur, p.chunk, p.handed = c, c.buf[:0], 0
}

// Lines returns the line memory of the entry the last Shape returned, for its consumer to release
// once nothing refers to the entry; the zero Lines when Shape skipped the record or the line has
// memory of its own.
func (p *Plan) Lines() Lines { return Lines{p.last} }

// ChunksReused returns how many times the plans of s (and of the Shapers With made from it)
// started a chunk of line memory by reusing a released one instead of allocating it.
func (s *Shaper) ChunksReused() int64 { return s.lines.reused.Load() }
