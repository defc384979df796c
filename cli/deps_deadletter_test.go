package cli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/config"
)

// A dead-letter file the run creates survives a power loss only once its directory entry is
// durable too: the entries a commit passed are fsynced in the file, which is no use if the file
// itself vanishes. Creating the file syncs its directory; opening an existing one does not.
func TestCreatingTheDeadLetterFileSyncsItsDirectory(t *testing.T) {
	var synced []string
	stubDeadLetterDirSync(t, func(dir string) error {
		synced = append(synced, dir)
		return nil
	})
	dir := t.TempDir()
	cfg := &config.Config{}
	cfg.Sink.Loki.DeadLetterPath = filepath.Join(dir, "dead-letters.jsonl")

	p := &invocationParts{}
	if err := openDeadLetter(t.Context(), cfg, p, nil); err != nil {
		t.Fatal(err)
	}
	p.close()
	if _, err := os.Stat(cfg.Sink.Loki.DeadLetterPath); err != nil {
		t.Fatalf("the dead-letter file was not created: %v", err)
	}
	if want := []string{dir}; !slices.Equal(synced, want) {
		t.Fatalf("directories synced after creating the dead-letter file: %q, want %q", synced, want)
	}

	synced = nil
	p = &invocationParts{}
	if err := openDeadLetter(t.Context(), cfg, p, nil); err != nil {
		t.Fatal(err)
	}
	p.close()
	if len(synced) != 0 {
		t.Errorf("opening the existing dead-letter file synced %q, want no directory sync", synced)
	}
}

// When the new file's directory cannot be synced, the run does not start with a dead letter
// that could vanish: the error names sink.loki.dead_letter_path and the directory.
func TestDeadLetterDirectorySyncFailureNamesTheKey(t *testing.T) {
	stubDeadLetterDirSync(t, func(string) error { return errors.New("input/output error") })
	dir := t.TempDir()
	cfg := &config.Config{}
	cfg.Sink.Loki.DeadLetterPath = filepath.Join(dir, "dead-letters.jsonl")

	p := &invocationParts{}
	err := openDeadLetter(t.Context(), cfg, p, nil)
	p.close()
	if err == nil {
		t.Fatal("openDeadLetter succeeded although the directory of the new file could not be synced")
	}
	for _, want := range []string{"sink.loki.dead_letter_path", dir, "input/output error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func stubDeadLetterDirSync(t *testing.T, sync func(string) error) {
	t.Helper()
	saved := syncDeadLetterDir
	syncDeadLetterDir = sync
	t.Cleanup(func() { syncDeadLetterDir = saved })
}
