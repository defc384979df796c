// Package leasetest is the behavioral suite every lease backend passes (lease/kubernetes on a
// real kube-apiserver, lease/store on each store backend): epochs, renewals, release, the
// takeover rule, races, and the pinned regression of a paused holder fenced at commit.
package leasetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// Env is one lease and checkpoint document shared by the "processes" of a test.
type Env struct {
	// Store is the checkpoint store all processes use.
	Store *store.Store
	// New returns one process's handle on the lease, configured with c (Duration, Skew, Now
	// and Invocation are set by the suite).
	New func(c lease.Config) lease.Lease
	// Bytes returns the stored document bytes (nil when absent).
	Bytes func() []byte
}

// Factory returns a fresh Env (a new lease and an empty document).
type Factory func(t *testing.T) Env

// Quiet is a logger that discards.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Cfg returns a lease config for invocation inv with duration d and a wall clock offset from
// real time by offset.
func Cfg(inv string, d, offset time.Duration) lease.Config {
	return lease.Config{
		Duration: d, Skew: d / 10, Poll: d / 10, Host: "host", Invocation: inv, Logger: Quiet,
		Now: func() time.Time { return time.Now().Add(offset) },
	}
}

// steppedCfg is Cfg with a wall clock the test steps: offset is read at every call, so the
// holder's clock can jump while it holds the lease.
func steppedCfg(inv string, d time.Duration, offset *atomic.Int64) lease.Config {
	c := Cfg(inv, d, 0)
	c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	return c
}

// long is a lease duration no test outlives.
const long = 30 * time.Second

// Run runs the suite: every case on a fresh Env.
func Run(t *testing.T, newEnv Factory) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newEnv) })
	}
}

// cases are the suite's behaviours, each with its own Env.
var cases = []struct {
	name string
	run  func(t *testing.T, newEnv Factory)
}{
	{"CreateYieldsEpochOne", testCreateYieldsEpochOne},
	{"FloorWins", testFloorWins},
	{"RenewalsKeepEpoch", testRenewalsKeepEpoch},
	{"LiveHolderIsBusy", testLiveHolderIsBusy},
	{"ReleasedIsTakenAtOnce", testReleasedIsTakenAtOnce},
	{"ExpiredByWallClockTakenAtOnce", testExpiredByWallClockTakenAtOnce},
	{"WithinSkewIsBusy", testWithinSkewIsBusy},
	{"StoppedHolderTakenAfterDurationOnOurClock", testStoppedHolderTakenAfterDurationOnOurClock},
	{"RenewingHolderIsNeverTakenOver", testRenewingHolderIsNeverTakenOver},
	{"RaceForAbsentLeaseHasOneWinner", testRaceForAbsentLeaseHasOneWinner},   // scenarios 1 and 2
	{"RaceForExpiredLeaseHasOneWinner", testRaceForExpiredLeaseHasOneWinner}, // scenario 3
	{"PausedHolderIsFencedAtCommit", testPausedHolderIsFencedAtCommit},
	{"CommitAfterExpiryWithoutTakeover", testCommitAfterExpiryWithoutTakeover},
	{"RenewerCancelsWhenTakenOver", testRenewerCancelsWhenTakenOver},
	{"KilledHolderAheadIsTakenOverWithoutWaitConfigured", testKilledHolderAheadIsTakenOver},
	{"RenewingHolderAheadIsNeverTakenOver", testRenewingHolderAheadIsNeverTakenOver},
	{"HolderClockSteppedBackStopsBeforeATakeover", testHolderClockSteppedBackStopsBeforeATakeover},
	{"ReleaseForFreesALiveHolder", testReleaseForFreesALiveHolder},
	{"ReleaseForRefusesAChangedHolder", testReleaseForRefusesAChangedHolder},
}

func acquire(t *testing.T, l lease.Lease, floor uint64, wait time.Duration) lease.Grant {
	t.Helper()
	g, err := l.Acquire(context.Background(), floor, wait)
	if err != nil {
		t.Fatalf("Acquire(floor %d): %v", floor, err)
	}
	return g
}

