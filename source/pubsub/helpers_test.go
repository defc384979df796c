package pubsub_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

const loginTopic = "/event/LoginEventStream"

// env is a simulated org with its Pub/Sub API, and a client of both.
type env struct {
	clock  *sftest.Clock
	org    *sftest.Org
	ps     *simpubsub.Server
	sf     *salesforce.Client
	client *sfpubsub.Client
}

func newEnv(t *testing.T, psOpts simpubsub.Options) *env {
	t.Helper()
	// The clock starts 100h back, so that tests can move it 96h forward and still publish
	// events the receiver accepts (neither too old nor in the future).
	e := &env{clock: sftest.NewClock(time.Now().UTC().Add(-100 * time.Hour).Truncate(time.Millisecond))}
	e.org = sftest.Start(t, simsf.Options{Now: e.clock.Now})
	e.sf = e.org.Client(t)
	psOpts.Now = e.clock.Now
	if psOpts.Authenticate == nil {
		psOpts.Authenticate = e.authenticator()
	}
	psOpts.Logger = quiet()
	e.ps = simpubsub.New(psOpts)
	if _, err := e.ps.AddTopic(loginTopic, simpubsub.LoginEventStreamSchema); err != nil {
		t.Fatal(err)
	}
	l, err := e.ps.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	e.client, err = sfpubsub.New(e.sf, sfpubsub.Options{Endpoint: l.Addr, Plaintext: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// authenticator is the Pub/Sub server's check of the simulated org's sessions (a test that
// injects a fault around the check wraps it; it is built on each call, so a wrapper may be set
// up before newEnv returns).
func (e *env) authenticator() simpubsub.Authenticator {
	return simpubsub.HandlerAuthenticator(e.org.Handler(), e.org.OrgID())
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// publishLogins publishes LoginEventStream events from..from+n-1 at the current clock.
func (e *env) publishLogins(t *testing.T, from, n int) [][]byte {
	t.Helper()
	evs := make([]map[string]any, n)
	for i := range n {
		evs[i] = simpubsub.LoginEvent(from+i, e.clock.Now())
	}
	ids, err := e.ps.Publish(loginTopic, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (e *env) source(t *testing.T, opts pubsub.Options) *pubsub.Source {
	t.Helper()
	if opts.Now == nil {
		opts.Now = e.clock.Now
	}
	if opts.Log == nil {
		opts.Log = quiet()
	}
	s, err := pubsub.New(e.client, e.sf, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pullAll opens s with cursors and reads every stream to its end, returning the records per key
// and the counters and notes the source reported.
type pulled struct {
	records map[string][]source.Record
	errs    map[string]error
	counts  map[string]int64
	notes   []string
}

func pullAll(t *testing.T, s *pubsub.Source, cursors map[string]json.RawMessage) pulled {
	t.Helper()
	return pullUntil(t, s, cursors, time.Now().Add(50*time.Second))
}

// pullUntil is pullAll with the run's deadline.
func pullUntil(t *testing.T, s *pubsub.Source, cursors map[string]json.RawMessage, deadline time.Time) pulled {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := pulled{records: map[string][]source.Record{}, errs: map[string]error{}, counts: map[string]int64{}}
	var mu sync.Mutex
	streams, err := s.Open(ctx, source.OpenRequest{
		Cursors: cursors, Budget: source.Budget{Deadline: deadline}, Log: quiet(),
		Count: func(ev string, n int64) { mu.Lock(); p.counts[ev] += n; mu.Unlock() },
		Note:  func(n string) { mu.Lock(); p.notes = append(p.notes, n); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range streams {
		for {
			rec := sourcetest.Stale() // Next must overwrite it whole
			err := st.Next(ctx, &rec)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				p.errs[st.Key()] = err
				break
			}
			if left := sourcetest.LeftStale(rec); len(left) > 0 {
				t.Errorf("%s: Next left %v of the record it was given", st.Key(), left)
			}
			p.records[st.Key()] = append(p.records[st.Key()], rec)
		}
		_ = st.Close()
	}
	return p
}

// lastCursor is the cursor of a key's last record (what the job would commit).
func (p pulled) lastCursor(key string) json.RawMessage {
	recs := p.records[key]
	if len(recs) == 0 {
		return nil
	}
	return recs[len(recs)-1].Cursor.JSON()
}

// receiver is a strict simulated Loki and a client pushing to it.
func receiver(t *testing.T) (*simloki.Server, *loki.Client) {
	t.Helper()
	srv := simloki.New(simloki.Options{})
	c, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, Transport: srv.Transport(),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// runJob performs one invocation with the source.
func runJob(t *testing.T, coord *jobtest.Coordinator, sink *loki.Client, src source.Source) *job.Report {
	t.Helper()
	return job.Run(context.Background(), job.Deps{Coordinator: coord, Sink: sink, Bindings: []job.Binding{{Source: src}}},
		job.Options{MaxDuration: time.Minute, PushReserve: 5 * time.Second, CommitReserve: 5 * time.Second, ReleaseReserve: time.Second, Log: quiet()})
}

// storedCursor reads a key's stored cursor.
func storedCursor(t *testing.T, coord *jobtest.Coordinator, key string) (pubsub.Cursor, bool) {
	t.Helper()
	c, _, ok, err := pubsub.DecodeCursor(coord.Stored(t)[key])
	if err != nil {
		t.Fatal(err)
	}
	return c, ok
}
