package store

import (
	"context"
	"errors"
	"fmt"
)

// attempt is one write: the full document and its encoding.
type attempt struct {
	doc  *Document
	data []byte
}

// casOp is what distinguishes one conditional write from another (a claim from a commit): how
// to build the document to write on a version, and how to read the version found after a
// write whose outcome is unknown.
type casOp struct {
	// what names the write in errors ("claim", "commit").
	what string
	// build returns the attempt to write on top of base. It runs before the first write and
	// after every re-read that proved the previous attempt did not land; an error ends the
	// write with that error (a newer fence, a live lease, a foreign lease).
	build func(base Snapshot) (*attempt, error)
	// settle reads cur, the document re-read after att's outcome was unknown (a precondition
	// failure, a timeout, a lost response): landed means att is what is stored (its
	// acknowledgement was lost); an error means no write can succeed any more (fenced,
	// integrity). Neither: att did not land and build runs again on cur.
	settle func(cur Snapshot, att *attempt) (landed bool, err error)
}

// casResult is a write that is confirmed: the document stored and its version.
type casResult struct {
	doc     *Document
	version Version
}

// cas is the one loop that writes with a precondition and settles an ambiguous result, used
// by claims and commits alike. It writes op's attempt conditioned on base's version until the
// write is confirmed, proven impossible, or its outcome cannot be established; it never
// retries blindly: every retry follows a re-read that proved the previous attempt had not
// landed. stats counts the conflicts, lost acknowledgements and retries met.
//
// On ErrUnavailable the returned attempt is the one whose outcome is unknown (nil when none
// was sent): the caller must settle it before writing again.
func (s *Store) cas(ctx context.Context, base Snapshot, op casOp, stats *WriterStats) (casResult, *attempt, error) {
	att, err := op.build(base)
	if err != nil {
		return casResult{}, nil, err
	}
	var last error // the last write's failure, the cause shown when the write does not settle
	for try := 0; ; try++ {
		if try >= s.o.WriteAttempts {
			return casResult{}, att, fmt.Errorf("%w: %s of %s did not settle after %d attempts; the last one: %w", ErrUnavailable, op.what, s.Object(), try, last)
		}
		v, err := s.b.Store(ctx, att.data, base.Version)
		last = err
		if err == nil {
			return casResult{doc: att.doc, version: v}, nil, nil
		}
		if definite(err) {
			return casResult{}, nil, fmt.Errorf("%s of %s: %w", op.what, s.Object(), err)
		}
		if errors.Is(err, ErrConflict) {
			stats.Conflicts++
		}
		cur, rerr := s.Read(ctx)
		if rerr != nil {
			return casResult{}, att, fmt.Errorf("%w: %s of %s is unconfirmed (%w), and re-reading failed: %w", ErrUnavailable, op.what, s.Object(), err, rerr)
		}
		landed, err := op.settle(cur, att)
		if err != nil {
			return casResult{}, nil, err
		}
		if landed {
			stats.LostAcks++
			return casResult{doc: att.doc, version: cur.Version}, nil, nil
		}
		stats.Retries++
		if cur.Version == base.Version { // nothing landed: pause before writing the same version again
			if serr := s.sleep(ctx, try+1); serr != nil {
				return casResult{}, att, fmt.Errorf("%w: %s of %s: %w", ErrUnavailable, op.what, s.Object(), serr)
			}
		}
		base = cur
		if att, err = op.build(cur); err != nil {
			return casResult{}, nil, err
		}
	}
}
