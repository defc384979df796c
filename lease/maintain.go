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
	// Skew is the lease's allowed clock skew, for describing a holder that refused us.
	Skew time.Duration
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
// the repair — apply one commit, release. A live holder after o.Wait is a refusal that
// describes it (ErrBusy); nothing was written then.
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
	if errors.Is(err, ErrBusy) {
		detail := err.Error()
		if rec, ierr := l.Inspect(ctx); ierr == nil {
			detail = rec.Describe(time.Now(), o.Skew)
		}
		return res, refused(err, "a run holds the lease and did not release it within --wait %s\n  %s\n  "+
			"wait longer (--wait), or take the lease over with --force (the running job is then fenced at its next commit)", o.Wait, detail)
	}
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

// FreeOptions configures Free.
type FreeOptions struct {
	// Holder, when set, frees the lease only if this is its holder (as Record.Holder names it);
	// naming the live holder is the operator's consent to release it.
	Holder string
	// Force frees a live holder's lease without naming it.
	Force bool
	// Now and Skew decide whether the holder is live (Record.State).
	Now  time.Time
	Skew time.Duration
}

// Freed is what Free found and did.
type Freed struct {
	// Absent: the lease does not exist; nothing was written.
	Absent bool
	// Record is the lease as found; State its state then. StateReleased: nothing was written.
	Record Record
	State  State
}

// Free releases, on behalf of its holder, a lease an operator names (`sf2loki lease release`):
// an expired holder's at once, a live holder's only when o names that holder or o.Force is set.
// A refusal wraps ErrBusy and says what to do; nothing was written then.
func Free(ctx context.Context, l Lease, o FreeOptions) (Freed, error) {
	rec, err := l.Inspect(ctx)
	if errors.Is(err, ErrAbsent) {
		return Freed{Absent: true}, nil
	}
	if err != nil {
		return Freed{}, err
	}
	f := Freed{Record: rec, State: rec.State(o.Now, o.Skew)}
	switch {
	case f.State == StateReleased:
		return f, nil
	case o.Holder != "" && o.Holder != rec.Holder:
		return f, refused(nil, "%s is held by %s, not %s", rec.Ref, rec.Holder, o.Holder)
	case f.State == StateHeld && o.Holder == "" && !o.Force:
		return f, refused(nil, "%s: %s\n  name the holder with --holder to release it, or use --force", rec.Ref, rec.Describe(o.Now, o.Skew))
	}
	if err := l.ReleaseFor(ctx, rec); err != nil {
		if errors.Is(err, ErrLost) {
			return f, refused(err, "%s changed hands meanwhile (%v)", rec.Ref, err)
		}
		return f, err
	}
	return f, nil
}

// refusal is Free's refusal: ErrBusy (and cause, when set), with a message for the operator.
type refusal struct {
	msg   string
	cause error
}

func refused(cause error, format string, args ...any) error {
	return &refusal{msg: "refused: " + fmt.Sprintf(format, args...) + "; nothing was changed", cause: cause}
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() []error {
	if r.cause == nil {
		return []error{ErrBusy}
	}
	return []error{ErrBusy, r.cause}
}
