// Package lease hands out epochs: before an invocation ships anything it acquires a lease,
// and the epoch of that grant is what the checkpoint store fences on (package store).
//
// The lease only bounds contention and duplicate pushes; safety comes from the store. Epochs
// never go backwards: Acquire computes max(lease counter, floor) + 1, where the floor is the
// fence epoch read from the checkpoint document, and writes it back to the lease, so even a
// deleted and recreated lease continues above every epoch the document has seen.
//
// Backends: lease/kubernetes (a coordination.k8s.io/v1 Lease, epoch in leaseTransitions) and
// lease/store (the lease kept inside the checkpoint document's fence, so acquiring and claiming
// are one write). Jobs use neither directly: Start acquires, claims and starts the renewer, and
// the returned Session is the one API the job commits through, identical for both backends.
package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/store"
)

// Sentinel errors. Lease backends also return store.ErrUnavailable (API unreachable),
// store.ErrPermission (RBAC forbidden) and store.ErrIntegrity (epoch overflow), so a job maps
// one set of sentinels to outcomes.
var (
	// ErrBusy means a live holder has the lease (or won the race for it); nothing was written.
	ErrBusy = errors.New("lease is held by another holder")
	// ErrLost means the grant is no longer ours: another holder took it, it was deleted, or its
	// validity passed without a successful renewal.
	ErrLost = errors.New("lease lost")
	// ErrExpired is wrapped (with ErrLost) when the grant's validity passed without a successful
	// renewal: the lease may still be ours, or someone may have taken it; nobody can tell.
	// Without it, ErrLost means definitely superseded (taken over or deleted).
	ErrExpired = errors.New("lease validity passed without a renewal")
	// ErrAbsent is returned by Inspect when the lease does not exist.
	ErrAbsent = errors.New("lease does not exist")
	// ErrReleased is returned by Session.Commit after Session.Release.
	ErrReleased = errors.New("session already released")
)

// Record is the lease state every backend maps onto its storage (the Lease spec, or the fence
// of the checkpoint document).
type Record struct {
	Holder     string // empty when released or never held
	Epoch      uint64
	AcquiredAt time.Time
	RenewedAt  time.Time
	Duration   time.Duration
	Released   bool
	Ref        store.LeaseRef
	UID        string
	Version    string // backend version token (resourceVersion, document version)
}

// State is what a lease record says about its holder at a given time.
type State string

// States of a lease record.
const (
	// StateReleased: no holder, or released by it; free now.
	StateReleased State = "released"
	// StateExpired: a holder that was not renewed within its duration and the allowed skew (its
	// run ended without releasing); the next acquirer takes it over at once.
	StateExpired State = "expired"
	// StateHeld: a live holder; acquirers are busy (or wait).
	StateHeld State = "held"
)

// State classifies the record at wall time now, allowing skew between the holder's clock and
// ours (rules 1 and 2 of the takeover rule, see Expired).
func (r Record) State(now time.Time, skew time.Duration) State {
	switch {
	case r.Holder == "" || r.Released:
		return StateReleased
	case Expired(r, now, skew):
		return StateExpired
	}
	return StateHeld
}

// Grant is a successful acquisition.
type Grant struct {
	Epoch      uint64
	Holder     string // "<pod-or-host>/<invocation id>"
	Invocation string
	Ref        store.LeaseRef
	UID        string // Kubernetes Lease uid (empty for lease/store)
	Duration   time.Duration
	// ValidUntil is on the monotonic clock: the send time of the last successful write plus
	// the duration minus the allowed skew. Compare with time.Now(), never with wall times.
	ValidUntil time.Time
	// Token is the backend's version of the lease record after the last write.
	Token string
	// Stamped is the renew time the acquisition wrote, with its monotonic reading: renewals
	// compare their own stamps with it to see whether our wall clock stepped back since
	// (Config.RenewedUntil).
	Stamped Stamp
	// Writer is set by leases whose acquisition already claimed the checkpoint document
	// (lease/store); it owns the document's version chain. Nil for other leases.
	Writer *store.Writer
}

