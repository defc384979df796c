package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/file"
)

// fileStoreChecks builds the store checks doctor builds for state.store file at path (the
// real document and its probe object next to it), as ForConfig does.
func fileStoreChecks(t *testing.T, path string) []Check {
	t.Helper()
	doc, err := file.New(file.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := file.New(file.Options{Path: path + ProbeSuffix})
	if err != nil {
		t.Fatal(err)
	}
	return StoreChecks(Store{Store: store.New(doc, store.Options{}), Type: "file", Probe: probe, FilePath: path})
}

// runStoreChecks runs the file store checks for path and returns store.file and store.probe.
func runStoreChecks(t *testing.T, path string) (fileResult, probe Result) {
	t.Helper()
	rep, err := Run(context.Background(), fileStoreChecks(t, path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	fileResult, _ = rep.Result("store.file")
	probe, _ = rep.Result("store.probe")
	return fileResult, probe
}

// A state directory that does not exist yet is created by the run's first write (the file
// backend's MkdirAll), so store.file must not FAIL it when its nearest existing ancestor takes
// new directories. And doctor must not create it: store.probe, whose write would, does not
// run, so a second doctor run gives the same verdict as the first.
func TestFileStoreMissingDirectoryIsCreatedByTheFirstRun(t *testing.T) {
	base := t.TempDir()

	if err := firstWrite(filepath.Join(base, "run", "state", "sf2loki.json")); err != nil {
		t.Fatalf("the run's first write into a missing directory failed: %v", err)
	}

	docPath := filepath.Join(base, "doctor", "state", "sf2loki.json")
	for i := range 2 {
		f, p := runStoreChecks(t, docPath)
		if f.Status != StatusInfo {
			t.Errorf("doctor run %d: store.file = %s %q (fix %q), want INFO: the first run creates the directory", i+1, f.Status, f.Message, f.Fix)
		}
		if p.Status != StatusSkip {
			t.Errorf("doctor run %d: store.probe = %s %q, want SKIP: its write would create the directory", i+1, p.Status, p.Message)
		}
		if _, err := os.Stat(filepath.Join(base, "doctor")); err == nil {
			t.Fatalf("doctor run %d created %s", i+1, filepath.Join(base, "doctor"))
		}
	}

	// Once the directory exists, the probe runs (and store.file passes).
	if err := os.MkdirAll(filepath.Dir(docPath), 0o750); err != nil {
		t.Fatal(err)
	}
	if f, p := runStoreChecks(t, docPath); f.Status != StatusPass || p.Status != StatusPass {
		t.Errorf("existing directory: store.file = %s %q, store.probe = %s %q, want PASS and PASS", f.Status, f.Message, p.Status, p.Message)
	}
}

// Doctor FAILs a missing state directory when the run's first write could not create it
// either (store.read already does for a path through a file; store.file for the rest).
func TestFileStoreMissingDirectoryTheRunCannotCreate(t *testing.T) {
	base := t.TempDir()
	notDir := filepath.Join(base, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(base, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		root       bool // whether the case holds for root, who may write anywhere
	}{
		{"a path component is a file", filepath.Join(notDir, "state", "sf2loki.json"), true},
		{"the nearest existing ancestor is read-only", filepath.Join(readOnly, "state", "sf2loki.json"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.root && os.Geteuid() == 0 {
				t.Skip("root may create directories in a read-only directory")
			}
			if err := firstWrite(tt.path); err == nil {
				t.Fatal("the run's first write succeeded; the case is wrong")
			}
			rep, err := Run(context.Background(), fileStoreChecks(t, tt.path), Options{})
			if err != nil {
				t.Fatal(err)
			}
			read, _ := rep.Result("store.read")
			f, _ := rep.Result("store.file")
			if read.Status != StatusFail && f.Status != StatusFail {
				t.Errorf("store.read = %s %q, store.file = %s %q, want a FAIL: the run's first write fails", read.Status, read.Message, f.Status, f.Message)
			}
		})
	}
}

// firstWrite does what a run does on a fresh install with the document at path: read it
// (absent) and claim it, the first write.
func firstWrite(path string) error {
	b, err := file.New(file.Options{Path: path})
	if err != nil {
		return err
	}
	st := store.New(b, store.Options{})
	ctx := context.Background()
	snap, err := st.Read(ctx)
	if err != nil {
		return err
	}
	_, err = st.Claim(ctx, store.ClaimRequest{Epoch: 1, Invocation: "inv", Holder: "h/inv",
		Lease: store.LeaseRef{Kind: "store", Name: "sf2loki"}}, snap)
	return err
}
