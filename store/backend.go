package store

import "context"

// Version is a backend's opaque version token for one stored version of the document (a file
// content hash, an S3 ETag, a GCS generation, a ConfigMap resourceVersion). The empty Version
// means "no document": Store with an empty expected version creates.
type Version string

// Backend stores the document's bytes. It knows nothing about fences, stamps or checkpoints:
// every rule of the protocol lives in this package (Store, Writer), written once.
//
// Errors are classified by wrapping the package sentinels with %w:
//   - Load: ErrAbsent when there is no document; ErrUnavailable when the backend cannot be
//     reached (Store.Read retries those); ErrPermission, ErrNoLocation for configuration
//     problems.
//   - Store: ErrConflict when the precondition definitely failed and nothing was written;
//     ErrPermission, ErrNoLocation, ErrTooLarge when nothing was written for those reasons;
//     anything else (ErrUnavailable: timeout, reset, 5xx after sending) is ambiguous and is
//     resolved by the protocol re-reading the document, never by retrying blindly. Backends
//     must not retry conditional writes themselves.
type Backend interface {
	// Load returns the document's bytes and the version they belong to, read atomically. A
	// document larger than MaxSize is refused with ErrTooLarge without being read whole
	// (ReadLimited).
	Load(ctx context.Context) ([]byte, Version, error)
	// Store writes data if the stored version equals expect, or, when expect is empty, only if
	// no document exists. It returns the new version.
	Store(ctx context.Context, data []byte, expect Version) (Version, error)
	// Delete removes the document unconditionally (probe objects, tests, operator resets).
	// Deleting an absent document is not an error.
	Delete(ctx context.Context) error
	// MaxSize is the largest document the backend accepts, in bytes.
	MaxSize() int
	// String names the document for messages: "file /path", "s3://bucket/key", ...
	String() string
}
