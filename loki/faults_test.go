package loki

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// batch returns n entries of one stream, oldest first, 1ms apart, with Refs 1..n and a little
// metadata: one request holds one stream.
func batch(n int) []Entry { return batchOf(n, "Login") }

// batchTwoStreams is batch with the entries spread over two streams, API's at odd positions.
func batchTwoStreams(n int) []Entry { return batchOf(n, "Login", "API") }

// batchOf returns n entries, oldest first, 1ms apart, with Refs 1..n and a little metadata,
// entry i of the event type types[i % len(types)].
func batchOf(n int, types ...string) []Entry {
	now := time.Now()
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{
			Timestamp: now.Add(time.Duration(i-n) * time.Millisecond),
			Labels:    lbl("job", "sf2loki", "source", "eventlogfile", "event_type", types[i%len(types)]),
			Line:      fmt.Sprintf(`{"n":%d,"msg":"entry %d"}`, i, i),
			Metadata:  []Label{{Name: "row", Value: fmt.Sprint(i)}},
			Ref:       uint64(i + 1),
		}
	}
	return es
}

// TestFaultTable pushes through the client against the strict receiver with
// one injected fault per case and asserts both what the receiver stored and
// what the client reported. Each case runs in a synctest bubble, so
// Retry-After and backoff waits pass on the fake clock.
func TestFaultTable(t *testing.T) {
	type check func(t *testing.T, res Result, srv *simloki.Server, es []Entry, elapsed time.Duration)
	cases := []struct {
		name    string
		n       int
		timeout time.Duration
		opts    func(*Options)
		setup   func(srv *simloki.Server, es []Entry)
		check   check
	}{
		{
			name: "429 then success honors Retry-After",
			n:    20, timeout: time.Minute,
			opts:  func(o *Options) { o.MinBackoff, o.MaxBackoff = 100*time.Millisecond, time.Second },
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(1, http.StatusTooManyRequests, "7") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, elapsed time.Duration) {
				wantAllAccepted(t, res, srv, es)
				if res.Retries != 1 || res.Requests != 2 {
					t.Errorf("retries %d requests %d, want 1 and 2", res.Retries, res.Requests)
				}
				if elapsed < 7*time.Second || elapsed > 8*time.Second {
					t.Errorf("push took %s, want Retry-After 7s respected (and not much more)", elapsed)
				}
			},
		},
		{
			name: "429 with an HTTP-date Retry-After",
			n:    5, timeout: time.Minute,
			setup: func(srv *simloki.Server, _ []Entry) {
				srv.FailNext(1, http.StatusTooManyRequests, time.Now().Add(12*time.Second).UTC().Format(http.TimeFormat))
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, elapsed time.Duration) {
				wantAllAccepted(t, res, srv, es)
				// HTTP dates have one-second resolution.
				if elapsed < 11*time.Second || elapsed > 13*time.Second {
					t.Errorf("push took %s, want about 12s", elapsed)
				}
			},
		},
		{
			name: "Retry-After beyond the deadline is not waited for",
			n:    1, timeout: 10 * time.Second,
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(1, http.StatusTooManyRequests, "30") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, elapsed time.Duration) {
				wantNoneDelivered(t, res, srv, es, ErrUnavailable)
				if elapsed >= 10*time.Second {
					t.Errorf("push took %s, want an early return instead of sleeping into the deadline", elapsed)
				}
				if res.Requests != 1 {
					t.Errorf("requests %d, want 1", res.Requests)
				}
			},
		},
		{
			name: "a 429 with no time left to wait splits the request at once",
			n:    5, timeout: 10 * time.Second,
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(1, http.StatusTooManyRequests, "30") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, elapsed time.Duration) {
				wantAllAccepted(t, res, srv, es)
				if elapsed != 0 || res.Splits != 1 || res.Requests != 3 {
					t.Errorf("push took %s, %d splits, %d requests; want the halves sent at once: 0s, 1 split, 3 requests", elapsed, res.Splits, res.Requests)
				}
			},
		},
		{
			name: "5xx three times then success",
			n:    30, timeout: time.Minute,
			setup: func(srv *simloki.Server, _ []Entry) {
				srv.FailNext(1, 500, "")
				srv.FailNext(1, 502, "")
				srv.FailNext(1, 503, "")
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantAllAccepted(t, res, srv, es)
				if res.Retries != 3 || res.Requests != 4 {
					t.Errorf("retries %d requests %d, want 3 and 4", res.Retries, res.Requests)
				}
			},
		},
		{
			name: "5xx until retries are exhausted",
			n:    10, timeout: time.Hour,
			opts:  func(o *Options) { o.MaxAttempts = 5 },
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(-1, 503, "") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantNoneDelivered(t, res, srv, es, ErrUnavailable)
				var se *StatusError
				if !errors.As(res.Err, &se) || se.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("err %v, want a *StatusError 503", res.Err)
				}
				if res.Requests != 5 || res.Retries != 4 {
					t.Errorf("requests %d retries %d, want 5 and 4", res.Requests, res.Retries)
				}
			},
		},
		{
			name: "413 splits the request until the halves fit",
			n:    64, timeout: time.Minute,
			setup: func(srv *simloki.Server, es []Entry) { srv.SetMaxBodyBytes(400) },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantAllAccepted(t, res, srv, es)
				if res.Splits == 0 {
					t.Error("no split reported")
				}
				if d := srv.Duplicates(); len(d) != 0 {
					t.Errorf("%d duplicates: a 413 stores nothing, so nothing should be resent twice", len(d))
				}
			},
		},
		{
			name: "a single entry still too large is rejected permanently",
			n:    16, timeout: time.Minute,
			setup: func(srv *simloki.Server, es []Entry) {
				r := rand.New(rand.NewPCG(1, 2))
				big := make([]byte, 8000)
				for i := range big {
					big[i] = byte('!' + r.IntN(90)) // poorly compressible
				}
				es[5].Line = string(big)
				srv.SetMaxBodyBytes(4000)
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantRejected(t, res, es, []int{5}, ReasonTooLarge, http.StatusRequestEntityTooLarge, "too large")
				wantAcceptedExcept(t, res, srv, es, 5)
			},
		},
		{
			name: "400 for a subset: exact entries reported, the rest stored",
			n:    50, timeout: time.Minute,
			setup: func(srv *simloki.Server, es []Entry) {
				for _, i := range []int{3, 17, 18, 41} {
					es[i].Line = "poison " + es[i].Line
				}
				srv.RejectEntries(func(e simloki.Entry) bool { return strings.HasPrefix(e.Line, "poison") }, "poisoned_entry")
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantRejected(t, res, es, []int{3, 17, 18, 41}, ReasonBadRequest, http.StatusBadRequest, "poisoned_entry")
				wantAcceptedExcept(t, res, srv, es, 3, 17, 18, 41)
			},
		},
		{
			name: "disallowed structured metadata rejects only entries carrying it",
			n:    12, timeout: time.Minute,
			setup: func(srv *simloki.Server, es []Entry) {
				for i := range es {
					if i%3 != 0 {
						es[i].Metadata = nil
					}
				}
				srv.SetAllowStructuredMetadata(false)
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantRejected(t, res, es, []int{0, 3, 6, 9}, ReasonMetadataDisallowed, http.StatusBadRequest, "disallowed")
				wantAcceptedExcept(t, res, srv, es, 0, 3, 6, 9)
			},
		},
		{
			name: "200 counts as success",
			n:    8, timeout: time.Minute,
			setup: func(srv *simloki.Server, _ []Entry) { srv.SetSuccessStatus(http.StatusOK) },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantAllAccepted(t, res, srv, es)
			},
		},
		{
			name: "260 is not ingested: retryable later, neither shipped nor dropped",
			n:    8, timeout: time.Minute,
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(1, 260, "") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantNoneDelivered(t, res, srv, es, ErrNotIngested)
				if res.Requests != 1 {
					t.Errorf("requests %d, want 1 (no retry within the push)", res.Requests)
				}
			},
		},
		{
			name: "over-burst request is split after repeated 429s",
			n:    40, timeout: 5 * time.Minute,
			setup: func(srv *simloki.Server, es []Entry) {
				// Burst fits half the batch's line+metadata bytes, not all.
				srv.SetIngestionLimit(0, sampleBytes(es)*3/5)
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantAllAccepted(t, res, srv, es)
				if res.Splits != 1 {
					t.Errorf("splits %d, want 1", res.Splits)
				}
				if res.Requests != DefaultSplitAfter429+2 {
					t.Errorf("requests %d, want %d 429s then two halves", res.Requests, DefaultSplitAfter429)
				}
			},
		},
		{
			name: "lost response is retried and the duplicate is visible at the receiver",
			n:    10, timeout: time.Minute,
			setup: func(srv *simloki.Server, _ []Entry) { srv.DropResponses(1) },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantAllAccepted(t, res, srv, es)
				if res.Retries != 1 {
					t.Errorf("retries %d, want 1", res.Retries)
				}
				if d := srv.Duplicates(); len(d) != len(es) {
					t.Errorf("receiver saw %d duplicates, want %d (the resent request)", len(d), len(es))
				}
			},
		},
		{
			name: "401 is held as an auth error without retrying",
			n:    4, timeout: time.Minute,
			setup: func(srv *simloki.Server, _ []Entry) { srv.FailNext(1, http.StatusUnauthorized, "") },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantNoneDelivered(t, res, srv, es, ErrAuth)
				if res.Requests != 1 {
					t.Errorf("requests %d, want 1", res.Requests)
				}
			},
		},
		{
			name: "404 is held as unexpected, never dropped",
			n:    4, timeout: time.Minute,
			opts: func(o *Options) { o.URL = "http://loki.invalid/wrong/path" },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				wantNoneDelivered(t, res, srv, es, ErrUnexpectedStatus)
			},
		},
		{
			name: "slow receiver past the deadline: not delivered, context error",
			n:    4, timeout: 5 * time.Second,
			setup: func(srv *simloki.Server, _ []Entry) { srv.SetLatency(time.Minute) },
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, elapsed time.Duration) {
				wantNoneDelivered(t, res, srv, es, context.DeadlineExceeded)
				if elapsed > 5*time.Second {
					t.Errorf("push took %s, beyond its 5s deadline", elapsed)
				}
			},
		},
		{
			name: "after a failed request the rest of the push is not delivered",
			n:    40, timeout: time.Minute,
			opts: func(o *Options) { o.MaxEntriesPerRequest = 10 },
			setup: func(srv *simloki.Server, _ []Entry) {
				srv.FailNext(1, http.StatusNoContent, "") // first request "succeeds" without storing
				srv.FailNext(1, 260, "")
			},
			check: func(t *testing.T, res Result, srv *simloki.Server, es []Entry, _ time.Duration) {
				if len(res.Accepted) != 10 || len(res.NotDelivered) != 30 {
					t.Fatalf("accepted %d not delivered %d, want 10 and 30", len(res.Accepted), len(res.NotDelivered))
				}
				if !errors.Is(res.Err, ErrNotIngested) || res.Requests != 2 {
					t.Errorf("err %v requests %d, want ErrNotIngested after 2 requests", res.Err, res.Requests)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := simloki.New(simloki.Options{})
				c := newClient(t, srv, tc.opts)
				es := batch(tc.n)
				if tc.setup != nil {
					tc.setup(srv, es)
				}
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				start := time.Now()
				res := c.Push(ctx, es)
				tc.check(t, res, srv, es, time.Since(start))
				checkResultConsistent(t, res, es)
			})
		})
	}
}

