package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/lease/leasetest"
	"github.com/sf2loki/sf2loki/store"
)

const l = 10 * time.Second

func cfg() lease.Config {
	return lease.Config{Duration: l, Skew: time.Second, Poll: time.Second, Host: "h", Invocation: "i", Logger: leasetest.Quiet}.WithDefaults()
}

// Every rule of the takeover rule (docs/fencing.md), on a fake record, under synctest's clock.
func TestTakeoverRule(t *testing.T) {
	errRead := fmt.Errorf("%w: api down", store.ErrUnavailable)
	for _, tc := range []struct {
		name     string
		rec      func(now time.Time, start time.Time) (lease.Observed, error)
		wait     time.Duration
		wantErr  error
		wantWait time.Duration // exact, on the bubble's clock
	}{
		{"absent", func(time.Time, time.Time) (lease.Observed, error) { return lease.Observed{Absent: true}, nil }, 0, nil, 0},
		{"released", func(now, _ time.Time) (lease.Observed, error) {
			return lease.Observed{Record: lease.Record{Holder: "x", Released: true, RenewedAt: now, Duration: l}}, nil
		}, 0, nil, 0},
		{"empty holder", func(now, _ time.Time) (lease.Observed, error) {
			return lease.Observed{Record: lease.Record{RenewedAt: now, Duration: l}}, nil
		}, 0, nil, 0},
		{"null fields from another tool", func(time.Time, time.Time) (lease.Observed, error) {
			return lease.Observed{Record: lease.Record{Holder: "x"}}, nil
		}, 0, nil, 0},
		{"expired past L+K by wall clock", func(now, _ time.Time) (lease.Observed, error) {
			return lease.Observed{Record: lease.Record{Holder: "x", RenewedAt: now.Add(-l - 2*time.Second), Duration: l, Version: "1"}}, nil
		}, 0, nil, 0},
		{"past L within K is live", func(now, _ time.Time) (lease.Observed, error) {
			return lease.Observed{Record: lease.Record{Holder: "x", RenewedAt: now.Add(-l - time.Second/2), Duration: l, Version: "1"}}, nil
		}, 0, lease.ErrBusy, 0},
		{"holder clock far ahead: unchanged for L on ours", func(now, _ time.Time) (lease.Observed, error) {
			return lease.Observed{Record: lease.Record{Holder: "x", RenewedAt: now.Add(time.Hour), Duration: l, Version: "1"}}, nil
		}, 3 * l, nil, l},
		{"renewing holder: busy after wait", func(now, start time.Time) (lease.Observed, error) {
			v := fmt.Sprint(int(now.Sub(start) / (l / 2))) // a new version every L/2
			return lease.Observed{Record: lease.Record{Holder: "x", RenewedAt: now, Duration: l, Version: v}}, nil
		}, 3 * l, lease.ErrBusy, 3 * l},
		{"read error is not absent", func(time.Time, time.Time) (lease.Observed, error) { return lease.Observed{}, errRead }, l, store.ErrUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				_, err := lease.TakeoverRule(context.Background(), cfg(), tc.wait, func(context.Context) (lease.Observed, error) {
					return tc.rec(time.Now(), start)
				})
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Fatalf("got %v, want %v", err, tc.wantErr)
				}
				if waited := time.Since(start); waited != tc.wantWait {
					t.Fatalf("decided after %v, want %v", waited, tc.wantWait)
				}
			})
		})
	}
}

// fakeLease renews successfully until told otherwise.
type fakeLease struct {
	mu      sync.Mutex
	fail    error // returned by Renew when set
	hang    bool  // Renew blocks until its context ends
	renewed int
	c       lease.Config
}

func (f *fakeLease) set(err error, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.hang = err, hang
}

func (f *fakeLease) Acquire(context.Context, uint64, time.Duration) (lease.Grant, error) {
	return lease.Grant{Epoch: 1, Duration: f.c.Duration, ValidUntil: f.c.ValidUntil(time.Now())}, nil
}

