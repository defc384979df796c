package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sf2loki/sf2loki/store"
)

// FuzzDecode feeds arbitrary bytes to the checkpoint document decoder. It must never panic;
// what it accepts must encode and decode again to the same document with the same fence (a
// decoded document is written back on the next commit, so a lossy round trip would move a fence
// or a cursor); what it refuses is a *CorruptError.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, legacy, err := store.Decode("fuzz", data)
		if err != nil {
			var ce *store.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Decode refused %q with %T %v, want a *CorruptError", data, err, err)
			}
			return
		}
		first, err := doc.Encode()
		if err != nil {
			t.Fatalf("Encode of a decoded document (legacy %v): %v", legacy, err)
		}
		again, legacyAgain, err := store.Decode("fuzz", first)
		if err != nil || legacyAgain {
			t.Fatalf("the encoded document does not decode as schema 2 (legacy %v, err %v):\n%s", legacyAgain, err, first)
		}
		if fence(doc) != fence(again) {
			t.Fatalf("the round trip moved the fence from %d to %d:\n%s", fence(doc), fence(again), first)
		}
		if len(again.Checkpoints) != len(doc.Checkpoints) {
			t.Fatalf("the round trip has %d checkpoints, the document %d", len(again.Checkpoints), len(doc.Checkpoints))
		}
		second, err := again.Encode()
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("encoding is not stable (err %v):\n%s\n---\n%s", err, first, second)
		}
	})
}

func fence(d *store.Document) uint64 {
	if d.Fence == nil {
		return 0
	}
	return d.Fence.Epoch
}