// sampleBytes is what Loki's rate limiter counts: line plus metadata bytes.
func sampleBytes(es []Entry) int {
	n := 0
	for _, e := range es {
		n += len(e.Line)
		for _, m := range e.Metadata {
			n += len(m.Name) + len(m.Value)
		}
	}
	return n
}

func wantAllAccepted(t *testing.T, res Result, srv *simloki.Server, es []Entry) {
	t.Helper()
	if !res.OK() || res.Err != nil || len(res.Rejected) != 0 || len(res.NotDelivered) != 0 {
		t.Fatalf("push not fully accepted: accepted %d/%d, rejected %v, err %v", len(res.Accepted), len(es), res.Rejected, res.Err)
	}
	assertStored(t, srv, es)
}

func wantNoneDelivered(t *testing.T, res Result, srv *simloki.Server, es []Entry, sentinel error) {
	t.Helper()
	if len(res.Accepted) != 0 || len(res.Rejected) != 0 || !slices.Equal(res.NotDelivered, refs(es)) {
		t.Fatalf("accepted %d rejected %d not delivered %d, want all %d not delivered", len(res.Accepted), len(res.Rejected), len(res.NotDelivered), len(es))
	}
	if !errors.Is(res.Err, sentinel) {
		t.Fatalf("err = %v, want %v", res.Err, sentinel)
	}
	if n := srv.Count(); n != 0 {
		t.Fatalf("receiver stored %d entries, want 0", n)
	}
}

