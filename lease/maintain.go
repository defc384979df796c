package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sf2loki/sf2loki/store"
)

// MaintainOptions configures Maintain.
type MaintainOptions struct {
	// SessionOptions are those of Start: Wait is how long to wait for a running job to finish
	// (then ErrBusy); MinEpoch raises the fence floor.
	SessionOptions
	// Force takes the lease over from its holder first (Lease.ReleaseFor), live or not: the
	// run that held it is fenced at its next commit and cannot revert the change.
	Force bool
}

// MaintainResult is what Maintain did.
type MaintainResult struct {
	// Epoch is the epoch the change was written under (0 when nothing was claimed).
	Epoch uint64
	// TookOver is the holder's record that Force released (nil when there was none).
	TookOver *Record
}

// Edit decides an operator's change from the claimed document. A nil change with a nil error
// commits nothing (the claim alone is the operation, e.g. raising the fence floor).
type Edit func(doc *store.Document) (*store.Change, error)

// Maintain is one operator write to the checkpoint document (set, delete, import, raise the
// fence floor), made through the same protocol as a run: acquire the lease as a maintenance
// holder (waiting up to o.Wait for a running job to finish, else ErrBusy), claim the document
// with a new epoch — so a job still running is fenced at its next commit instead of reverting
// the repair — apply one commit, release.
func Maintain(ctx context.Context, l Lease, st *store.Store, o MaintainOptions, edit Edit) (MaintainResult, error) {
	var res MaintainResult
	if o.Force {
		rec, err := l.Inspect(ctx)
		switch {
		case errors.Is(err, ErrAbsent):
		case err != nil:
			return res, err
		case rec.Holder != "" && !rec.Released:
			// Changed hands meanwhile (ErrLost): the acquire below decides.
			if err := l.ReleaseFor(ctx, rec); err != nil && !errors.Is(err, ErrLost) {
				return res, fmt.Errorf("taking the lease over: %w", err)
			}
			res.TookOver = &rec
		}
	}
	s, err := Start(ctx, l, st, o.SessionOptions)
	if err != nil {
		return res, err
	}
	res.Epoch = s.Epoch()
	ch, err := edit(s.Document())
	if err == nil && ch != nil {
		err = s.Commit(ctx, *ch)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := s.Release(rctx); rerr != nil {
		s.log.Warn("releasing the lease after the maintenance write; it expires on its own", "err", rerr)
	}
	return res, err
}