func inspect(t *testing.T, l lease.Lease) lease.Record {
	t.Helper()
	r, err := l.Inspect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// race has four processes acquire at once and checks there is exactly one winner.
func race(t *testing.T, env Env, wantEpoch uint64) {
	ctx := context.Background()
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		grants []lease.Grant
		busy   int
	)
	for i := range 4 {
		l := env.New(Cfg("c"+string(rune('0'+i)), long, time.Hour))
		wg.Go(func() {
			g, err := l.Acquire(ctx, 0, 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				grants = append(grants, g)
			case errors.Is(err, lease.ErrBusy):
				busy++
			default:
				t.Errorf("racer: %v", err)
			}
		})
	}
	wg.Wait()
	if len(grants) != 1 || busy != 3 || grants[0].Epoch != wantEpoch {
		t.Fatalf("%d grants %+v and %d busy; want exactly one grant with epoch %d", len(grants), grants, busy, wantEpoch)
	}
	if r := inspect(t, env.New(Cfg("x", long, 0))); r.Holder != grants[0].Holder || r.Epoch != wantEpoch {
		t.Fatalf("record %+v after the race, want the winner %s", r, grants[0].Holder)
	}
}

func testCreateYieldsEpochOne(t *testing.T, newEnv Factory) {
	env := newEnv(t)
	l := env.New(Cfg("a", long, 0))
	g := acquire(t, l, 0, 0)
	if g.Epoch != 1 || g.Holder != "host/a" || !g.Valid() {
		t.Fatalf("grant %+v, want epoch 1 held by host/a and valid", g)
	}
	if r := inspect(t, l); r.Epoch != 1 || r.Holder != "host/a" || r.Released {
		t.Fatalf("record %+v", r)
	}
}

func testFloorWins(t *testing.T, newEnv Factory) {
	env := newEnv(t)
	l := env.New(Cfg("a", long, 0))
	if g := acquire(t, l, 7, 0); g.Epoch != 8 {
		t.Fatalf("epoch %d with floor 7, want 8", g.Epoch)
	}
	if r := inspect(t, l); r.Epoch != 8 {
		t.Fatalf("stored epoch %d, want 8", r.Epoch)
	}
}

func testRenewalsKeepEpoch(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	l := env.New(Cfg("a", long, 0))
	g := acquire(t, l, 0, 0)
	acquired := inspect(t, l).AcquiredAt
	for i := range 5 {
		var err error
		if g, err = l.Renew(ctx, g); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		if g.Epoch != 1 {
			t.Fatalf("renewal %d changed the epoch to %d", i, g.Epoch)
		}
	}
	if r := inspect(t, l); r.Epoch != 1 || !r.AcquiredAt.Equal(acquired) || r.Holder != "host/a" {
		t.Fatalf("after renewals: %+v (acquired at %v)", r, acquired)
	}
}

func testLiveHolderIsBusy(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	a := env.New(Cfg("a", long, 0))
	acquire(t, a, 0, 0)
	before := inspect(t, a)
	docBefore := env.Bytes()
	_, err := env.New(Cfg("b", long, 0)).Acquire(ctx, 0, 0)
	if !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("acquire of a live lease: got %v, want ErrBusy", err)
	}
	if after := inspect(t, a); after.Version != before.Version || !bytes.Equal(docBefore, env.Bytes()) {
		t.Fatal("a busy acquire wrote something")
	}
}

func testReleasedIsTakenAtOnce(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	a := env.New(Cfg("a", long, 0))
	g := acquire(t, a, 0, 0)
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if r := inspect(t, a); !r.Released || r.Epoch != 1 {
		t.Fatalf("released record %+v, want released keeping epoch 1", r)
	}
	// b's clock is 10 minutes behind (scenario 20): the released flag still lets it in at once.
	if g2 := acquire(t, env.New(Cfg("b", long, -10*time.Minute)), 0, 0); g2.Epoch != 2 {
		t.Fatalf("epoch %d after release, want 2", g2.Epoch)
	}
}

