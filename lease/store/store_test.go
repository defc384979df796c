package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/lease/leasetest"
	leasestore "github.com/sf2loki/sf2loki/lease/store"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
	"github.com/sf2loki/sf2loki/store/file"
	"github.com/sf2loki/sf2loki/store/gcs"
	s3store "github.com/sf2loki/sf2loki/store/s3"
	"github.com/sf2loki/sf2loki/store/storetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func env(b store.Backend, bytesOf func() []byte) leasetest.Env {
	st := storetest.NewStore(b)
	return leasetest.Env{
		Store: st,
		New:   func(c lease.Config) lease.Lease { return leasestore.New(st, leasestore.Options{Config: c}) },
		Bytes: bytesOf,
	}
}

func memoryEnv(*testing.T) leasetest.Env {
	m := storetest.NewMemory()
	return env(m, m.Bytes)
}

func fileEnv(t *testing.T) leasetest.Env {
	b, err := file.New(file.Options{Path: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	return env(b, func() []byte {
		data, _, _ := b.Load(context.Background())
		return data
	})
}

func TestLeaseBehaviourMemory(t *testing.T) { leasetest.Run(t, memoryEnv) }

var s3keys atomic.Int64

func s3Backend(t *testing.T, srv *testenv.S3, bucket string) store.Backend {
	b, err := s3store.New(context.Background(), s3store.Options{
		Bucket: bucket, Key: fmt.Sprintf("lease-%d.json", s3keys.Add(1)), Endpoint: srv.Endpoint,
		Region: srv.Region, PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestE2ELeaseBehaviourS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	bucket := srv.NewBucket(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		b := s3Backend(t, srv, bucket)
		return env(b, func() []byte {
			data, _, _ := b.Load(context.Background())
			return data
		})
	})
}

// loaded returns the stored bytes of b (nil when absent).
func loaded(b store.Backend) func() []byte {
	return func() []byte {
		data, _, _ := b.Load(context.Background())
		return data
	}
}

// The store-embedded lease on GCS (fake-gcs-server): the same suite, every case on a fresh
// object.
func TestE2ELeaseBehaviourGCS(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		b, err := gcs.New(context.Background(), gcs.Options{Bucket: bucket, Object: fmt.Sprintf("lease-%d.json", s3keys.Add(1)), Endpoint: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		return env(b, loaded(b))
	})
}

// The store-embedded lease on a ConfigMap (the real kube-apiserver), as a user holding only
// get, create and update on configmaps: every case on a fresh ConfigMap.
func TestE2ELeaseBehaviourConfigMap(t *testing.T) {
	kube := testenv.SharedKube(t)
	ns := kube.NewNamespace(t)
	kube.Grant(t, ns, "user-1", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
	leasetest.Run(t, func(t *testing.T) leasetest.Env {
		b, err := configmap.New(configmap.Options{
			Namespace: ns, Name: fmt.Sprintf("lease-%d", s3keys.Add(1)), RESTConfig: kube.RESTConfig(kube.UserToken("user-1")),
		})
		if err != nil {
			t.Fatal(err)
		}
		return env(b, loaded(b))
	})
}

// The S3 variant of the self-conflict soak runs on the real clock (network I/O cannot run
// inside a synctest bubble), with intervals scaled down. A renewal's request may take longer
// than its interval (50 ms) on a loaded machine; such a write is unconfirmed and settled by the
// store (a lost acknowledgement, a retry, the conflict of its own late landing). So here a
// conflict or retry is allowed only behind an unconfirmed write: a renewal racing a commit
// conflicts without one, which the synctest variant checks strictly.
func TestE2ESoakRenewalsNeverConflictWithCommitsS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	b := &ambiguity{Backend: s3Backend(t, srv, srv.NewBucket(t))}
	st := storetest.NewStore(b)
	ctx := context.Background()
	const renew = 50 * time.Millisecond
	s, err := lease.Start(ctx, leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", 5*time.Second, 0)}), st,
		lease.SessionOptions{RenewEvery: renew, Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	commits := 10 * testenv.Iterations(3)
	for i := range commits {
		time.Sleep(10 * renew)
		if err := s.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(int64(i))}}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	stats := s.Stats()
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	unconfirmed := int(b.unconfirmed.Load())
	if stats.Conflicts > unconfirmed || stats.Retries > unconfirmed || s.Lost() != nil {
		t.Fatalf("self-conflicts over %d commits: %+v with %d unconfirmed writes (lost: %v)", commits, stats, unconfirmed, s.Lost())
	}
	if renewals := stats.Commits - commits; renewals < commits*3 {
		t.Fatalf("only %d renewals beside %d commits", renewals, commits)
	}
}

// ambiguity counts the writes whose outcome the backend could not report (a timeout, a lost
// response): neither stored nor refused.
type ambiguity struct {
	store.Backend
	unconfirmed atomic.Int64
}

func (a *ambiguity) Store(ctx context.Context, data []byte, v store.Version) (store.Version, error) {
	nv, err := a.Backend.Store(ctx, data, v)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		a.unconfirmed.Add(1)
	}
	return nv, err
}

func TestLeaseBehaviourFile(t *testing.T) { leasetest.Run(t, fileEnv) }

// Acquire and claim are one write: the grant's writer owns the claimed version.
func TestAcquireIsTheClaim(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	e := env(m, m.Bytes)
	s, err := lease.Start(ctx, e.New(leasetest.Cfg("a", time.Minute, 0)), e.Store, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Release(ctx) }()
	if n := len(m.History()); n != 1 {
		t.Fatalf("%d writes to acquire and claim, want 1", n)
	}
	f := s.Document().Fence
	if f.Epoch != 1 || f.Lease.Kind != leasestore.Kind || f.RenewedAt.IsZero() || f.Duration != store.Duration(time.Minute) {
		t.Fatalf("fence %+v", f)
	}
}

// A document fenced by another deployment's lease name is a configuration error, not busy.
func TestForeignLeaseNameIsConfigError(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	a := leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", time.Minute, 0), Name: "deploy-a"})
	g, err := a.Acquire(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	b := leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("b", time.Minute, 0), Name: "deploy-b"})
	if _, err := b.Acquire(ctx, 0, 0); !errors.Is(err, store.ErrForeignLease) {
		t.Fatalf("got %v, want ErrForeignLease", err)
	}
}

// Even while the other deployment holds its lease, a second deployment's acquire is a
// configuration error, never busy (which would hide the misconfiguration behind exit 0).
func TestForeignLeaseNameIsConfigErrorWhileHeld(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	a := leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", time.Minute, 0), Name: "deploy-a"})
	g, err := a.Acquire(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Release(ctx, g) }()
	before := m.Bytes()
	b := leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("b", time.Minute, 0), Name: "deploy-b"})
	_, err = b.Acquire(ctx, 0, time.Second)
	if !errors.Is(err, store.ErrForeignLease) || errors.Is(err, lease.ErrBusy) {
		t.Fatalf("got %v, want ErrForeignLease", err)
	}
	if !strings.Contains(err.Error(), "deploy-a") || !strings.Contains(err.Error(), "deploy-b") {
		t.Errorf("the error does not name both leases: %v", err)
	}
	if !bytes.Equal(before, m.Bytes()) {
		t.Error("the refused acquire wrote the document")
	}
}

