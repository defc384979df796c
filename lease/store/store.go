// Package store is the store-embedded lease: the lease record lives in the fence of the
// checkpoint document itself (renewed_at, duration, released), so acquiring the lease and
// claiming the document are one conditional write, and a renewal is a commit without
// checkpoint changes.
//
// The grant carries the store.Writer made by that claim; renewals, the job's commits (through
// lease.Session) and the release all go through it. The Writer serializes them on one version
// chain, so the holder never conflicts with itself. It works on every store backend and is
// the default outside Kubernetes (systemd timers, ECS tasks, Cloud Run jobs, local use). Each
// renewal costs one document write.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	ckpt "github.com/sf2loki/sf2loki/store"
)

// Kind is the lease kind recorded in the fence.
const Kind = "store"

// Options configures the embedded lease. Zero values mean the defaults.
type Options struct {
	lease.Config
	// Name is recorded in the fence; a document fenced under another name is refused as a
	// configuration error (two deployments pointed at one document). Default "sf2loki".
	Name string
}

// Lease is a lease.Lease kept in the checkpoint document.
type Lease struct {
	st   *ckpt.Store
	c    lease.Config
	name string
}

var (
	_ lease.Lease            = (*Lease)(nil)
	_ lease.SnapshotAcquirer = (*Lease)(nil)
)

// New returns the embedded lease of the document in st.
func New(st *ckpt.Store, o Options) *Lease {
	if o.Name == "" {
		o.Name = "sf2loki"
	}
	return &Lease{st: st, c: o.WithDefaults(), name: o.Name}
}

// Ref is the lease reference recorded in the fence.
func (l *Lease) Ref() ckpt.LeaseRef { return ckpt.LeaseRef{Kind: Kind, Name: l.name} }

func observe(s ckpt.Snapshot) lease.Observed {
	if s.Absent || s.Doc.Fence == nil {
		return lease.Observed{Absent: true}
	}
	f := s.Doc.Fence
	return lease.Observed{Record: lease.Record{
		Holder: f.Holder, Epoch: f.Epoch, AcquiredAt: f.ClaimedAt, RenewedAt: f.RenewedAt,
		Duration: time.Duration(f.Duration), Released: f.Released, Ref: f.Lease, UID: f.LeaseUID,
		Version: string(s.Version),
	}}
}

// Acquire claims the document when its embedded lease is absent, released or expired by the
// takeover rule, with epoch max(fence, floor) + 1. Losing the race is ErrBusy.
func (l *Lease) Acquire(ctx context.Context, floor uint64, wait time.Duration) (lease.Grant, error) {
	snap, err := l.st.Read(ctx)
	if err != nil {
		return lease.Grant{}, err
	}
	return l.AcquireFrom(ctx, snap, floor, wait)
}

// AcquireFrom is Acquire starting from a snapshot the caller has just read (lease.Start), so
// an invocation reads the document once. Later polls while waiting read it again.
func (l *Lease) AcquireFrom(ctx context.Context, first ckpt.Snapshot, floor uint64, wait time.Duration) (lease.Grant, error) {
	snap, fresh := first, true
	_, err := lease.TakeoverRule(ctx, l.c, wait, func(ctx context.Context) (lease.Observed, error) {
		if !fresh {
			s, err := l.st.Read(ctx)
			if err != nil {
				return lease.Observed{}, err
			}
			snap = s
		}
		fresh = false
		// A document fenced by another lease is a configuration error whether or not that
		// lease is live: say so now rather than report busy until it expires.
		if err := l.foreign(snap); err != nil {
			return lease.Observed{}, err
		}
		return observe(snap), nil
	})
	if err != nil {
		return lease.Grant{}, err
	}
	epoch, err := lease.NextEpoch(snap.Floor(), floor, math.MaxUint64, "the document's fence")
	if err != nil {
		return lease.Grant{}, err
	}
	if floor > snap.Floor() {
		l.c.Logger.Info("epoch continues from the given floor", "floor", floor, "fence", snap.Floor(), "epoch", epoch)
	}
	sent := time.Now()
	stamp := l.c.Stamp()
	req := ckpt.ClaimRequest{
		Epoch: epoch, Invocation: l.c.Invocation, Holder: l.c.Holder(), Lease: l.Ref(),
		Embedded: &ckpt.LeaseState{RenewedAt: stamp.Wall, Duration: l.c.Duration},
		Admit: func(cur ckpt.Snapshot) error {
			if cur.Version == snap.Version {
				return nil
			}
			// The document changed since it was judged claimable (a renewal, a release, a
			// commit): judge the version we would overwrite again.
			if o := observe(cur); !o.Absent && !lease.Expired(o.Record, l.c.Now(), l.c.Skew) {
				return fmt.Errorf("%w: %s renewed the lease while we claimed it", lease.ErrBusy, o.Record.Holder)
			}
			return nil
		},
	}
	w, err := l.st.Claim(ctx, req, snap)
	if errors.Is(err, ckpt.ErrFenced) {
		return lease.Grant{}, fmt.Errorf("%w: another invocation claimed the document first: %w", lease.ErrBusy, err)
	}
	if err != nil {
		return lease.Grant{}, err
	}
	return lease.Grant{
		Epoch: epoch, Holder: l.c.Holder(), Invocation: l.c.Invocation, Ref: l.Ref(), Duration: l.c.Duration,
		ValidUntil: l.c.ValidUntil(sent), Token: string(w.Version()), Writer: w, Stamped: stamp,
	}, nil
}