func testExpiredByWallClockTakenAtOnce(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	a := env.New(Cfg("a", long, 0))
	ga := acquire(t, a, 0, 0)
	// b's clock is ahead by more than L+K (scenario 19): it takes over at once.
	b := env.New(Cfg("b", long, long+long/10+time.Second))
	gb := acquire(t, b, 0, 0)
	if gb.Epoch != 2 {
		t.Fatalf("takeover epoch %d, want 2", gb.Epoch)
	}
	if _, err := a.Renew(ctx, ga); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renewal by the superseded holder: got %v, want ErrLost", err)
	}
	if err := a.Release(ctx, ga); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("release by the superseded holder: got %v, want ErrLost", err)
	}
	if r := inspect(t, b); r.Holder != "host/b" || r.Epoch != 2 || r.Released {
		t.Fatalf("after the old holder's release: %+v", r)
	}
}

func testWithinSkewIsBusy(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	acquire(t, env.New(Cfg("a", long, 0)), 0, 0)
	_, err := env.New(Cfg("b", long, long+long/20)).Acquire(ctx, 0, 0) // past L, within K
	if !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("got %v, want ErrBusy", err)
	}
}

func testStoppedHolderTakenAfterDurationOnOurClock(t *testing.T, newEnv Factory) {
	env := newEnv(t)
	const l = time.Second
	acquire(t, env.New(Cfg("a", l, 0)), 0, 0)
	// b's wall clock is an hour behind (scenario 20/21): the wall-clock rule never fires,
	// so b takes over only after seeing the record unchanged for L on its monotonic clock.
	b := env.New(Cfg("b", l, -time.Hour))
	start := time.Now()
	g := acquire(t, b, 0, 4*l)
	if g.Epoch != 2 {
		t.Fatalf("epoch %d, want 2", g.Epoch)
	}
	if waited := time.Since(start); waited < l {
		t.Fatalf("took over after %v, before the record was unchanged for L=%v", waited, l)
	}
}

func testRenewingHolderIsNeverTakenOver(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	const l = 2 * time.Second // several renewals per L even on a loaded machine
	a := env.New(Cfg("a", l, 0))
	g := acquire(t, a, 0, 0)
	r := lease.NewRenewer(ctx, a, g, l/8, Quiet)
	defer r.Stop()
	_, err := env.New(Cfg("b", l, -time.Hour)).Acquire(ctx, 0, 2*l)
	if !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("got %v, want ErrBusy", err)
	}
	if r.Lost() != nil {
		t.Fatalf("holder lost its lease: %v", r.Lost())
	}
}

func testRaceForAbsentLeaseHasOneWinner(t *testing.T, newEnv Factory) {
	race(t, newEnv(t), 1)
}

func testRaceForExpiredLeaseHasOneWinner(t *testing.T, newEnv Factory) {
	env := newEnv(t)
	acquire(t, env.New(Cfg("a", long, 0)), 0, 0)
	race(t, env, 2)
}

func testPausedHolderIsFencedAtCommit(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	// The pinned regression: A acquires and claims, is paused past the lease duration (its
	// own view still says "leader"), B takes over and commits, A resumes and commits.
	env := newEnv(t)
	a, err := lease.Start(ctx, env.New(Cfg("a", long, 0)), env.Store, lease.SessionOptions{RenewEvery: time.Hour, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": json.RawMessage("1"), "j": json.RawMessage("1")}}); err != nil {
		t.Fatal(err)
	}
	b, err := lease.Start(ctx, env.New(Cfg("b", long, long+long/10+time.Second)), env.Store, lease.SessionOptions{Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx) }()
	if b.Epoch() <= a.Epoch() || string(b.Checkpoints()["k"].Value) != "1" {
		t.Fatalf("B epoch %d (A %d), B sees k=%s", b.Epoch(), a.Epoch(), b.Checkpoints()["k"].Value)
	}
	if err := b.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": json.RawMessage("5")}}); err != nil {
		t.Fatal(err)
	}
	before := env.Bytes()
	err = a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": json.RawMessage("2"), "j": json.RawMessage("2")}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("A's commit after B's takeover: got %v, want ErrFenced", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("A's release: got %v, want ErrLost", err)
	}
	if !bytes.Equal(before, env.Bytes()) {
		t.Fatal("A's fenced commit or release changed the document")
	}
	if a.Context().Err() == nil {
		t.Fatal("A's session context is still live after being fenced")
	}
}

