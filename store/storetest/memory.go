// Package storetest holds what every checkpoint-store backend is tested with: the shared
// conformance suite (Run), an in-memory backend with fault hooks (Memory) that the job's
// randomized crash simulation also uses, and a checker of the protocol's invariants over every
// version a test observed (Chain).
package storetest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/sf2loki/sf2loki/store"
)

// Fault is what the Memory backend does instead of (or besides) a normal operation.
type Fault int

// Faults the Memory backend can inject.
const (
	// None performs the operation normally.
	None Fault = iota
	// LostAck applies a write (if its precondition holds) and then reports an ambiguous
	// error, as when the response is lost after the server committed.
	LostAck
	// Unreachable fails the operation with store.ErrUnavailable without applying it.
	Unreachable
	// Conflict fails a write with store.ErrConflict without applying it, as an S3 409
	// ConditionalRequestConflict does.
	Conflict
	// IgnorePrecondition applies a write whatever the stored version, as an S3-compatible
	// endpoint that ignores If-Match does.
	IgnorePrecondition
)

// Op names the operation a fault hook is asked about.
type Op int

// Operations of the Memory backend.
const (
	OpLoad Op = iota
	OpStore
	OpDelete
)

// Memory is an in-memory Backend with fault hooks. Versions are an increasing counter, or the
// content MD5 (like a single-part S3 ETag) when created with NewMemoryMD5. It is safe for
// concurrent use.
type Memory struct {
	md5 bool

	mu      sync.Mutex
	data    []byte
	version store.Version
	counter int
	queue   map[Op][]Fault
	hook    func(Op) Fault
	history []Write
	max     int
}

// Write is one applied write, as recorded by Memory.
type Write struct {
	Expect  store.Version
	Version store.Version
	Data    []byte
}

// NewMemory returns an empty Memory backend with counter versions.
func NewMemory() *Memory { return &Memory{queue: map[Op][]Fault{}, max: 1 << 20} }

// NewMemoryMD5 returns an empty Memory backend whose versions are the content MD5, so writing
// identical bytes yields the identical version (the S3 ETag ABA hazard).
func NewMemoryMD5() *Memory {
	m := NewMemory()
	m.md5 = true
	return m
}

// FailNext queues faults for the next operations of kind op, in order.
func (m *Memory) FailNext(op Op, faults ...Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue[op] = append(m.queue[op], faults...)
}

// SetHook installs a function consulted for every operation whose queue is empty (nil removes
// it). The randomized crash simulation uses it to inject faults with a seeded generator. The
// hook runs with the backend's lock held: it must not call the backend.
func (m *Memory) SetHook(h func(Op) Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = h
}

// SetMaxSize changes MaxSize (default 1 MiB).
func (m *Memory) SetMaxSize(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.max = n
}

// Put replaces the stored bytes unconditionally (test setup: corrupt or legacy documents).
func (m *Memory) Put(data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apply("", data)
}

// Bytes returns the stored bytes (nil when absent).
func (m *Memory) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.data)
}

// History returns every applied write in order.
func (m *Memory) History() []Write {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Write(nil), m.history...)
}

func (m *Memory) fault(op Op) Fault {
	if q := m.queue[op]; len(q) > 0 {
		m.queue[op] = q[1:]
		return q[0]
	}
	if m.hook != nil {
		return m.hook(op)
	}
	return None
}

// Load implements store.Backend.
func (m *Memory) Load(ctx context.Context) ([]byte, store.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fault(OpLoad) == Unreachable {
		return nil, "", fmt.Errorf("%w: injected: memory store unreachable", store.ErrUnavailable)
	}
	if m.data == nil {
		return nil, "", store.ErrAbsent
	}
	if len(m.data) > m.max {
		return nil, "", fmt.Errorf("%w: %d bytes, more than %d", store.ErrTooLarge, len(m.data), m.max)
	}
	return bytes.Clone(m.data), m.version, nil
}

// Store implements store.Backend.
func (m *Memory) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fault(OpStore)
	switch f {
	case Unreachable:
		return "", fmt.Errorf("%w: injected: memory store unreachable", store.ErrUnavailable)
	case Conflict:
		return "", fmt.Errorf("%w: injected: concurrent conditional request", store.ErrConflict)
	}
	if f != IgnorePrecondition && expect != m.version {
		return "", fmt.Errorf("%w: expected version %q, stored %q", store.ErrConflict, expect, m.version)
	}
	if len(data) > m.max {
		return "", fmt.Errorf("%w: %d bytes", store.ErrTooLarge, len(data))
	}
	v := m.apply(expect, data)
	if f == LostAck {
		return "", fmt.Errorf("%w: injected: connection reset after the write was applied", store.ErrUnavailable)
	}
	return v, nil
}

func (m *Memory) apply(expect store.Version, data []byte) store.Version {
	m.counter++
	if m.md5 {
		sum := md5.Sum(data)
		m.version = store.Version(hex.EncodeToString(sum[:]))
	} else {
		m.version = store.Version("v" + strconv.Itoa(m.counter))
	}
	m.data = bytes.Clone(data)
	m.history = append(m.history, Write{Expect: expect, Version: m.version, Data: m.data})
	return m.version
}

// Delete implements store.Backend.
func (m *Memory) Delete(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fault(OpDelete) == Unreachable {
		return fmt.Errorf("%w: injected: memory store unreachable", store.ErrUnavailable)
	}
	m.data, m.version = nil, ""
	return nil
}

// MaxSize implements store.Backend.
func (m *Memory) MaxSize() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// String implements store.Backend.
func (m *Memory) String() string { return "memory" }
