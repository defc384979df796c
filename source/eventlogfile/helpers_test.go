package eventlogfile

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/sourcetest"
)

var epoch = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)

// logRecord is one captured log line.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logCapture is a slog handler keeping every record.
type logCapture struct {
	mu      *sync.Mutex
	records *[]logRecord
	attrs   []slog.Attr
}

func newLogCapture() *logCapture {
	return &logCapture{mu: &sync.Mutex{}, records: &[]logRecord{}}
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}
func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clone(h.attrs), as...)
	return &c
}
func (h *logCapture) WithGroup(string) slog.Handler { return h }

func (h *logCapture) find(level slog.Level, substr string) *logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range *h.records {
		r := &(*h.records)[i]
		if r.level == level && strings.Contains(r.msg, substr) {
			return r
		}
	}
	return nil
}

// env is a simulated org with a client and a default shaper.
type env struct {
	t      testing.TB
	clock  *sftest.Clock
	org    *sftest.Org
	client *salesforce.Client
	shaper *shape.Shaper
	logs   *logCapture
}

func newEnv(t testing.TB, opts simsf.Options) *env {
	t.Helper()
	c := sftest.NewClock(epoch)
	opts.Now = c.Now
	org := sftest.Start(t, opts)
	e := &env{t: t, clock: c, org: org, logs: newLogCapture()}
	e.client = org.Client(t, func(o *salesforce.Options) { o.MaxAttempts, o.RetryWaitMax = 2, 2*time.Millisecond })
	sh, err := shape.New(shape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.shaper = sh
	return e
}

// addFile adds an EventLogFile and returns its id.
func (e *env) addFile(spec simsf.EventLogFileSpec) string {
	e.t.Helper()
	if spec.EventType == "" {
		spec.EventType = "Login"
	}
	id, err := e.org.AddEventLogFile(spec)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// source builds a source with the env's client, shaper, clock and log.
func (e *env) source(opts Options) *Source {
	e.t.Helper()
	opts.Client, opts.Now = e.client, e.clock.Now
	if opts.Shaper == nil {
		opts.Shaper = e.shaper
	}
	if opts.Interval == "" {
		opts.Interval = IntervalDaily
	}
	if len(opts.EventTypes) == 0 {
		opts.EventTypes = []string{"Login"}
	}
	s, err := New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// runResult is what one simulated job run saw.
type runResult struct {
	entries int
	skips   map[string]int
	errs    map[string]error
	waiting map[string]error // keys that stopped with source.ErrWaiting, and the error
	counts  map[string]int64
	notes   []string
}

// run drives src like the job: opens with the cursors, pulls the streams round-robin (quantum
// records per turn) until budget non-skip records or every stream ends, and stores in cursors
// the cursor of each key's last record (everything pulled counts as pushed). each sees every
// record in pull order.
func (e *env) run(src *Source, cursors map[string]json.RawMessage, budget int, each func(key string, rec source.Record)) runResult {
	e.t.Helper()
	res := runResult{skips: map[string]int{}, errs: map[string]error{}, waiting: map[string]error{}, counts: map[string]int64{}}
	var mu sync.Mutex
	ctx := context.Background()
	streams, err := src.Open(ctx, source.OpenRequest{
		Cursors: maps(cursors), Budget: source.Budget{MaxRecords: budget},
		Log:   slog.New(e.logs),
		Count: func(ev string, n int64) { mu.Lock(); res.counts[ev] += n; mu.Unlock() },
		Note:  func(s string) { res.notes = append(res.notes, s) },
	})
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	defer func() {
		for _, s := range streams {
			_ = s.Close()
		}
	}()
	const quantum = 1000
	active := streams
	for len(active) > 0 {
		var next []source.Stream
		for _, s := range active {
			done := false
			for range quantum {
				rec := sourcetest.Stale() // Next must overwrite it whole
				err := s.Next(ctx, &rec)
				if errors.Is(err, io.EOF) {
					done = true
					break
				}
				if errors.Is(err, source.ErrWaiting) {
					res.waiting[s.Key()] = err
					done = true
					break
				}
				if err != nil {
					res.errs[s.Key()] = err
					done = true
					break
				}
				if left := sourcetest.LeftStale(rec); len(left) > 0 {
					e.t.Errorf("%s: Next left %v of the record it was given", s.Key(), left)
				}
				cursors[s.Key()] = rec.Cursor.JSON()
				if each != nil {
					each(s.Key(), rec)
				}
				if rec.Skip {
					res.skips[rec.SkipReason]++
					continue
				}
				res.entries++
				if res.entries >= budget {
					return res
				}
			}
			if !done {
				next = append(next, s)
			}
		}
		active = next
	}
	return res
}

func maps(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// decoded returns the stored cursor of key.
func decoded(t testing.TB, cursors map[string]json.RawMessage, key string) Cursor {
	t.Helper()
	c, _, ok, err := decodeCursor(cursors[key])
	if err != nil || !ok {
		t.Fatalf("cursor of %s: %s (%v)", key, cursors[key], err)
	}
	return c
}

// requestIDs returns the REQUEST_ID column of a file's current content, in row order.
func (e *env) requestIDs(id string) []string {
	e.t.Helper()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(e.org.EventLogFileContent(id, pw)) }()
	c := newCSVReader(pr, 1<<20)
	if err := c.Read(); err != nil {
		e.t.Fatal(err)
	}
	col := -1
	for i := range c.NumFields() {
		if string(c.Field(i)) == "REQUEST_ID" {
			col = i
		}
	}
	var out []string
	for {
		err := c.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, string(c.Field(col)))
	}
}

// requestID extracts REQUEST_ID from a JSON line without decoding all of it.
func requestID(line string) string {
	_, rest, ok := strings.Cut(line, `"REQUEST_ID":"`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
