package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// maintenance is one operator write to the checkpoint document (state set, delete, import,
// fence raise-floor), made through lease.Maintain as a maintenance holder.
type maintenance struct {
	cfg   *config.Config
	st    *store.Store
	log   *slog.Logger
	out   io.Writer // notices for the operator (stderr)
	wait  time.Duration
	force bool
	// floor, when set, makes the new epoch at least floor (fence raise-floor).
	floor uint64
}

// maintenanceHost is the holder prefix of operator writes: "sf2loki-maintenance@<host>".
func maintenanceHost() string { return "sf2loki-maintenance@" + lease.DefaultHost() }

// maintenanceLease builds the configured lease with the maintenance holder identity.
func maintenanceLease(cfg *config.Config, st *store.Store, log *slog.Logger) (lease.Lease, error) {
	c := *cfg
	c.Lease.Identity = maintenanceHost()
	return buildLease(&c, st, lease.NewInvocation(), log)
}

// errRefused marks an operation refused before anything was written (a live holder, a
// precondition of the operation itself): a usage error unless it says otherwise (busy).
var errRefused error = refusedError{}

type refusedError struct{}

func (refusedError) Error() string        { return "refused" }
func (refusedError) Is(target error) bool { return target == job.ErrConfig }

// run performs the operation and returns the epoch it wrote under.
func (m *maintenance) run(ctx context.Context, apply lease.Edit) (uint64, error) {
	l, err := maintenanceLease(m.cfg, m.st, m.log)
	if err != nil {
		return 0, err
	}
	res, err := lease.Maintain(ctx, l, m.st, lease.MaintainOptions{
		SessionOptions: lease.SessionOptions{Wait: m.wait, MinEpoch: m.floor, Logger: m.log},
		Force:          m.force,
	}, apply)
	if rec := res.TookOver; rec != nil {
		if rec.State(time.Now(), m.cfg.Lease.MaxClockSkew.D()) == lease.StateHeld {
			fmt.Fprintf(m.out, "sf2loki: --force: took the lease over from %s (epoch %d, renewed %s ago); that run is fenced at its next commit and cannot revert this change\n",
				rec.Holder, rec.Epoch, time.Since(rec.RenewedAt).Round(time.Second))
		} else {
			fmt.Fprintf(m.out, "sf2loki: --force: released the expired lease of %s (epoch %d)\n", rec.Holder, rec.Epoch)
		}
	}
	if errors.Is(err, lease.ErrBusy) {
		return 0, m.busy(ctx, l, err)
	}
	return res.Epoch, err
}

// busy explains a refusal: who holds the lease and until when. Nothing was written.
func (m *maintenance) busy(ctx context.Context, l lease.Lease, err error) error {
	msg := fmt.Sprintf("refused: a run holds the lease and did not release it within --wait %s; nothing was changed", m.wait)
	detail := err.Error()
	if rec, ierr := l.Inspect(ctx); ierr == nil {
		detail = rec.Describe(time.Now(), m.cfg.Lease.MaxClockSkew.D())
	}
	msg += "\n  " + detail
	msg += "\n  wait longer (--wait), or take the lease over with --force (the running job is then fenced at its next commit)"
	return &ExitError{Code: outcomeExit(job.OutcomeBusy, true), Err: &refusal{msg: msg, errs: []error{errRefused, err}}}
}

// refusal is an error whose message is written for the operator, wrapping the sentinels.
type refusal struct {
	msg  string
	errs []error
}

func (r *refusal) Error() string   { return r.msg }
func (r *refusal) Unwrap() []error { return r.errs }

// storeExit maps a failure of the store or the lease onto the exit-code table, through the
// outcome it stands for (job.OutcomeOf; strict codes: an operator command reports busy and
// fenced).
func storeExit(err error) error {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: outcomeExit(job.OutcomeOf(err, false), true), Err: err}
}
