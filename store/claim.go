package store

import (
	"context"
	"errors"
	"time"
)

// ClaimRequest describes the grant a Claim fences the document with.
type ClaimRequest struct {
	// Epoch is the grant's epoch. The claim succeeds only if the stored fence is strictly lower.
	Epoch uint64
	// Invocation identifies this process run; with Epoch it forms the writer stamp.
	Invocation string
	// Holder is the lease holder identity ("<pod-or-host>/<invocation>").
	Holder string
	// Lease names the lease the epoch comes from. A document fenced by a lease of another name
	// is refused with ErrForeignLease; the same lease with a different LeaseUID (recreated) is
	// logged and accepted.
	Lease    LeaseRef
	LeaseUID string
	// Embedded, when set, writes the embedded lease fields of the fence (lease/store).
	Embedded *LeaseState
	// AdoptForeign claims a document fenced by a different lease (operator migration between
	// lease names or types); it is logged loudly.
	AdoptForeign bool
	// Admit, when set, is called with the version about to be overwritten before every write
	// attempt; a non-nil error aborts the claim with that error (lease/store uses it to apply
	// the takeover rule to each version it would overwrite).
	Admit func(Snapshot) error
}

// LeaseState is the embedded lease part of the fence, written by lease/store.
type LeaseState struct {
	RenewedAt time.Time
	Duration  time.Duration
	Released  bool
}

// Claim fences the document with req.Epoch, starting from base (the snapshot the caller read
// the floor from), and returns the Writer that owns the resulting version chain. Checkpoints
// must be taken from the Writer, never from an earlier read.
//
// The claim goes through the same loop as every commit (cas): on a version mismatch it
// re-reads; our own claim stamp means the write had landed and only its acknowledgement was
// lost; otherwise the version read is judged again (admission, foreign lease, a fence >=
// req.Epoch is ErrFenced) and claimed on. The conflicts it meets count in the Writer's stats.
func (s *Store) Claim(ctx context.Context, req ClaimRequest, base Snapshot) (*Writer, error) {
	if req.Epoch == 0 {
		return nil, errors.New("claim: epoch must be positive")
	}
	if req.Invocation == "" {
		return nil, errors.New("claim: invocation id is required")
	}
	stamp := Stamp{Epoch: req.Epoch, Invocation: req.Invocation, Seq: 0, Host: s.o.Host}
	warnedUID := false
	var stats WriterStats
	res, _, err := s.cas(ctx, base, casOp{
		what: "claim",
		build: func(base Snapshot) (*attempt, error) {
			if req.Admit != nil {
				if err := req.Admit(base); err != nil {
					return nil, err
				}
			}
			if err := s.admitClaim(req, base, &warnedUID); err != nil {
				return nil, err
			}
			if base.Legacy {
				s.o.Logger.Info("migrating a legacy sf2loki checkpoint document to schema 2",
					"object", s.Object(), "keys", len(base.Doc.Checkpoints), "floor", base.Floor())
			}
			now := s.o.Now()
			stamp.WrittenAt = now
			next := s.claimed(req, base.Doc, stamp, now)
			data, err := s.encode(next)
			if err != nil {
				return nil, err
			}
			return &attempt{doc: next, data: data}, nil
		},
		settle: func(cur Snapshot, _ *attempt) (bool, error) {
			return !cur.Absent && cur.Doc.Writer.same(&stamp), nil
		},
	}, &stats)
	if err != nil {
		return nil, err
	}
	w := s.newWriter(req, res.doc, res.version)
	w.stats = stats
	return w, nil
}

// admitClaim checks that base may be claimed by req: not fenced by a lease of another name
// (unless adopting), and fenced below req.Epoch.
func (s *Store) admitClaim(req ClaimRequest, base Snapshot, warnedUID *bool) error {
	f := fenceOf(base)
	if f == nil {
		return nil
	}
	if f.Lease.Name != "" && (f.Lease.Kind != req.Lease.Kind || f.Lease.Namespace != req.Lease.Namespace || f.Lease.Name != req.Lease.Name) {
		ferr := &ForeignLeaseError{Object: s.Object(), Stored: f.Lease, Ours: req.Lease}
		if !req.AdoptForeign {
			return ferr
		}
		s.o.Logger.Warn("adopting a checkpoint document fenced by another lease", "error", ferr.Error())
	} else if f.Lease.Name != "" && f.LeaseUID != "" && req.LeaseUID != "" && f.LeaseUID != req.LeaseUID && !*warnedUID {
		*warnedUID = true
		s.o.Logger.Warn("lease was recreated; epoch continues from the document's fence",
			"object", s.Object(), "lease", req.Lease.String(), "stored_uid", f.LeaseUID,
			"uid", req.LeaseUID, "stored_epoch", f.Epoch, "epoch", req.Epoch)
	}
	if f.Epoch >= req.Epoch {
		return &FencedError{Object: s.Object(), Epoch: req.Epoch, StoredEpoch: f.Epoch, StoredHolder: f.Holder}
	}
	return nil
}

// fenceOf returns the snapshot's fence or nil.
func fenceOf(s Snapshot) *Fence {
	if s.Absent {
		return nil
	}
	return s.Doc.Fence
}

// claimed builds the claimed document from base (nil when absent).
func (s *Store) claimed(req ClaimRequest, base *Document, stamp Stamp, now time.Time) *Document {
	next := base.Clone()
	if next == nil {
		next = &Document{Checkpoints: map[string]Checkpoint{}}
	}
	next.Schema = SchemaVersion
	next.Fence = &Fence{
		Epoch:     req.Epoch,
		Holder:    req.Holder,
		Lease:     req.Lease,
		LeaseUID:  req.LeaseUID,
		ClaimedAt: now,
	}
	if e := req.Embedded; e != nil {
		next.Fence.RenewedAt = e.RenewedAt
		next.Fence.Duration = Duration(e.Duration)
		next.Fence.Released = e.Released
	}
	st := stamp
	next.Writer = &st
	next.History = append(next.History, ClaimRecord{
		Epoch: req.Epoch, Holder: req.Holder, Lease: req.Lease, LeaseUID: req.LeaseUID, ClaimedAt: now,
	})
	if n := len(next.History) - s.o.HistoryLen; n > 0 {
		next.History = next.History[n:]
	}
	return next
}