// Valid reports whether the grant's validity has not passed.
func (g Grant) Valid() bool { return time.Now().Before(g.ValidUntil) }

// ClaimRequest is the store claim that records this grant in the document's fence.
func (g Grant) ClaimRequest() store.ClaimRequest {
	return store.ClaimRequest{Epoch: g.Epoch, Invocation: g.Invocation, Holder: g.Holder, Lease: g.Ref, LeaseUID: g.UID}
}

// Lease is one lease backend.
type Lease interface {
	// Acquire takes the lease with epoch max(lease counter, floor) + 1, waiting up to wait
	// for a live holder per the takeover rule (TakeoverRule). A live holder after wait, or a
	// lost race, is ErrBusy.
	Acquire(ctx context.Context, floor uint64, wait time.Duration) (Grant, error)
	// Renew extends g without changing its epoch. ErrLost when the lease is no longer ours;
	// any other error leaves the outcome unknown (retry until g.ValidUntil), and the grant it
	// returns is then valid no longer than the write would make it had it landed
	// (Config.MayHaveRenewed).
	Renew(ctx context.Context, g Grant) (Grant, error)
	// Release gives the lease up if we still hold it, keeping the epoch. ErrLost when it is
	// no longer ours (nothing written).
	Release(ctx context.Context, g Grant) error
	// Inspect reads the lease without changing it (doctor, `sf2loki lease show`).
	Inspect(ctx context.Context) (Record, error)
	// ReleaseFor gives up, on behalf of its holder, the lease that rec (as read by Inspect)
	// describes — only if the same holder still holds it at the same epoch; ErrLost when it
	// changed hands meanwhile. The epoch never goes backwards; the holder loses the lease at
	// its next renewal (for lease/store, the release is a claim one epoch up, which also
	// fences the holder). Operators use it (`sf2loki lease release`, `--force`).
	ReleaseFor(ctx context.Context, rec Record) error
	// Ref is the lease reference the claims record in the checkpoint document's fence.
	Ref() store.LeaseRef
}

