package store

import (
	"errors"
	"fmt"
	"io"
)

// Sentinel errors. Callers branch on them with errors.Is; the typed errors below carry the
// details (object, epochs, lease names) for messages and logs.
var (
	// ErrAbsent is returned by Backend.Load when the document does not exist.
	ErrAbsent = errors.New("document does not exist")
	// ErrConflict is returned by Backend.Store when the version precondition failed and
	// nothing was written.
	ErrConflict = errors.New("version precondition failed")
	// ErrUnavailable means the backend could not be reached or did not answer in time; for a
	// write it also means the outcome is unknown until the document is read again.
	ErrUnavailable = errors.New("store unavailable")
	// ErrPermission means the backend refused access (file mode, IAM, RBAC): a configuration
	// problem, never retried.
	ErrPermission = errors.New("permission denied")
	// ErrNoLocation means the place the document lives in does not exist (bucket, namespace):
	// a configuration problem, never retried.
	ErrNoLocation = errors.New("store location does not exist")
	// ErrFenced means a newer epoch owns the document: this writer is superseded and must
	// stop writing.
	ErrFenced = errors.New("fenced by a newer epoch")
	// ErrIntegrity means the document shows something the protocol makes impossible (a foreign
	// writer under our epoch, a fence moved backwards, an epoch overflow): a human must look.
	ErrIntegrity = errors.New("integrity violation")
	// ErrCorrupt means the stored bytes are not a readable document. A corrupt document is
	// never treated as absent and never overwritten.
	ErrCorrupt = errors.New("corrupt document")
	// ErrForeignLease means the document is fenced by a lease with a different name: two
	// deployments point at one document, or a deployment's lease changed. It is a configuration
	// error, not a fence.
	ErrForeignLease = errors.New("document belongs to a different lease")
	// ErrTooLarge means the encoded document would exceed the backend's size limit; nothing
	// was written.
	ErrTooLarge = errors.New("document too large")
)

// CorruptError reports an unreadable document, naming the object and how to recover.
type CorruptError struct {
	Object string // e.g. "file /var/lib/sf2loki/state.json", "s3://bucket/key"
	Reason string // what is wrong with the bytes
	Err    error  // the parse error, if any
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("corrupt checkpoint document %s: %s", e.Object, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg + " (it was left untouched; restore it from a backup, or move it aside to " +
		"restart every source from its configured lookback; `sf2loki state show` names it too)"
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Err}
}

// FencedError reports that a newer epoch (or a deletion) superseded this writer.
type FencedError struct {
	Object       string
	Epoch        uint64 // ours
	StoredEpoch  uint64 // the fence found in the document
	StoredHolder string
	Reason       string // optional detail, e.g. "document deleted"
}

func (e *FencedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("fenced: %s: epoch %d: %s", e.Object, e.Epoch, e.Reason)
	}
	return fmt.Sprintf("fenced: %s is claimed by epoch %d (holder %q); ours is %d",
		e.Object, e.StoredEpoch, e.StoredHolder, e.Epoch)
}

// Unwrap makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Unwrap() error { return ErrFenced }

// ForeignLeaseError reports a document fenced by a lease other than the configured one.
type ForeignLeaseError struct {
	Object string
	Stored LeaseRef // the lease recorded in the document
	Ours   LeaseRef // the lease this process was configured with
}

// Error says the two ways it comes about and what fixes each. Another deployment at the
// document needs a document of its own: under one lease the two would make each other busy, and
// a busy run ships nothing. A deployment whose lease changed (lease name, type or namespace, a
// job group's lease, a renamed release) takes its lease back, or moves its checkpoints.
func (e *ForeignLeaseError) Error() string {
	return fmt.Sprintf("%s is fenced by lease %s but this deployment uses lease %s: another "+
		"deployment uses this checkpoint document, or this deployment's lease changed. Another "+
		"deployment needs a document of its own (state key/path): under one lease the two would make "+
		"each other busy. If this deployment's lease changed, set it back to %s, or export the "+
		"checkpoints with the old lease (state export) and import them into a new, empty document "+
		"with the new one (state import)",
		e.Object, e.Stored, e.Ours, e.Stored)
}

// Unwrap makes errors.Is(err, ErrForeignLease) hold.
func (e *ForeignLeaseError) Unwrap() error { return ErrForeignLease }

// ReadLimited reads r to its end, refusing a body of more than limit bytes with ErrTooLarge
// after reading at most limit+1 of them (limit <= 0: no limit). Backends read documents with
// it, so an oversize document is refused at once instead of after reading it whole.
func ReadLimited(r io.Reader, limit int) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(r)
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}
