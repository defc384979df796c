package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/doctor"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// maintenance is one operator write to the checkpoint document (state set, delete, import,
// fence raise-floor) made through the same protocol as a run: acquire the lease as a
// maintenance holder (waiting up to wait for a running job to finish), claim the document with
// a new epoch (so a job that is still running is fenced at its next commit instead of
// reverting the repair), apply one commit, release.
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

// edit is what a maintenance operation commits, decided from the claimed document (nil
// document: absent). A nil change with a nil error commits nothing (the claim alone is the
// operation).
type edit func(doc *store.Document) (*store.Change, error)

// errRefused marks an operation refused before anything was written (a live holder, a
// precondition of the operation itself).
var errRefused = errors.New("refused")

// run performs the operation and returns the epoch it wrote under.
func (m *maintenance) run(ctx context.Context, apply edit) (uint64, error) {
	inv := lease.NewInvocation()
	cfg := *m.cfg
	cfg.Lease.Identity = maintenanceHost()
	l, err := buildLease(ctx, &cfg, m.st, inv, m.log)
	if err != nil {
		return 0, err
	}
	if m.force {
		if err := m.takeOver(ctx, &cfg, l, inv); err != nil {
			return 0, err
		}
	}
	snap, err := m.st.Read(ctx)
	if err != nil {
		return 0, err
	}
	floor := snap.Floor()
	if m.floor > 0 {
		floor = max(floor, m.floor-1)
	}
	g, err := l.Acquire(ctx, floor, m.wait)
	if errors.Is(err, lease.ErrBusy) {
		return 0, m.busy(ctx, l, err)
	}
	if err != nil {
		return 0, err
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := l.Release(rctx, g); err != nil {
			m.log.Warn("releasing the lease after the maintenance write; it expires on its own", "err", err)
		}
	}
	w := g.Writer
	if w == nil {
		if w, err = m.st.Claim(ctx, g.ClaimRequest(), snap); err != nil {
			release()
			return 0, err
		}
	}
	ch, err := apply(w.Document())
	if err == nil && ch != nil {
		err = w.Commit(ctx, *ch)
	}
	release()
	if err != nil {
		return g.Epoch, err
	}
	return g.Epoch, nil
}

// busy explains a refusal: who holds the lease and until when. Nothing was written.
func (m *maintenance) busy(ctx context.Context, l lease.Lease, err error) error {
	msg := fmt.Sprintf("refused: a run holds the lease and did not release it within --wait %s; nothing was changed", m.wait)
	detail := err.Error()
	if rec, ierr := l.Inspect(ctx); ierr == nil {
		detail = doctor.DescribeRecord(rec, time.Now(), m.cfg.Lease.MaxClockSkew.D())
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

// takeOver frees a live lease for the operator (--force): the Kubernetes Lease is released on
// behalf of its holder; the store lease is claimed one epoch up and marked released. Either
// way the next acquire succeeds at once, and the claim that follows fences the job that held
// it.
func (m *maintenance) takeOver(ctx context.Context, cfg *config.Config, l lease.Lease, inv string) error {
	rec, err := l.Inspect(ctx)
	if errors.Is(err, lease.ErrAbsent) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Holder == "" || rec.Released {
		return nil
	}
	live := !lease.Expired(rec, time.Now(), m.cfg.Lease.MaxClockSkew.D())
	if err := releaseOnBehalf(ctx, cfg, m.st, l, rec, inv); err != nil {
		return fmt.Errorf("taking the lease over: %w", err)
	}
	if live {
		fmt.Fprintf(m.out, "sf2loki: --force: took the lease over from %s (epoch %d, renewed %s ago); that run is fenced at its next commit and cannot revert this change\n",
			rec.Holder, rec.Epoch, time.Since(rec.RenewedAt).Round(time.Second))
	} else {
		fmt.Fprintf(m.out, "sf2loki: --force: released the expired lease of %s (epoch %d)\n", rec.Holder, rec.Epoch)
	}
	return nil
}

// releaseOnBehalf gives up the lease held by rec's holder. A Kubernetes Lease is released with
// a compare on that holder, epoch and uid (the epoch stays). The store lease lives in the
// document's fence, which only a claim may rewrite: it is claimed at the next epoch, marked
// released, which also fences the holder.
func releaseOnBehalf(ctx context.Context, cfg *config.Config, st *store.Store, l lease.Lease, rec lease.Record, inv string) error {
	switch cfg.Lease.Type {
	case "kubernetes":
		return l.Release(ctx, lease.Grant{Holder: rec.Holder, Epoch: rec.Epoch, UID: rec.UID, Ref: rec.Ref, Invocation: inv})
	case "store":
		snap, err := st.Read(ctx)
		if err != nil {
			return err
		}
		if snap.Absent || snap.Doc.Fence == nil || snap.Doc.Fence.Holder != rec.Holder {
			return nil // changed meanwhile: the normal acquire decides
		}
		epoch, err := lease.NextEpoch(snap.Floor(), 0, ^uint64(0), "the document's fence")
		if err != nil {
			return err
		}
		now := time.Now()
		if testNow != nil {
			now = testNow()
		}
		_, err = st.Claim(ctx, store.ClaimRequest{
			Epoch: epoch, Invocation: inv, Holder: cfg.Lease.Identity + "/" + inv, Lease: leaseRef(cfg, l),
			Embedded: &store.LeaseState{RenewedAt: now, Duration: cfg.Lease.Duration.D(), Released: true},
		}, snap)
		return err
	}
	return fmt.Errorf("lease.type %q: cannot release on behalf of its holder", cfg.Lease.Type)
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