// foreign returns a ForeignLeaseError when the document is fenced by a lease of another name.
func (l *Lease) foreign(s ckpt.Snapshot) error {
	if s.Absent || s.Doc.Fence == nil {
		return nil
	}
	if f := s.Doc.Fence.Lease; f.Name != "" && f != l.Ref() {
		return &ckpt.ForeignLeaseError{Object: l.st.Object(), Stored: f, Ours: l.Ref()}
	}
	return nil
}

// Renew writes a new renewed_at through the grant's Writer.
func (l *Lease) Renew(ctx context.Context, g lease.Grant) (lease.Grant, error) {
	sent := time.Now()
	stamp := l.c.Stamp()
	if err := l.write(ctx, g, stamp.Wall, false); err != nil {
		return l.c.MayHaveRenewed(g, sent, stamp), err
	}
	g.ValidUntil = l.c.RenewedUntil(g, sent, stamp)
	g.Token = string(g.Writer.Version())
	return g, nil
}

// Release marks the embedded lease released (keeping the epoch) through the grant's Writer.
func (l *Lease) Release(ctx context.Context, g lease.Grant) error {
	return l.write(ctx, g, l.c.Now(), true)
}

func (l *Lease) write(ctx context.Context, g lease.Grant, renewedAt time.Time, released bool) error {
	if g.Writer == nil {
		return errors.New("store lease: grant has no writer (not acquired by this lease)")
	}
	err := g.Writer.Commit(ctx, ckpt.Change{Lease: &ckpt.LeaseState{RenewedAt: renewedAt, Duration: l.c.Duration, Released: released}})
	if errors.Is(err, ckpt.ErrFenced) || errors.Is(err, ckpt.ErrIntegrity) {
		return fmt.Errorf("%w: %w", lease.ErrLost, err)
	}
	return err
}

// ReleaseFor releases the embedded lease on behalf of the holder rec names. The fence is the
// lease, and only a claim may rewrite it: the document is claimed one epoch up and marked
// released, which also fences the holder's next write. ErrLost when the holder changed
// meanwhile.
func (l *Lease) ReleaseFor(ctx context.Context, rec lease.Record) error {
	snap, err := l.st.Read(ctx)
	if err != nil {
		return err
	}
	if snap.Absent || snap.Doc.Fence == nil || snap.Doc.Fence.Holder != rec.Holder || snap.Doc.Fence.Epoch != rec.Epoch {
		return fmt.Errorf("%w: %s is no longer held by %s at epoch %d", lease.ErrLost, l.st.Object(), rec.Holder, rec.Epoch)
	}
	epoch, err := lease.NextEpoch(snap.Floor(), 0, math.MaxUint64, "the document's fence")
	if err != nil {
		return err
	}
	_, err = l.st.Claim(ctx, ckpt.ClaimRequest{
		Epoch: epoch, Invocation: l.c.Invocation, Holder: l.c.Holder(), Lease: l.Ref(),
		Embedded: &ckpt.LeaseState{RenewedAt: l.c.Now(), Duration: l.c.Duration, Released: true},
		Admit: func(cur ckpt.Snapshot) error {
			if cur.Absent {
				return fmt.Errorf("%w: %s was deleted while releasing its lease; there is nothing left to release", lease.ErrLost, l.st.Object())
			}
			if cur.Doc.Fence == nil || cur.Doc.Fence.Holder != rec.Holder || cur.Doc.Fence.Epoch != rec.Epoch {
				return fmt.Errorf("%w: %s changed hands while releasing it", lease.ErrLost, l.st.Object())
			}
			return nil
		},
	}, snap)
	if errors.Is(err, ckpt.ErrFenced) {
		return fmt.Errorf("%w: %w", lease.ErrLost, err)
	}
	return err
}

// Inspect reads the embedded lease.
func (l *Lease) Inspect(ctx context.Context) (lease.Record, error) {
	s, err := l.st.Read(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	o := observe(s)
	if o.Absent {
		return lease.Record{}, fmt.Errorf("%w: %s has no fence", lease.ErrAbsent, l.st.Object())
	}
	return o.Record, nil
}
