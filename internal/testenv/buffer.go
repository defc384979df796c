package testenv

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer safe for concurrent writers (a process's output, a logger of
// several goroutines) and a reader.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
