// Package store is the checkpoint store: one JSON document per deployment (a job group or a
// backfill) holding every source's checkpoint, and the protocol that makes sure a stale
// invocation — paused, partitioned or merely slow — can never move a checkpoint backwards,
// whatever the lease says.
//
// The protocol is written once, here; backends (store/file, store/s3, store/gcs,
// store/configmap) only read bytes with their version and write bytes conditioned on a
// version (Backend).
//
//   - Read returns the document and its version, or absent, or ErrUnavailable, or a
//     CorruptError. A corrupt document is never treated as absent and never overwritten.
//   - Claim fences the document with a grant's epoch, strictly greater than the stored
//     fence, and returns the Writer that owns the document's version chain from then on.
//     Checkpoints are taken from the claimed version, never from an earlier read. A document
//     fenced by a differently named lease is a configuration error (ErrForeignLease); the same
//     lease with a new uid (recreated) is logged and accepted.
//   - Writer.Commit writes checkpoint and counter changes conditioned on the exact version
//     the writer last wrote, with a fresh stamp (epoch, invocation, seq). An ambiguous
//     failure is settled by re-reading and looking for that stamp, never by a blind retry. A
//     fence above ours is ErrFenced; a foreign stamp under our epoch, or a fence below ours,
//     is ErrIntegrity.
//
// A legacy Python sf2loki document (a flat key map, with "__fence_epoch__" in the file
// store) reads as checkpoints plus a fence epoch (the floor) and is rewritten as schema 2 by
// the first claim. A size guard warns at 80% of the backend's limit and refuses to exceed it
// (ErrTooLarge).
//
// Jobs do not use Claim and Commit directly: lease.Start acquires the lease, claims, and
// hands out a lease.Session that commits through the Writer.
package store
