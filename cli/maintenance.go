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

// run performs the operation and returns the epoch it wrote under.
func (m *maintenance) run(ctx context.Context, apply lease.Edit) (uint64, error) {
	l, err := maintenanceLease(m.cfg, m.st, m.log)
	if err != nil {
		return 0, err
	}
	res, err := lease.Maintain(ctx, l, m.st, lease.MaintainOptions{
		SessionOptions: lease.SessionOptions{Wait: m.wait, MinEpoch: m.floor, Logger: m.log},
		Force:          m.force, Skew: m.cfg.Lease.MaxClockSkew.D(),
	}, apply)
	if rec := res.TookOver; rec != nil {
		if rec.State(time.Now(), m.cfg.Lease.MaxClockSkew.D()) == lease.StateHeld {
			fmt.Fprintf(m.out, "sf2loki: --force: took the lease over from %s (epoch %d, renewed %s ago); that run is fenced at its next commit and cannot revert this change\n",
				rec.Holder, rec.Epoch, time.Since(rec.RenewedAt).Round(time.Second))
		} else {
			fmt.Fprintf(m.out, "sf2loki: --force: released the expired lease of %s (epoch %d)\n", rec.Holder, rec.Epoch)
		}
	}
	return res.Epoch, err
}

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