func (f *fakeLease) Renew(ctx context.Context, g lease.Grant) (lease.Grant, error) {
	sent := time.Now()
	f.mu.Lock()
	fail, hang := f.fail, f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return g, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
	if fail != nil {
		return g, fail
	}
	f.mu.Lock()
	f.renewed++
	f.mu.Unlock()
	g.ValidUntil = f.c.ValidUntil(sent)
	return g, nil
}

func (f *fakeLease) Release(context.Context, lease.Grant) error { return nil }

func (f *fakeLease) Inspect(context.Context) (lease.Record, error)  { return lease.Record{}, nil }
func (f *fakeLease) ReleaseFor(context.Context, lease.Record) error { return nil }
func (f *fakeLease) Ref() store.LeaseRef                            { return store.LeaseRef{Kind: "Fake", Name: "fake"} }

// The renewer cancels the context within one renew interval of losing the lease, and never
// before the grant's validity passes when the API is merely unreachable.
func TestRenewerCancelsWithinOneInterval(t *testing.T) {
	const every = time.Second
	unreachable := fmt.Errorf("%w: connection refused", store.ErrUnavailable)
	for _, tc := range []struct {
		name string
		fail error
		hang bool
		// earliest and latest cancel times after the failure starts (at 5.5s, last success 5s)
		earliest, latest time.Duration
	}{
		{"taken by another holder", fmt.Errorf("%w: holder is b", lease.ErrLost), false, 0, every},
		{"api unreachable", unreachable, false, 5*time.Second + l - time.Second - 5500*time.Millisecond, 5*time.Second + l - time.Second - 5500*time.Millisecond + every},
		{"api hangs", nil, true, 5*time.Second + l - time.Second - 5500*time.Millisecond, 5*time.Second + l - time.Second - 5500*time.Millisecond + every},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeLease{c: cfg()}
				g, _ := f.Acquire(context.Background(), 0, 0)
				r := lease.NewRenewer(context.Background(), f, g, every, leasetest.Quiet)
				defer r.Stop()
				time.Sleep(5500 * time.Millisecond)
				failedAt := time.Now()
				f.set(tc.fail, tc.hang)
				<-r.Context().Done()
				after := time.Since(failedAt)
				if after < tc.earliest || after > tc.latest {
					t.Fatalf("canceled %v after the failure began, want within [%v, %v]", after, tc.earliest, tc.latest)
				}
				if !errors.Is(r.Lost(), lease.ErrLost) {
					t.Fatalf("Lost() = %v", r.Lost())
				}
			})
		})
	}
}

func TestRenewerStopIsNotLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLease{c: cfg()}
		g, _ := f.Acquire(context.Background(), 0, 0)
		r := lease.NewRenewer(context.Background(), f, g, time.Second, leasetest.Quiet)
		time.Sleep(time.Hour) // renewals keep it valid far beyond L
		f.mu.Lock()
		renewed := f.renewed
		f.mu.Unlock()
		if r.Context().Err() != nil || renewed < 3000 {
			t.Fatalf("context %v after %d renewals", r.Context().Err(), renewed)
		}
		r.Stop()
		if r.Lost() != nil || !errors.Is(context.Cause(r.Context()), lease.ErrReleased) {
			t.Fatalf("after Stop: lost %v cause %v", r.Lost(), context.Cause(r.Context()))
		}
	})
}

func TestNextEpoch(t *testing.T) {
	for _, tc := range []struct {
		counter, floor, limit, want uint64
		overflow                    bool
	}{
		{0, 0, 100, 1, false},
		{3, 0, 100, 4, false},
		{3, 41, 100, 42, false},
		{41, 3, 100, 42, false},
		{99, 0, 100, 100, false},
		{100, 0, 100, 0, true},
		{2147483647, 0, 2147483647, 0, true},
	} {
		got, err := lease.NextEpoch(tc.counter, tc.floor, tc.limit, "counter")
		if tc.overflow != errors.Is(err, store.ErrIntegrity) || got != tc.want {
			t.Errorf("NextEpoch(%d, %d, %d) = %d, %v; want %d overflow=%v", tc.counter, tc.floor, tc.limit, got, err, tc.want, tc.overflow)
		}
	}
}