func testCommitAfterExpiryWithoutTakeover(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	// Scenario 14: A stops renewing past its validity; nobody takes over; its commit still
	// succeeds (the store decides, and nobody claimed since).
	env := newEnv(t)
	const l = time.Second
	a, err := lease.Start(ctx, env.New(Cfg("a", l, 0)), env.Store, lease.SessionOptions{RenewEvery: time.Hour, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the grant's validity never passed")
	}
	if !errors.Is(a.Lost(), lease.ErrLost) {
		t.Fatalf("cause %v", a.Lost())
	}
	if err := a.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": json.RawMessage("1")}}); err != nil {
		t.Fatalf("commit after expiry with no takeover: %v", err)
	}
}

func testRenewerCancelsWhenTakenOver(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	const l = 2 * time.Second
	a, err := lease.Start(ctx, env.New(Cfg("a", l, 0)), env.Store, lease.SessionOptions{RenewEvery: l / 10, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := lease.Start(ctx, env.New(Cfg("b", l, time.Hour)), env.Store, lease.SessionOptions{Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx) }()
	select {
	case <-a.Context().Done():
	case <-time.After(20 * time.Second): // a failure bound, not a timing assertion
		t.Fatal("the renewer never noticed the takeover")
	}
	if !errors.Is(a.Lost(), lease.ErrLost) || !errors.Is(context.Cause(a.Context()), lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(a.Context()))
	}
}

// An operator releases a live holder's lease on its behalf: the lease is free at once for
// the next acquirer (with a higher epoch), and the holder's next renewal finds it lost.
func testReleaseForFreesALiveHolder(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	a := env.New(Cfg("a", long, 0))
	g := acquire(t, a, 0, 0)
	op := env.New(Cfg("op", long, 0))
	rec := inspect(t, op)
	if err := op.ReleaseFor(ctx, rec); err != nil {
		t.Fatalf("ReleaseFor a live holder: %v", err)
	}
	if r := inspect(t, op); r.State(time.Now(), 0) != lease.StateReleased || r.Epoch < g.Epoch {
		t.Fatalf("after ReleaseFor: %+v (state %s), want released at epoch >= %d", r, r.State(time.Now(), 0), g.Epoch)
	}
	if _, err := a.Renew(ctx, g); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("the released holder's renewal: got %v, want ErrLost", err)
	}
	if g2 := acquire(t, env.New(Cfg("b", long, 0)), 0, 0); g2.Epoch <= g.Epoch {
		t.Fatalf("next acquire got epoch %d, want above the released holder's %d", g2.Epoch, g.Epoch)
	}
}

// A record that no longer describes the lease (another holder took it meanwhile) is not
// released: ErrLost, and the lease is left as it is.
func testReleaseForRefusesAChangedHolder(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	a := env.New(Cfg("a", long, 0))
	ga := acquire(t, a, 0, 0)
	stale := inspect(t, a)
	if err := a.Release(ctx, ga); err != nil {
		t.Fatal(err)
	}
	b := env.New(Cfg("b", long, 0))
	acquire(t, b, 0, 0)
	before := inspect(t, b)
	if err := env.New(Cfg("op", long, 0)).ReleaseFor(ctx, stale); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("ReleaseFor a stale record: got %v, want ErrLost", err)
	}
	if after := inspect(t, b); after.Version != before.Version || after.Holder != "host/b" {
		t.Fatalf("ReleaseFor a stale record changed the lease: %+v, was %+v", after, before)
	}
}

