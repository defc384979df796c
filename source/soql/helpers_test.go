package soql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/soql"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

var epoch = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	org   *sftest.Org
	clock *sftest.Clock
}

func newEnv(t *testing.T, opts simsf.Options) *env {
	t.Helper()
	c := sftest.NewClock(epoch)
	opts.Now = c.Now
	if opts.Seed == 0 {
		opts.Seed = 11
	}
	return &env{org: sftest.Start(t, opts), clock: c}
}

// client returns a new client, as each invocation builds one.
func (e *env) client(t *testing.T) *salesforce.Client {
	t.Helper()
	return e.org.Client(t)
}

// result is what one simulated run produced.
type result struct {
	records []source.Record
	keys    []string // key of each record
	cursors map[string]json.RawMessage
	events  map[string]int64
	errs    map[string]error
	calls   map[string]int64
	logs    *bytes.Buffer // the source's log, as text
}

// entries returns the non-skip records.
func (r *result) entries() []source.Record {
	var out []source.Record
	for _, rec := range r.records {
		if !rec.Skip {
			out = append(out, rec)
		}
	}
	return out
}

// run opens a source over cursors and pulls round-robin like the job, until every stream is
// caught up or maxRecords entries were pulled (0 = no limit). The returned cursors are the
// inputs updated with the last record of each key.
func (e *env) run(t *testing.T, opts soql.Options, cursors map[string]json.RawMessage, maxRecords int) *result {
	t.Helper()
	if opts.Client == nil {
		opts.Client = e.client(t)
	}
	opts.Now = e.clock.Now
	src, err := soql.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	res := &result{cursors: map[string]json.RawMessage{}, events: map[string]int64{}, errs: map[string]error{}, logs: &bytes.Buffer{}}
	for k, v := range cursors {
		res.cursors[k] = v
	}
	var mu sync.Mutex
	streams, err := src.Open(context.Background(), source.OpenRequest{
		Cursors: cursors,
		Budget:  source.Budget{MaxRecords: maxRecords},
		Log:     slog.New(slog.NewTextHandler(res.logs, nil)),
		Count: func(ev string, n int64) {
			mu.Lock()
			defer mu.Unlock()
			res.events[ev] += n
		},
		Note: func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every position handed out must encode later exactly as it did when handed out: the job
	// encodes a lazy position only when it commits it, long after the stream moved on.
	type handedOut struct {
		key  string
		pos  source.Position
		json json.RawMessage
	}
	var handed []handedOut
	defer func() {
		for i, h := range handed {
			if got := h.pos.JSON(); !bytes.Equal(got, h.json) {
				t.Errorf("%s: the cursor of record %d encodes differently after the stream moved on:\n now  %s\n then %s", h.key, i, got, h.json)
				return
			}
		}
	}()
	pulled := 0
	active := streams
	for len(active) > 0 {
		next := active[:0]
		for _, s := range active {
			done := false
			for range 100 {
				rec := sourcetest.Stale() // Next must overwrite it whole
				err := s.Next(context.Background(), &rec)
				if errors.Is(err, io.EOF) {
					done = true
					break
				}
				if err != nil {
					res.errs[s.Key()] = err
					done = true
					break
				}
				if left := sourcetest.LeftStale(rec); len(left) > 0 {
					t.Errorf("%s: Next left %v of the record it was given", s.Key(), left)
				}
				res.records = append(res.records, rec)
				res.keys = append(res.keys, s.Key())
				res.cursors[s.Key()] = rec.Cursor.JSON()
				handed = append(handed, handedOut{key: s.Key(), pos: rec.Cursor, json: res.cursors[s.Key()]})
				if !rec.Skip {
					pulled++
				}
				if maxRecords > 0 && pulled >= maxRecords {
					res.calls = src.Calls()
					return res
				}
			}
			if done {
				_ = s.Close()
				continue
			}
			next = append(next, s)
		}
		active = next
	}
	res.calls = src.Calls()
	return res
}

// lineID returns the Id (or EventIdentifier) of an entry's JSON line.
func lineField(t *testing.T, rec source.Record, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(rec.Entry.Line), &m); err != nil {
		t.Fatalf("line is not JSON: %v: %q", err, rec.Entry.Line)
	}
	s, _ := m[field].(string)
	return s
}

func noErrors(t *testing.T, r *result) {
	t.Helper()
	for k, err := range r.errs {
		t.Fatalf("%s: %v", k, err)
	}
}
