// Package sourcetest holds a deterministic Source for tests of the job: every key yields records
// numbered 1, 2, 3, … whose line names the key and the number, so a test can check that no
// record is lost, count duplicates, and verify that no cursor ever moves backwards.
package sourcetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// Numbered is a Source whose keys yield records 1..Total. Safe for concurrent Opens.
type Numbered struct {
	// SourceName is the name reported (default "numbered").
	SourceName string
	// Totals is the number of records of each key; the map may be grown between runs to
	// simulate new data (use SetTotal while a run may be open).
	Totals map[string]int
	// Base is the timestamp of record 0; record n is Base + n ms.
	Base time.Time
	// Stamp, when set, gives the timestamp of record n of key instead (records out of time
	// order: late files, backfills).
	Stamp func(key string, n int) time.Time
	// NoMetadata leaves out the structured metadata field n (a receiver without it).
	NoMetadata bool
	// LineBytes pads each line to at least this size.
	LineBytes int
	// FailAt makes Next of key return an error instead of record n.
	FailAt map[string]int
	// WaitAt makes Next of key return an error wrapping source.ErrWaiting instead of record n:
	// the key waits for a later run, which ships n once WaitAt no longer names it.
	WaitAt map[string]int
	// SkipEvery makes every n-th record a Skip record (no entry).
	SkipEvery int
	// Delay is slept before each record (respecting the context).
	Delay time.Duration
	// Labels, when set, gives further stream labels of record n of key (promoted fields).
	Labels func(key string, n int) []loki.Label
	// Shaped writes each line (the same JSON) and its metadata with a shape.Plan, as the real
	// sources do: into line memory the job releases and later rows reuse (see ChunksReused).
	Shaped bool

	mu     sync.Mutex
	opens  int
	shaper *shape.Shaper
	plan   *shape.Plan // one for every key (the job pulls them in one goroutine), so that
	// a key's line memory is shared with the others' and released with theirs
}

// ChunksReused is how many chunks of line memory the Shaped lines reused (shape.Shaper.
// ChunksReused): more than zero once the job released settled entries.
func (s *Numbered) ChunksReused() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shaper == nil {
		return 0
	}
	return s.shaper.ChunksReused()
}

// Cursor is the Numbered source's cursor: the number of the last record done.
type Cursor struct {
	V int `json:"v"`
	N int `json:"n"`
}

// EncodeCursor returns the cursor value for record n.
func EncodeCursor(n int) json.RawMessage {
	b, _ := json.Marshal(Cursor{V: 1, N: n})
	return b
}

// DecodeCursor returns the record number of a stored cursor (0 when absent).
func DecodeCursor(raw json.RawMessage) (int, error) {
	var c Cursor
	ok, err := source.DecodeCursor(raw, 1, &c)
	if err != nil || !ok {
		return 0, err
	}
	return c.N, nil
}

// ParseLine returns the key and number of a line written by Numbered.
func ParseLine(line string) (key string, n int, ok bool) {
	var v struct {
		Key string `json:"key"`
		N   int    `json:"n"`
	}
	if json.Unmarshal([]byte(line), &v) != nil || v.Key == "" {
		return "", 0, false
	}
	return v.Key, v.N, true
}

// SetTotal changes the number of records of key.
func (s *Numbered) SetTotal(key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Totals == nil {
		s.Totals = map[string]int{}
	}
	s.Totals[key] = n
}

// Opens counts how often the source was opened.
func (s *Numbered) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Name implements source.Source.
func (s *Numbered) Name() string {
	if s.SourceName == "" {
		return "numbered"
	}
	return s.SourceName
}

// Calls implements source.Source: Numbered calls nothing.
func (s *Numbered) Calls() map[string]int64 { return nil }

// CursorTime implements source.Source: the timestamp of the cursor's record.
func (s *Numbered) CursorTime(key string, raw json.RawMessage) (time.Time, error) {
	s.mu.Lock()
	_, mine := s.Totals[key]
	s.mu.Unlock()
	if !mine {
		return time.Time{}, fmt.Errorf("%w: %q", source.ErrNotMyKey, key)
	}
	n, err := DecodeCursor(raw)
	if err != nil || n == 0 {
		return time.Time{}, err
	}
	if s.Stamp != nil {
		return s.Stamp(key, n), nil
	}
	return s.Base.Add(time.Duration(n) * time.Millisecond), nil
}

