package s3_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
	s3store "github.com/sf2loki/sf2loki/store/s3"
	"github.com/sf2loki/sf2loki/store/storetest"
)

var keys atomic.Int64

// factory returns backends on fresh keys of one bucket, through endpoint (the server or a
// proxy in front of it).
func factory(srv *testenv.S3, bucket, endpoint string) storetest.Factory {
	return func(t *testing.T) store.Backend {
		b, err := s3store.New(context.Background(), s3store.Options{
			Bucket: bucket, Key: fmt.Sprintf("sf2loki/state-%d.json", keys.Add(1)),
			Endpoint: endpoint, Region: srv.Region, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestE2EConformanceS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	storetest.Run(t, factory(srv, srv.NewBucket(t), srv.Endpoint))
}

func TestE2EConcurrencyS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	storetest.RunConcurrency(t, factory(srv, srv.NewBucket(t), srv.Endpoint), 8, 8, testenv.Iterations(3))
}

func TestE2EBucketMissingAndBadCredentialsAreDistinct(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartVersitygw(t)
	missing, err := s3store.New(ctx, s3store.Options{Bucket: "sf2loki-no-such-bucket", Key: "k", Endpoint: srv.Endpoint,
		Region: srv.Region, PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.NewStore(missing)
	if _, err := st.Read(ctx); !errors.Is(err, store.ErrNoLocation) {
		t.Fatalf("read from a missing bucket: got %v, want ErrNoLocation", err)
	}
	if _, err := st.Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true}); !errors.Is(err, store.ErrNoLocation) {
		t.Fatalf("claim in a missing bucket: got %v, want ErrNoLocation", err)
	}
	bad, err := s3store.New(ctx, s3store.Options{Bucket: srv.NewBucket(t), Key: "k", Endpoint: srv.Endpoint,
		Region: srv.Region, PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.NewStore(bad).Read(ctx); !errors.Is(err, store.ErrPermission) {
		t.Fatalf("read with a wrong secret: got %v, want ErrPermission", err)
	}
}

// Scenarios 33, 34 and 38: the server applies a conditional PUT and the response is lost
// (500 from a proxy after the write). The SDK must not re-send the precondition (which would
// manufacture a 412); the protocol re-reads, finds its own stamp and reports success once.
func TestE2ELostAcknowledgementS3(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartVersitygw(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	b := factory(srv, srv.NewBucket(t), proxy.URL)(t)
	st := storetest.NewStore(b)
	proxy.LoseNextWriteAck() // the first-ever create (If-None-Match: *)
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Claim(ctx, storetest.Req(1, "a"), snap)
	if err != nil {
		t.Fatalf("claim whose create response was lost: %v", err)
	}
	proxy.LoseNextWriteAck() // an update (If-Match)
	if err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(1)}}); err != nil {
		t.Fatalf("commit whose response was lost: %v", err)
	}
	if err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(2)}}); err != nil {
		t.Fatalf("commit after the resync: %v", err)
	}
	if proxy.Fired() != 2 {
		t.Fatalf("%d faults injected, want 2", proxy.Fired())
	}
	s := w.Stats()
	if s.LostAcks != 2 || s.Conflicts != 0 {
		t.Fatalf("stats %+v: want the claim's and the commit's lost acks recovered and no conflict", s)
	}
	d := w.Document()
	if d.Writer.Seq != 2 || len(d.History) != 1 || storetest.IntValue(d.Checkpoints, "k") != 2 {
		t.Fatalf("document after lost acks: stamp %+v history %d k=%d", d.Writer, len(d.History), storetest.IntValue(d.Checkpoints, "k"))
	}
}

// Scenario 36: S3 answers a conditional PUT 409 ConditionalRequestConflict (another
// conditional request on the key was in progress; nothing was written). The claim and the
// commit that meet it re-read, write again on the version they find and succeed: counted as
// conflicts, never reported as another writer, and nothing is written twice.
func TestE2EConditionalRequestConflictIsRetriedS3(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartVersitygw(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	st := storetest.NewStore(factory(srv, srv.NewBucket(t), proxy.URL)(t))
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.ConflictNextWrite() // the creating claim (If-None-Match: *)
	w, err := st.Claim(ctx, storetest.Req(1, "a"), snap)
	if err != nil {
		t.Fatalf("claim that met a 409 ConditionalRequestConflict: %v", err)
	}
	proxy.ConflictNextWrite() // an update (If-Match)
	if err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(1)}}); err != nil {
		t.Fatalf("commit that met a 409 ConditionalRequestConflict: %v", err)
	}
	if proxy.Fired() != 2 {
		t.Fatalf("%d faults injected, want 2", proxy.Fired())
	}
	if s := w.Stats(); s.Conflicts != 2 || s.Retries != 2 || s.LostAcks != 0 || s.Commits != 1 {
		t.Fatalf("stats %+v: want the claim's and the commit's conflicts retried once each", s)
	}
	d, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Doc.Writer.Seq != 1 || len(d.Doc.History) != 1 || storetest.IntValue(d.Doc.Checkpoints, "k") != 1 {
		t.Fatalf("document: stamp %+v history %d k=%d", d.Doc.Writer, len(d.Doc.History), storetest.IntValue(d.Doc.Checkpoints, "k"))
	}
}

// Scenario 41: a GET whose body is cut off is retried as a unit, the ETag re-fetched with the
// bytes.
func TestE2ETruncatedReadIsRetriedS3(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartVersitygw(t)
	proxy := storetest.NewProxy(t, srv.Endpoint)
	st := storetest.NewStore(factory(srv, srv.NewBucket(t), proxy.URL)(t))
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Claim(ctx, storetest.Req(1, "a"), snap)
	if err != nil {
		t.Fatal(err)
	}
	proxy.TruncateNextRead()
	got, err := st.Read(ctx)
	if err != nil {
		t.Fatalf("read with a truncated body: %v", err)
	}
	if proxy.Fired() != 1 || got.Version != w.Version() || got.Doc.Fence.Epoch != 1 {
		t.Fatalf("fired %d, version %q (want %q), fence %+v", proxy.Fired(), got.Version, w.Version(), got.Doc.Fence)
	}
}

// A request signed by a host whose clock is an hour behind is refused with 403
// RequestTimeTooSkewed. That is the host's clock, not the IAM policy: ErrIntegrity (exit 7,
// a person must fix the clock), with a message that says so, never ErrPermission.
func TestE2ESkewedClockIsNotAPermissionError(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartVersitygw(t)
	client := srv.SkewedClient(-time.Hour)
	b, err := s3store.New(ctx, s3store.Options{Bucket: srv.NewBucket(t), Key: "k", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrIntegrity) || errors.Is(err, store.ErrPermission) || !strings.Contains(err.Error(), "clock") {
			t.Errorf("%s with a skewed clock: got %v; want ErrIntegrity naming the clock", what, err)
		}
	}
	_, _, err = b.Load(ctx)
	check("load", err)
	_, err = b.Store(ctx, []byte(`{}`), "")
	check("store", err)
	_, err = storetest.NewStore(b).Read(ctx)
	check("read", err)
}
