package lease

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/human"
	"github.com/sf2loki/sf2loki/store"
)

// Describe says in one sentence what the record means at now: who holds the lease and what
// the next run will do about it.
func (r Record) Describe(now time.Time, skew time.Duration) string {
	switch r.State(now, skew) {
	case StateReleased:
		by := ""
		if r.Holder != "" {
			by = " by " + r.Holder
		}
		return fmt.Sprintf("free (released%s), epoch %d, last renewed %s", by, r.Epoch, human.Ago(now, r.RenewedAt))
	case StateExpired:
		return fmt.Sprintf("held by %s, epoch %d, but not renewed for %s (duration %s): that run ended without releasing; the next run takes it over",
			r.Holder, r.Epoch, human.Round(now.Sub(r.RenewedAt)), r.Duration)
	}
	left := r.RenewedAt.Add(r.Duration).Sub(now)
	return fmt.Sprintf("held by %s, epoch %d, renewed %s, expires in %s unless renewed: a run is in progress",
		r.Holder, r.Epoch, human.Ago(now, r.RenewedAt), human.Round(max(left, 0)))
}

// View is what `sf2loki lease show` prints of a lease (its JSON form with --json).
type View struct {
	Lease       string    `json:"lease"`
	Absent      bool      `json:"absent,omitempty"`
	Holder      string    `json:"holder,omitempty"`
	State       string    `json:"state,omitempty"` // held, expired, released
	Epoch       uint64    `json:"epoch"`
	AcquiredAt  time.Time `json:"acquired_at,omitzero"`
	RenewedAt   time.Time `json:"renewed_at,omitzero"`
	RenewAgeSec float64   `json:"renew_age_s,omitempty"`
	Duration    string    `json:"duration,omitempty"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	UID         string    `json:"uid,omitempty"`
	Version     string    `json:"version,omitempty"`
	Summary     string    `json:"summary"`
	FenceEpoch  uint64    `json:"document_fence_epoch"`
}

// AbsentView is the view of a lease that does not exist yet.
func AbsentView(ref store.LeaseRef) View {
	return View{Lease: ref.String(), Absent: true, Summary: "does not exist (the first run creates it)"}
}

// View returns the record as shown at now.
func (r Record) View(now time.Time, skew time.Duration) View {
	state := r.State(now, skew)
	v := View{Lease: r.Ref.String(), Holder: r.Holder, State: string(state), Epoch: r.Epoch, AcquiredAt: r.AcquiredAt,
		RenewedAt: r.RenewedAt, UID: r.UID, Version: r.Version, Summary: r.Describe(now, skew)}
	if !r.RenewedAt.IsZero() {
		v.RenewAgeSec = now.Sub(r.RenewedAt).Round(time.Millisecond).Seconds()
		if r.Duration > 0 && state != StateReleased { // a free lease does not expire
			v.ExpiresAt = r.RenewedAt.Add(r.Duration)
		}
	}
	if r.Duration > 0 {
		v.Duration = r.Duration.String()
	}
	return v
}

// WriteText writes the view as text, ages relative to now.
func (v View) WriteText(w io.Writer, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "lease:       %s\n", v.Lease)
	fmt.Fprintf(&b, "state:       %s\n", v.Summary)
	if !v.Absent {
		fmt.Fprintf(&b, "holder:      %s\n", human.Dash(v.Holder))
		fmt.Fprintf(&b, "epoch:       %d (document fence %d)\n", v.Epoch, v.FenceEpoch)
		fmt.Fprintf(&b, "acquired:    %s\n", human.Ago(now, v.AcquiredAt))
		fmt.Fprintf(&b, "renewed:     %s\n", human.Ago(now, v.RenewedAt))
		if !v.ExpiresAt.IsZero() {
			fmt.Fprintf(&b, "expires:     %s (duration %s)\n", human.Ago(now, v.ExpiresAt), v.Duration)
		}
		if v.UID != "" {
			fmt.Fprintf(&b, "uid:         %s\n", v.UID)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