// Config holds what every lease backend needs. Zero values mean the defaults.
type Config struct {
	// Duration is the lease duration L. Default 30s.
	Duration time.Duration
	// Skew is the clock skew K allowed between hosts: a record is expired by wall clock only
	// once renewed_at + L + K has passed, and a grant is valid until send time + L - K.
	// Default min(5s, Duration/6); a negative value means none.
	Skew time.Duration
	// Poll is how often Acquire re-reads a live lease while waiting. Default L/10, at most 1s.
	Poll time.Duration
	// Host is the pod or host part of the holder identity. Default DefaultHost().
	Host string
	// Invocation is this run's id, shared with the store's writer stamps. Default a random id.
	Invocation string
	// Now is the wall clock (timestamps, expiry by wall clock). Default time.Now. Validity and
	// waiting use the monotonic clock.
	Now func() time.Time
	// Logger receives lease events. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
	}
	if c.Skew < 0 {
		c.Skew = 0
	} else if c.Skew == 0 {
		c.Skew = min(5*time.Second, c.Duration/6)
	}
	if c.Poll <= 0 {
		c.Poll = min(c.Duration/10, time.Second)
	}
	if c.Host == "" {
		c.Host = DefaultHost()
	}
	if c.Invocation == "" {
		c.Invocation = NewInvocation()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Holder is the identity written to the lease: "<pod-or-host>/<invocation id>". The
// invocation part differs on every run, so a container restarted in the same pod never
// mistakes the previous run's lease for its own.
func (c Config) Holder() string { return c.Host + "/" + c.Invocation }

// ValidUntil is the validity of a write sent at sent (monotonic).
func (c Config) ValidUntil(sent time.Time) time.Time { return sent.Add(c.Duration - c.Skew) }

// Stamp is a renew time written to the lease record: our wall clock (Wall, without a monotonic
// reading, as other hosts will read it) and the monotonic reading taken with it (Mono).
type Stamp struct {
	Wall time.Time
	Mono time.Time
}

// Stamp reads the wall clock for a renew time.
func (c Config) Stamp() Stamp {
	mono := time.Now()
	return Stamp{Wall: c.Now().Round(0), Mono: mono}
}

// SteppedBack is how far the wall clock stepped back between first and s: the monotonic time
// elapsed minus the wall time elapsed, or 0 (a forward step, or no first stamp).
func (s Stamp) SteppedBack(first Stamp) time.Duration {
	if first.Mono.IsZero() || s.Mono.IsZero() {
		return 0
	}
	return max(0, s.Mono.Sub(first.Mono)-s.Wall.Sub(first.Wall))
}

// RenewedUntil is the validity of g's renewal sent at sent that wrote the renew time s. Other
// hosts expire the lease by their wall clocks against s.Wall; if our wall clock stepped back by
// D since the acquisition, s.Wall reads D older to them than the time it was written, so the
// validity is D shorter (and over at once when D reaches the lease duration less the skew): the
// holder stops before anyone may take the lease over, instead of both believing they hold it.
func (c Config) RenewedUntil(g Grant, sent time.Time, s Stamp) time.Time {
	back := s.SteppedBack(g.Stamped)
	if back > c.Skew {
		c.Logger.Warn("the wall clock stepped back since the lease was acquired: the renew times written now look that much older "+
			"to other hosts, so the lease is valid that much less long (a run ends early when the step reaches lease.duration); "+
			"keep the host's clock synchronized so that it slews rather than steps",
			"epoch", g.Epoch, "stepped_back", back.Round(time.Millisecond), "lease_duration", c.Duration, "max_clock_skew", c.Skew)
	}
	return c.ValidUntil(sent).Add(-back)
}

// MayHaveRenewed is g after its renewal sent at sent, writing the renew time s, failed without
// proving it did not land: the others may read s, so g is valid no longer than that renewal
// would make it (shorter only when the wall clock stepped back).
func (c Config) MayHaveRenewed(g Grant, sent time.Time, s Stamp) Grant {
	if v := c.RenewedUntil(g, sent, s); v.Before(g.ValidUntil) {
		g.ValidUntil = v
	}
	return g
}

// DefaultHost returns $POD_NAME, else $HOSTNAME, else the kernel hostname.
func DefaultHost() string {
	for _, env := range []string{"POD_NAME", "HOSTNAME"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown-host"
}

// NewInvocation returns a fresh random invocation id.
func NewInvocation() string { return strings.ToLower(rand.Text()[:16]) }

// PairingWarning returns the startup warning for a lease type paired with a store type, or
// "" when the pairing is fine. The CLI logs it at WARN and doctor reports it.
func PairingWarning(leaseType, storeType string) string {
	if leaseType == "kubernetes" && storeType == "file" {
		return "lease.type kubernetes with state.store file: fencing between hosts relies on the " +
			"shared filesystem honoring flock (NFS and similar filesystems vary); prefer state.store " +
			"configmap, s3 or gcs when more than one host can run sf2loki"
	}
	return ""
}

// errOverflow reports an epoch that does not fit the backend's counter.
func errOverflow(what string, epoch uint64) error {
	return fmt.Errorf("%w: epoch %d does not fit %s; refusing to wrap around", store.ErrIntegrity, epoch, what)
}

// NextEpoch returns max(counter, floor) + 1, or an integrity error if it would exceed limit.
func NextEpoch(counter, floor, limit uint64, what string) (uint64, error) {
	e := max(counter, floor)
	if e >= limit {
		return 0, errOverflow(what, e+1)
	}
	return e + 1, nil
}