// Open implements source.Source.
func (s *Numbered) Open(_ context.Context, req source.OpenRequest) ([]source.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opens++
	var out []source.Stream
	keys := make([]string, 0, len(s.Totals))
	for k := range s.Totals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		from, err := DecodeCursor(req.Cursors[k])
		if err != nil {
			req.Log.Warn("garbage cursor; starting from 0", "key", k, "err", err)
			req.Count("cursor_reset", 1)
			from = 0
		}
		fail := 0
		if s.FailAt != nil {
			fail = s.FailAt[k]
		}
		st := &stream{src: s, key: k, next: from + 1, total: s.Totals[k], failAt: fail, waitAt: s.WaitAt[k]}
		if s.Shaped {
			if s.shaper == nil {
				sh, err := shape.New(shape.Options{Metadata: []string{"n"}})
				if err != nil {
					return nil, err
				}
				s.shaper = sh
				s.plan = sh.Plan(shape.Schema{Source: s.Name(), Type: "numbered", Fields: []string{"key", "n", "pad"}})
			}
			st.plan = s.plan
		}
		out = append(out, st)
	}
	return out, nil
}

type stream struct {
	src    *Numbered
	key    string
	next   int
	total  int
	failAt int
	waitAt int
	plan   *shape.Plan // Shaped
	rec    shape.Record
}

func (st *stream) Key() string { return st.key }

// Next implements source.Stream.
func (st *stream) Next(ctx context.Context, rec *source.Record) error {
	r, err := st.nextRecord(ctx)
	return source.Fill(rec, r, err)
}

// nextRecord returns the next record, for Next to fill in.
func (st *stream) nextRecord(ctx context.Context) (source.Record, error) {
	if err := ctx.Err(); err != nil {
		return source.Record{}, err
	}
	if st.next > st.total {
		return source.Record{}, io.EOF
	}
	n := st.next
	if n == st.failAt {
		return source.Record{}, fmt.Errorf("numbered: injected failure at %s #%d", st.key, n)
	}
	if n == st.waitAt {
		return source.Record{}, fmt.Errorf("%w: %s #%d is not ready yet", source.ErrWaiting, st.key, n)
	}
	if d := st.src.Delay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return source.Record{}, ctx.Err()
		case <-t.C:
		}
	}
	st.next++
	rec := source.Record{Cursor: source.CursorJSON(EncodeCursor(n))}
	if st.src.SkipEvery > 0 && n%st.src.SkipEvery == 0 {
		rec.Skip, rec.SkipReason = true, "skip_every"
		return rec, nil
	}
	line := `{"key":` + strconv.Quote(st.key) + `,"n":` + strconv.Itoa(n) + `}`
	var padding *string // the pad member's value, when the line has one
	if pad := st.src.LineBytes - len(line); pad > 0 {
		p := strings.Repeat("x", max(0, pad-9))
		line, padding = line[:len(line)-1]+`,"pad":"`+p+`"}`, &p
	}
	ts := st.src.Base.Add(time.Duration(n) * time.Millisecond)
	if st.src.Stamp != nil {
		ts = st.src.Stamp(st.key, n)
	}
	pairs := []loki.Label{{Name: "job", Value: "sf2loki"}, {Name: "source", Value: st.src.Name()}, {Name: "event_type", Value: st.key}}
	if st.src.Labels != nil {
		pairs = append(pairs, st.src.Labels(st.key, n)...)
	}
	rec.Entry = loki.Entry{
		Timestamp: ts,
		Labels:    loki.NewLabels(pairs...),
		Line:      line,
		Metadata:  []loki.Label{{Name: "n", Value: strconv.Itoa(n)}},
	}
	if st.plan != nil {
		st.shape(&rec, n, line, padding)
	}
	if st.src.NoMetadata {
		rec.Entry.Metadata = nil
	}
	return rec, nil
}

// shape writes the record's line and metadata again with the stream's plan: the same bytes, in
// line memory the job releases.
func (st *stream) shape(rec *source.Record, n int, line string, padding *string) {
	r := &st.rec
	r.Reset()
	r.Type, r.Time = st.key, rec.Entry.Timestamp
	r.AppendString("key", shape.String, st.key)
	r.AppendString("n", shape.Number, strconv.Itoa(n))
	if padding != nil {
		r.AppendString("pad", shape.String, *padding)
	}
	e, _ := st.plan.Shape(r)
	if e.Line != line {
		panic(fmt.Sprintf("sourcetest: shaped line %q differs from %q", e.Line, line))
	}
	rec.Entry.Line, rec.Entry.Metadata, rec.Lines = e.Line, e.Metadata, st.plan.Lines()
}

func (st *stream) Close() error { return nil }
