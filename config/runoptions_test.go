package config

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// The state and lease sections build the parts they name: a file store writes where
// state.file.path says, a store lease lives in its document under lease.name.
func TestBackendAndLeaseOfTheConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	cfg := mustLoad(t, "state:\n  store: file\n  file:\n    path: "+path+"\nlease:\n  type: store\n  name: nightly\n")
	b, err := cfg.Backend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(b, store.Options{})
	l, err := cfg.NewLease(st, cfg.LeaseConfig())
	if err != nil {
		t.Fatal(err)
	}
	if ref := l.Ref(); ref.Name != "nightly" {
		t.Fatalf("lease %+v; want lease.name nightly", ref)
	}
	s, err := lease.Start(context.Background(), l, st, lease.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(context.Background(), store.Change{Set: map[string]json.RawMessage{"k": json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Release(context.Background())
	if data, err := os.ReadFile(path); err != nil || !strings.Contains(string(data), `"k"`) {
		t.Fatalf("state.file.path holds %q (%v); want the committed key", data, err)
	}
	cfg.State.Store, cfg.Lease.Type = "etcd", "zookeeper"
	if _, err := cfg.Backend(context.Background()); err == nil || !strings.Contains(err.Error(), `state.store "etcd"`) {
		t.Errorf("unknown store: %v; want an error naming state.store", err)
	}
	if _, err := cfg.NewLease(st, cfg.LeaseConfig()); err == nil || !strings.Contains(err.Error(), `lease.type "zookeeper"`) {
		t.Errorf("unknown lease: %v; want an error naming lease.type", err)
	}
}

// The lease/store pairing advice has one wording, the lease package's: config check prints it,
// run-once logs it, doctor reports it once (in the lease's pairing check).
func TestPairingWarningIsTheLeasePackages(t *testing.T) {
	cfg := mustLoad(t, "state:\n  store: file\nlease:\n  type: kubernetes\n  namespace: ns\n")
	want := lease.PairingWarning("kubernetes", "file")
	if want == "" || !slices.Contains(cfg.Warnings(), want) {
		t.Fatalf("warnings %q; want the lease package's pairing warning %q", cfg.Warnings(), want)
	}
	for _, w := range cfg.Warnings() {
		if w != want && strings.Contains(w, "flock") {
			t.Errorf("a second wording of the pairing advice: %q", w)
		}
	}
}
