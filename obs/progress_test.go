package obs

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Off a terminal, progress is a log line every interval, never the bar; it stops when done closes.
func TestProgressLogsOffATerminal(t *testing.T) {
	var logged, out bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logged, &mu}, nil))
	stop := StartProgress(NewWriter(&out, NewRedactor()), log, 5*time.Millisecond, "copy progress",
		func() string { return "[BAR]" }, func() []any { return []any{"rows", 42} })
	for {
		mu.Lock()
		n := strings.Count(logged.String(), "copy progress")
		mu.Unlock()
		if n >= 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if !strings.Contains(logged.String(), "rows=42") || out.Len() != 0 || strings.Contains(logged.String(), "[BAR]") {
		t.Fatalf("logged %q, written %q; want log lines with rows=42 and no bar", logged.String(), out.String())
	}
}

func TestIsTerminalFalseForFilesAndBuffers(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(NewWriter(f, NewRedactor())) || IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a file or a buffer (wrapped or not) is not a terminal")
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