// Start reads the document once: the store lease judges the takeover on that snapshot.
func TestStartReadsTheDocumentOnce(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	st := storetest.NewStore(m)
	reads := 0
	m.SetHook(func(op storetest.Op) storetest.Fault {
		if op == storetest.OpLoad {
			reads++
		}
		return storetest.None
	})
	s, err := lease.Start(ctx, leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", time.Minute, 0)}), st, lease.SessionOptions{Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Release(ctx) }()
	if reads != 1 {
		t.Errorf("%d document reads to start a session, want 1", reads)
	}
}

// With a renew interval ten times shorter than the time between commits, renewals and
// commits share one writer and never conflict with each other over a long run.
func TestSoakRenewalsNeverConflictWithCommits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		run        time.Duration // simulated
		newBackend func(t *testing.T) store.Backend
	}{
		{"memory", 2 * time.Hour, func(*testing.T) store.Backend { return storetest.NewMemory() }},
		{"file", 15 * time.Minute, func(t *testing.T) store.Backend { // every write fsyncs: keep it short
			b, err := file.New(file.Options{Path: filepath.Join(t.TempDir(), "state.json")})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.newBackend(t)
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				st := storetest.NewStore(b)
				const (
					l     = 30 * time.Second
					renew = time.Second
					every = 10 * renew
				)
				s, err := lease.Start(ctx, leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", l, 0)}), st,
					lease.SessionOptions{RenewEvery: renew, Logger: leasetest.Quiet})
				if err != nil {
					t.Fatal(err)
				}
				commits := int(tc.run / every)
				for i := range commits {
					time.Sleep(every)
					if err := s.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(int64(i))}}); err != nil {
						t.Fatalf("commit %d: %v", i, err)
					}
				}
				stats := s.Stats()
				if err := s.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if stats.Conflicts != 0 || stats.Retries != 0 {
					t.Fatalf("self-conflicts over %d commits: %+v", commits, stats)
				}
				if renewals := stats.Commits - commits; renewals < commits*8 {
					t.Fatalf("only %d renewals happened beside %d commits", renewals, commits)
				}
			})
		})
	}
}

// stallingBackend makes writes hang until their context ends once stall is set: an object
// store that stopped answering.
type stallingBackend struct {
	store.Backend
	stall atomic.Bool
}

func (s *stallingBackend) Store(ctx context.Context, data []byte, v store.Version) (store.Version, error) {
	if s.stall.Load() {
		<-ctx.Done()
		return "", errors.Join(store.ErrUnavailable, ctx.Err())
	}
	return s.Backend.Store(ctx, data, v)
}

