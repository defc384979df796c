package gcs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/gcs"
	"github.com/sf2loki/sf2loki/store/storetest"
)

var objects atomic.Int64

// factory returns backends on fresh objects in bucket, reached at endpoint (the emulator's base
// URL: no credentials are sent).
func factory(endpoint, bucket string) storetest.Factory {
	return func(t *testing.T) store.Backend {
		b, err := gcs.New(context.Background(), gcs.Options{Bucket: bucket, Object: fmt.Sprintf("sf2loki/state-%d.json", objects.Add(1)), Endpoint: endpoint})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestE2EConformanceGCS(t *testing.T) {
	srv := testenv.StartGCS(t)
	storetest.Run(t, factory(srv.URL, srv.NewBucket(t)))
}

func TestE2EConcurrencyGCS(t *testing.T) {
	srv := testenv.StartGCS(t)
	storetest.RunConcurrency(t, factory(srv.URL, srv.NewBucket(t)), 8, 8, testenv.Iterations(3))
}

func TestE2EBucketMissingGCS(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGCS(t)
	st := storetest.NewStore(factory(srv.URL, "sf2loki-no-such-bucket")(t))
	if _, err := st.Read(ctx); !errors.Is(err, store.ErrNoLocation) {
		t.Fatalf("read from a missing bucket: got %v, want ErrNoLocation", err)
	}
	if _, err := st.Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true}); !errors.Is(err, store.ErrNoLocation) {
		t.Fatalf("claim in a missing bucket: got %v, want ErrNoLocation", err)
	}
}

// Scenario 35 (GCS): the write is applied (the generation moves off 0, then off the next) and
// the response is lost; the backend must not retry it and the protocol finds its own stamp.
func TestE2ELostAcknowledgementGCS(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	proxy := storetest.NewProxy(t, srv.URL)
	st := storetest.NewStore(factory(proxy.URL, bucket)(t))
	proxy.LoseNextWriteAck()
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Claim(ctx, storetest.Req(1, "a"), snap)
	if err != nil {
		t.Fatalf("claim whose create response was lost: %v", err)
	}
	proxy.LoseNextWriteAck()
	if err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(1)}}); err != nil {
		t.Fatalf("commit whose response was lost: %v", err)
	}
	if err := w.Commit(ctx, store.Change{Set: map[string]json.RawMessage{"k": storetest.Int(2)}}); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); proxy.Fired() != 2 || s.LostAcks != 2 || s.Conflicts != 0 { // the claim's and the commit's
		t.Fatalf("fired %d, stats %+v", proxy.Fired(), s)
	}
	if d := w.Document(); len(d.History) != 1 || d.Writer.Seq != 2 {
		t.Fatalf("history %d stamp %+v", len(d.History), d.Writer)
	}
}

// A download cut off mid-body is retried by the protocol as a whole: the snapshot's bytes and
// generation come from one complete answer.
func TestE2ETruncatedReadGCS(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	proxy := storetest.NewProxy(t, srv.URL)
	b := factory(proxy.URL, bucket)(t)
	st := storetest.NewStore(b)
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Claim(ctx, storetest.Req(4, "a"), snap)
	if err != nil {
		t.Fatal(err)
	}
	proxy.TruncateNextRead()
	snap, err = st.Read(ctx)
	if err != nil {
		t.Fatalf("read whose first download was cut: %v", err)
	}
	if proxy.Fired() != 1 || snap.Version != w.Version() || snap.Floor() != 4 {
		t.Fatalf("fired %d, version %q (writer %q), floor %d", proxy.Fired(), snap.Version, w.Version(), snap.Floor())
	}
}