// A holder whose clock runs ahead of ours (10 minutes, 10 days) and that is killed without
// releasing wrote a renew time in our future: by the wall-clock rule its lease would stay live
// until our clock caught up. With no acquire wait configured (the default), the next acquirer
// still takes it over after watching it unchanged for one lease duration on its own clock.
func testKilledHolderAheadIsTakenOver(t *testing.T, newEnv Factory) {
	for _, ahead := range []time.Duration{10 * time.Minute, 10 * 24 * time.Hour} {
		env := newEnv(t)
		const l = time.Second
		acquire(t, env.New(Cfg("a", l, ahead)), 0, 0) // then killed: never renewed, never released
		start := time.Now()
		g, err := env.New(Cfg("b", l, 0)).Acquire(context.Background(), 0, 0)
		if err != nil {
			t.Fatalf("holder %s ahead, killed: acquire with no wait: %v, want a takeover", ahead, err)
		}
		if g.Epoch != 2 {
			t.Fatalf("holder %s ahead: takeover epoch %d, want 2", ahead, g.Epoch)
		}
		if waited := time.Since(start); waited < l {
			t.Fatalf("holder %s ahead: took over after %v, before it was unchanged for L=%v", ahead, waited, l)
		}
	}
}

// The same holder alive keeps renewing: it is never taken over, and an acquirer with no wait
// configured returns busy after watching it (at most one lease duration).
func testRenewingHolderAheadIsNeverTakenOver(t *testing.T, newEnv Factory) {
	env := newEnv(t)
	const l = 2 * time.Second // several renewals per L even on a loaded machine
	a := env.New(Cfg("a", l, 10*time.Minute))
	g := acquire(t, a, 0, 0)
	r := lease.NewRenewer(context.Background(), a, g, l/8, Quiet)
	defer r.Stop()
	for range 2 {
		_, err := env.New(Cfg("b", l, 0)).Acquire(context.Background(), 0, 0)
		if !errors.Is(err, lease.ErrBusy) {
			t.Fatalf("acquire of a live lease renewed in our future: got %v, want ErrBusy", err)
		}
	}
	if r.Lost() != nil {
		t.Fatalf("the renewing holder lost its lease: %v", r.Lost())
	}
}

// The holder's wall clock steps back 10 minutes while it holds the lease (an NTP correction, a
// manual change). Every renew time it writes from then on is 10 minutes old to the other hosts,
// which take the lease over by the wall-clock rule at once, while the holder's validity, kept
// on its monotonic clock, still runs for most of a lease duration: two runs would believe they
// hold the lease. The renewal written under the stepped clock must end the grant's validity
// (the renewer then stops the run), and a clock stepped forward must not.
func testHolderClockSteppedBackStopsBeforeATakeover(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env := newEnv(t)
	var offset atomic.Int64
	a := env.New(steppedCfg("a", long, &offset))
	g := acquire(t, a, 0, 0)

	offset.Store(int64(10 * time.Minute)) // forward: the renew times look newer, nobody takes over
	g, err := a.Renew(ctx, g)
	if err != nil {
		t.Fatalf("renewal after a forward step: %v", err)
	}
	if !g.Valid() {
		t.Fatal("a renewal after the holder's clock stepped forward ended its validity; only a step back may")
	}

	offset.Store(int64(-10 * time.Minute))
	stepped, err := a.Renew(ctx, g)
	if err != nil {
		t.Fatalf("renewal after a step back: %v", err)
	}
	if _, err := env.New(Cfg("b", long, 0)).Acquire(ctx, 0, 0); err != nil {
		t.Fatalf("B, whose clock is right, should take over a lease renewed 10 minutes ago by its clock: %v", err)
	}
	if stepped.Valid() {
		t.Fatalf("the holder's clock stepped back 10 minutes and B took the lease over, yet the holder's grant is valid for %v more",
			time.Until(stepped.ValidUntil).Round(time.Millisecond))
	}

	// Through the renewer, as a session runs: the first renewal under the stepped clock stops it.
	env = newEnv(t)
	offset.Store(0)
	a = env.New(steppedCfg("a", long, &offset))
	r := lease.NewRenewer(ctx, a, acquire(t, a, 0, 0), 10*time.Millisecond, Quiet)
	defer r.Stop()
	offset.Store(int64(-10 * time.Minute))
	select {
	case <-r.Context().Done():
	case <-time.After(20 * time.Second): // a failure bound, not a timing assertion
		t.Fatal("the renewer kept the grant after the holder's clock stepped back 10 minutes")
	}
	if err := r.Lost(); !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("loss cause %v, want ErrExpired", err)
	}
}