// A renewal of the store lease is a Writer commit, queued behind the job's commit; when that
// commit hangs for its whole budget (run.commit_timeout), the renewal gives up at its own
// timeout rather than waiting for it. Session.Context is so canceled within one renew interval
// of the grant's validity passing, not when the job's commit gives up (real time).
func TestSessionLostAtValidityWhileJobCommitHangs(t *testing.T) {
	const (
		L          = 300 * time.Millisecond
		every      = 100 * time.Millisecond
		commitTime = 1200 * time.Millisecond // the job commit's budget, well past L
	)
	b := &stallingBackend{Backend: storetest.NewMemory()}
	st := storetest.NewStore(b)
	s, err := lease.Start(context.Background(), leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", L, 0)}), st,
		lease.SessionOptions{RenewEvery: every, Logger: leasetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.stall.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Release(ctx)
	}()
	validUntil := s.Grant().ValidUntil

	b.stall.Store(true)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), commitTime)
		defer cancel()
		_ = s.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(1)}})
	}()

	select {
	case <-s.Context().Done():
		if late := time.Since(validUntil); late > every+100*time.Millisecond {
			t.Fatalf("intake canceled %v after the grant's validity passed, want within one renew interval (%v)", late, every)
		}
		if !errors.Is(s.Lost(), lease.ErrLost) {
			t.Fatalf("Lost() = %v, want ErrLost", s.Lost())
		}
	case <-time.After(time.Until(validUntil) + every + 500*time.Millisecond):
		t.Fatalf("the grant's validity passed %v ago and Session.Context is not canceled (lost: %v): the loss waits for the renewal queued behind the job's commit",
			time.Since(validUntil).Round(time.Millisecond), s.Lost())
	}
}

// deleteBeforeWrite deletes the document right before the next write reaches the backend, once
// armed: an operator reset between a read and the write built on it.
type deleteBeforeWrite struct {
	store.Backend
	armed atomic.Bool
}

func (d *deleteBeforeWrite) Store(ctx context.Context, data []byte, v store.Version) (store.Version, error) {
	if d.armed.CompareAndSwap(true, false) {
		if err := d.Delete(ctx); err != nil {
			return "", err
		}
	}
	return d.Backend.Store(ctx, data, v)
}

// An operator releases a holder's lease (`sf2loki lease release`) while the document is
// deleted under it: the holder no longer holds anything, so the release reports the lease lost
// and writes nothing (it neither recreates the document nor fails otherwise).
func TestReleaseForOfADocumentDeletedMeanwhileIsLost(t *testing.T) {
	ctx := context.Background()
	m := storetest.NewMemory()
	b := &deleteBeforeWrite{Backend: m}
	st := storetest.NewStore(b)
	if _, err := leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("a", time.Minute, 0)}).Acquire(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	op := leasestore.New(st, leasestore.Options{Config: leasetest.Cfg("op", time.Minute, 0)})
	rec, err := op.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.armed.Store(true)
	if err := op.ReleaseFor(ctx, rec); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("ReleaseFor of a lease whose document was deleted meanwhile: got %v, want ErrLost", err)
	}
	if m.Bytes() != nil {
		t.Fatalf("the release recreated the deleted document:\n%s", m.Bytes())
	}
}

// Scenario 11 for the store lease, where acquiring is claiming: C reads the document (the
// lease free), is paused, and B acquires and commits meanwhile, then holds the lease or
// releases it. C's claim, built on its stale read with the same epoch as B's, must not land:
// C is busy, writes nothing, and B's commit stays.
func TestAcquireFromAStaleReadIsBusy(t *testing.T) {
	for _, released := range []bool{false, true} {
		t.Run(fmt.Sprintf("B released=%v", released), func(t *testing.T) {
			ctx := context.Background()
			m := storetest.NewMemory()
			e := env(m, m.Bytes)
			a := e.New(leasetest.Cfg("a", time.Minute, 0))
			ga, err := a.Acquire(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx, ga); err != nil {
				t.Fatal(err)
			}
			stale, err := e.Store.Read(ctx) // C reads the free lease, then is paused
			if err != nil {
				t.Fatal(err)
			}
			b, err := lease.Start(ctx, e.New(leasetest.Cfg("b", time.Minute, 0)), e.Store, lease.SessionOptions{Logger: leasetest.Quiet})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(7)}}); err != nil {
				t.Fatal(err)
			}
			if released {
				if err := b.Release(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				defer func() { _ = b.Release(ctx) }()
			}
			before := m.Bytes()
			c := e.New(leasetest.Cfg("c", time.Minute, 0)).(*leasestore.Lease)
			g, err := c.AcquireFrom(ctx, stale, 0, 0)
			if !errors.Is(err, lease.ErrBusy) {
				t.Fatalf("acquire from a read older than B's claim: got grant %+v, error %v; want ErrBusy", g, err)
			}
			if !bytes.Equal(before, m.Bytes()) {
				t.Fatalf("the stale acquire wrote the document:\nbefore %s\nafter  %s", before, m.Bytes())
			}
		})
	}
}
