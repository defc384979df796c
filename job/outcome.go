package job

import (
	"errors"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

// ErrConfig marks an error that only a change of configuration or permissions can fix (the
// parts of an invocation could not be built from a valid-looking configuration). OutcomeOf
// classifies it as OutcomeConfig.
var ErrConfig = errors.New("configuration error")

// OutcomeOf is the one classification of errors into outcomes: every failure of the lease, the
// store, a source or the wiring that ends a run (or an operator command) becomes an outcome
// here and nowhere else; the CLI then maps outcomes to exit codes. shipped says whether the
// run had shipped anything: an error that would otherwise mean "unavailable" then means
// "partial".
func OutcomeOf(err error, shipped bool) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, lease.ErrBusy):
		return OutcomeBusy
	case errors.Is(err, store.ErrFenced):
		return OutcomeFenced
	case errors.Is(err, ErrConfig), errors.Is(err, store.ErrForeignLease), errors.Is(err, store.ErrPermission),
		errors.Is(err, store.ErrNoLocation):
		return OutcomeConfig
	case errors.Is(err, store.ErrCorrupt), errors.Is(err, store.ErrIntegrity), errors.Is(err, source.ErrNeedsHuman),
		errors.Is(err, store.ErrTooLarge): // only a person can shrink an oversize document
		return OutcomeIntegrity
	case errors.Is(err, lease.ErrLost) && !errors.Is(err, lease.ErrExpired) && !shipped:
		// Taken over or deleted before anything was shipped. (A lost lease whose validity
		// merely passed without a renewal means the lease API or store is unreachable.)
		return OutcomeFenced
	}
	if shipped {
		return OutcomePartial
	}
	return OutcomeUnavailable
}