func TestPairingWarning(t *testing.T) {
	if w := lease.PairingWarning("kubernetes", "file"); !strings.Contains(w, "flock") || !strings.Contains(w, "configmap") {
		t.Fatalf("kubernetes+file warning %q must mention flock and suggest configmap", w)
	}
	for _, p := range [][2]string{{"store", "file"}, {"kubernetes", "configmap"}, {"kubernetes", "s3"}, {"store", "gcs"}} {
		if w := lease.PairingWarning(p[0], p[1]); w != "" {
			t.Errorf("%v: unexpected warning %q", p, w)
		}
	}
}

func TestHolderIdentityDiffersPerInvocation(t *testing.T) {
	a := lease.Config{Host: "pod-1"}.WithDefaults()
	b := lease.Config{Host: "pod-1"}.WithDefaults()
	if a.Holder() == b.Holder() || !strings.HasPrefix(a.Holder(), "pod-1/") {
		t.Fatalf("holders %q and %q: a restarted container must not look like the same holder", a.Holder(), b.Holder())
	}
}

func TestRecordState(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const d, skew = 30 * time.Second, 5 * time.Second
	for _, tc := range []struct {
		name string
		rec  lease.Record
		want lease.State
	}{
		{"no holder", lease.Record{Epoch: 3, RenewedAt: now, Duration: d}, lease.StateReleased},
		{"released", lease.Record{Holder: "h/1", Released: true, RenewedAt: now, Duration: d}, lease.StateReleased},
		{"renewed just now", lease.Record{Holder: "h/1", RenewedAt: now, Duration: d}, lease.StateHeld},
		{"past L but within K", lease.Record{Holder: "h/1", RenewedAt: now.Add(-d - skew/2), Duration: d}, lease.StateHeld},
		{"past L+K", lease.Record{Holder: "h/1", RenewedAt: now.Add(-d - skew - time.Second), Duration: d}, lease.StateExpired},
		{"no renew time (third-party Lease)", lease.Record{Holder: "h/1", Duration: d}, lease.StateExpired},
	} {
		if got := tc.rec.State(now, skew); got != tc.want {
			t.Errorf("%s: State = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// unsureRenewal is a lease whose renewals fail without proving they did not land (a timeout
// after the write was sent), having written a renew time that others read as expired (the
// holder's clock stepped back): the grant it returns is valid no longer than that write's.
type unsureRenewal struct{ fakeLease }

func (u *unsureRenewal) Renew(ctx context.Context, g lease.Grant) (lease.Grant, error) {
	g.ValidUntil = time.Now().Add(-time.Second)
	return g, fmt.Errorf("%w: renewing: %w (the write may have landed)", store.ErrUnavailable, context.DeadlineExceeded)
}

// TestRenewerHeedsARenewalThatMayHaveLanded: a renewal that failed may still have written its
// renew time, which is what the other hosts read; when that write's validity is shorter than
// the grant's (the holder's clock stepped back), the renewer stops the run by it, not by the
// grant's own, longer validity.
func TestRenewerHeedsARenewalThatMayHaveLanded(t *testing.T) {
	f := &unsureRenewal{fakeLease{c: leasetest.Cfg("a", time.Hour, 0)}}
	g, _ := f.Acquire(context.Background(), 0, 0)
	r := lease.NewRenewer(context.Background(), f, g, 10*time.Millisecond, leasetest.Quiet)
	defer r.Stop()
	select {
	case <-r.Context().Done():
	case <-time.After(20 * time.Second): // a failure bound, not a timing assertion
		t.Fatalf("the renewer kept a grant valid for %v although a renewal that may have landed ended it",
			time.Until(r.Grant().ValidUntil).Round(time.Second))
	}
	if err := r.Lost(); !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("loss cause %v, want ErrExpired", err)
	}
}
