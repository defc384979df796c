package config_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/config"
)

// FuzzLoad feeds arbitrary configuration files to the loader (with one secret file present,
// secret.txt, and an empty environment). It must never panic; a refusal is config.Errors that
// prints at most MaxPrintedErrors problems; an accepted configuration validates.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		open := func(name string) (io.ReadCloser, error) {
			switch name {
			case "sf2loki.yaml":
				return io.NopCloser(bytes.NewReader(data)), nil
			case "secret.txt":
				return io.NopCloser(strings.NewReader("a-secret-value\n")), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		cfg, err := config.Load(config.LoadOptions{Path: "sf2loki.yaml", Environ: []string{}, Open: open})
		if err != nil {
			var errs config.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Load refused with %T %v, want config.Errors", err, err)
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines > config.MaxPrintedErrors+1+strings.Count(strings.Join(problems(errs), ""), "\n") {
				t.Fatalf("%d lines printed for %d problems", lines, len(errs))
			}
			if len(data) > config.MaxFileBytes && !strings.Contains(err.Error(), "larger than") {
				t.Fatalf("a %d-byte file was not refused for its size: %v", len(data), err)
			}
			return
		}
		if errs := cfg.Validate(); len(errs) > 0 {
			t.Fatalf("Load accepted a configuration that does not validate: %v", errs)
		}
	})
}

// problems are the messages of the first MaxPrintedErrors problems (a message may hold a
// newline, quoted from the file).
func problems(errs config.Errors) []string {
	var out []string
	for i, e := range errs {
		if i == config.MaxPrintedErrors {
			break
		}
		out = append(out, e.Error())
	}
	return out
}
