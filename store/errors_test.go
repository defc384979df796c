package store

import (
	"strings"
	"testing"
)

// TestForeignLeaseErrorAdvice: the refusal of a document fenced by another lease names both
// leases and advises what fixes each way it comes about: another deployment at the document gets
// a document of its own, never the same lease (two deployments under one lease make each other
// busy); a lease changed under a deployment is set back to the one the document records, or the
// checkpoints move to a new document.
func TestForeignLeaseErrorAdvice(t *testing.T) {
	err := &ForeignLeaseError{Object: "file /var/lib/sf2loki/state.json",
		Stored: LeaseRef{Kind: "store", Name: "sf2loki"}, Ours: LeaseRef{Kind: "Lease", Namespace: "ops", Name: "sf2loki-elf"}}
	msg := err.Error()
	for _, want := range []string{"store/sf2loki", "Lease/ops/sf2loki-elf", "a document of its own", "busy", "back to store/sf2loki", "state export", "state import"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "same lease") {
		t.Errorf("the message advises sharing a lease:\n%s", msg)
	}
}