func wantRejected(t *testing.T, res Result, es []Entry, idx []int, reason Reason, status int, detail string) {
	t.Helper()
	if len(res.Rejected) != len(idx) {
		t.Fatalf("rejected %v, want indexes %v", res.Rejected, idx)
	}
	for k, i := range idx {
		r := res.Rejected[k]
		if r.Index != i || r.Ref != es[i].Ref || r.Reason != reason || r.Status != status || !strings.Contains(r.Detail, detail) {
			t.Errorf("rejection %d = %+v, want index %d ref %d reason %s status %d detail containing %q", k, r, i, es[i].Ref, reason, status, detail)
		}
	}
}

func wantAcceptedExcept(t *testing.T, res Result, srv *simloki.Server, es []Entry, except ...int) {
	t.Helper()
	var want []Entry
	for i, e := range es {
		if !slices.Contains(except, i) {
			want = append(want, e)
		}
	}
	if !slices.Equal(res.Accepted, refs(want)) || len(res.NotDelivered) != 0 || res.Err != nil {
		t.Fatalf("accepted %v, not delivered %v, err %v; want accepted %v", res.Accepted, res.NotDelivered, res.Err, refs(want))
	}
	assertStored(t, srv, want)
}

// checkResultConsistent checks the invariants every Result keeps: one outcome
// per entry, and the Ref slices agree with the outcomes.
func checkResultConsistent(t *testing.T, res Result, es []Entry) {
	t.Helper()
	if len(res.Outcomes) != len(es) {
		t.Fatalf("%d outcomes for %d entries", len(res.Outcomes), len(es))
	}
	var acc, nd []uint64
	var rej []int
	for i, o := range res.Outcomes {
		switch o {
		case Accepted:
			acc = append(acc, es[i].Ref)
		case NotDelivered:
			nd = append(nd, es[i].Ref)
		case Rejected:
			rej = append(rej, i)
		}
	}
	gotRej := make([]int, 0, len(res.Rejected))
	for _, r := range res.Rejected {
		gotRej = append(gotRej, r.Index)
	}
	if !slices.Equal(acc, res.Accepted) || !slices.Equal(nd, res.NotDelivered) || !slices.Equal(rej, gotRej) && len(rej)+len(gotRej) > 0 {
		t.Fatalf("Ref slices disagree with Outcomes")
	}
	if (len(nd) == 0) != (res.Err == nil) {
		t.Fatalf("Err %v with %d not delivered", res.Err, len(nd))
	}
	if len(res.InDoubtIndexes) != res.InDoubt || !slices.IsSorted(res.InDoubtIndexes) ||
		slices.ContainsFunc(res.InDoubtIndexes, func(i int) bool { return res.Outcomes[i] != NotDelivered }) {
		t.Fatalf("in doubt %d at %v: want as many positions, ascending, of entries not delivered", res.InDoubt, res.InDoubtIndexes)
	}
}
