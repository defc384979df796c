// Package source is the contract between the job and the things that read Salesforce: a Source
// opens one Stream per checkpoint key from the stored cursors, and the job pulls records from the
// streams round-robin, pushes them and commits, per key, the cursor of the last record in the
// contiguous pushed prefix. Sub-packages implement the sources (eventlogfile, soql, apexlog,
// pubsub).
package source

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
)

// Record is one item a stream yields, in key order.
type Record struct {
	// Entry is the shaped Loki entry. Its Ref is assigned by the job.
	Entry loki.Entry
	// Cursor is the key's position after this record: once this record and every record before
	// it on the key are pushed (or skipped), its JSON is what the job commits for the key.
	// It is versioned JSON produced by the source; the job treats it as opaque.
	Cursor Position
	// Skip marks a record that only advances the cursor: a row dropped by a transform, sampled out
	// or filtered, a file finished with no rows, a keepalive. Nothing is pushed for it, but it
	// is still committed only behind every earlier record of its key.
	Skip bool
	// SkipReason names why (drop_row rule, sampled, keepalive, ...) for the run report.
	SkipReason string
	// Lines is the memory the entry's line and metadata values lie in, when the source's plan
	// shaped them there (zero otherwise). The job releases it once the entry's push is settled
	// and nothing refers to the entry any more, so that later rows are shaped into it.
	Lines shape.Lines
}

// Stream yields the records of one checkpoint key in order. It is used by one goroutine.
type Stream interface {
	// Key is the checkpoint key, without any org prefix (e.g. "eventlogfile:Login").
	Key() string
	// Next fills rec with the next record, overwriting it whole. io.EOF means the key is caught
	// up for this run. An error wrapping ErrWaiting ends the key for this run with more to ship
	// (see ErrWaiting). Any other error ends the key for this run; the job reports it and commits
	// what was pushed before. On an error rec holds nothing to use. The record is filled in
	// place, where its consumer keeps it, rather than returned: it is 152 bytes, and each copy
	// of it on the way costs more than its instructions (it is read back right after it was
	// written).
	Next(ctx context.Context, rec *Record) error
	// Close releases what the stream holds open (a download, a gRPC stream).
	Close() error
}

// Shape overwrites r whole with what p makes of sr: its entry and the line memory the entry lies
// in, or, when p drops or samples sr out, a skip with p's reason. The cursor is left for the
// source to set.
func (r *Record) Shape(p *shape.Plan, sr *shape.Record) {
	*r = Record{}
	if skip := p.ShapeTo(sr, &r.Entry); skip != "" {
		r.Skip, r.SkipReason = true, skip
		return
	}
	r.Lines = p.Lines()
}

// Fill ends Next for a stream that builds each record by value: it stores r in *rec when err is
// nil, and returns err.
func Fill(rec *Record, r Record, err error) error {
	if err == nil {
		*rec = r
	}
	return err
}

// Source opens the streams of one configured source for one invocation. A Source is built per
// invocation: nothing it holds survives into the next run.
type Source interface {
	// Name is the source's config name: eventlogfile, soql, apexlog, pubsub.
	Name() string
	// Open discovers the source's keys and returns one stream per key. It may call Salesforce
	// (listing queries, discovery); it must not read the cursors from anywhere but req.
	Open(ctx context.Context, req OpenRequest) ([]Stream, error)
	// Calls reports the Salesforce API calls made so far, by kind (for the run report).
	Calls() map[string]int64
	// CursorTime reads a stored cursor of one of the source's keys (without org prefix) and
	// returns the time position it stands for (zero when it names none). An error says the key
	// is not one this source reads, or its cursor is one it cannot use — the source would
	// restart that key from its lookback. Operators' edits are checked with it, and the
	// metrics read the committed cursors' times through it: a cursor's format is known to its
	// source only.
	CursorTime(key string, raw json.RawMessage) (time.Time, error)
}

// ErrNotMyKey is wrapped by CursorTime for a key the source does not read.
var ErrNotMyKey = errors.New("not a key of this source")

// EventType is the name part of a checkpoint key: keys are "<source>:<name>" (the EventLogFile
// type, the SOQL object, the Pub/Sub topic; ApexLog's one key is its source name), and a
// topic's /event/ or /data/ prefix is not part of its event type.
func EventType(key string) string {
	if _, rest, ok := strings.Cut(key, ":"); ok {
		key = rest
	}
	return key[strings.LastIndexByte(key, '/')+1:]
}

// OpenRequest is what the job gives a source for one invocation.
type OpenRequest struct {
	// Cursors holds the stored cursor of each of the source's keys (unprefixed). A key with no
	// entry starts from the source's configured lookback.
	Cursors map[string]json.RawMessage
	// Budget bounds the run; sources may use it to size queries (they need not enforce it: the
	// job stops pulling when it is spent).
	Budget Budget
	// Log receives the source's messages.
	Log *slog.Logger
	// Count records a named event (late_rows, cursor_reset, file_abandoned, ...) for the run
	// report and metrics. Never nil when the job calls Open.
	Count func(event string, n int64)
	// Note adds a sentence to the run report's notes (for what an operator must know, such as
	// "events may have been missed"). Never nil when the job calls Open.
	Note func(string)
}

// Budget bounds one invocation's pull.
type Budget struct {
	MaxRecords int
	MaxBytes   int64
	Deadline   time.Time
}

// ErrCursor marks a stored cursor the source cannot use. Sources do not return it from Open:
// they fall back to the lookback, log a warning and count "cursor_reset". It exists so that
// cursor decoders share one error to wrap.
var ErrCursor = errors.New("unusable cursor")

// Position is a record's cursor: either its JSON, or an encoder that writes the JSON only when
// the job needs it. A key's position is committed once per push, not once per record, so a source
// whose cursor is large (the SOQL overlap window's remembered ids) hands out lazy positions that
// share their state and encodes only the few that are committed. The zero Position is no cursor.
type Position struct {
	raw  json.RawMessage
	lazy CursorEncoder
}

// CursorEncoder writes a cursor's JSON on demand. Encoding must be deterministic and must not
// depend on anything that changes after the record was handed out: the job may encode a
// position long after the stream moved on, from another goroutine.
type CursorEncoder interface {
	EncodeCursor() json.RawMessage
}

// CursorJSON is the Position of an already encoded cursor.
func CursorJSON(raw json.RawMessage) Position { return Position{raw: raw} }

// LazyCursor is the Position that e encodes when the job commits it.
func LazyCursor(e CursorEncoder) Position { return Position{lazy: e} }

// JSON returns the cursor's stored form (nil for the zero Position).
func (p Position) JSON() json.RawMessage {
	if p.lazy != nil {
		return p.lazy.EncodeCursor()
	}
	return p.raw
}

// ErrWaiting ends a key for this run, as io.EOF does, when the key has more to ship that this
// run cannot ship: an EventLogFile whose body is shorter than its LogFileLength (it may still be
// being written) is held open until a later download, a key stopped at its own per-run cap.
// Nothing failed: the records handed out before are pushed and committed, and the outcome of a
// scheduled run is what it would be without it; but the run is not caught up, and the job adds
// the error's text, which names what waits and why, to the run report (notes, waiting). Wrap it
// with those details: fmt.Errorf("%w: file %s is held ...", source.ErrWaiting, id).
var ErrWaiting = errors.New("waits for a later run")

// ErrNeedsHuman marks a source error that no retry can fix and that must page someone (for
// example a Pub/Sub replay position lost under replay_lost: fail). The run ends with the
// integrity outcome (exit 7) and nothing more is committed for the key.
var ErrNeedsHuman = errors.New("needs a human")

// Cursor is the envelope every cursor value starts with: a version number, so a source can
// change its cursor format and still read (or deliberately reset) old values.
type Cursor struct {
	V int `json:"v"`
}

// DecodeCursor unmarshals raw into dst after checking the envelope version equals version. An
// empty raw value returns (false, nil): no cursor, start from lookback. Any other problem returns
// an error wrapping ErrCursor.
func DecodeCursor(raw json.RawMessage, version int, dst any) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var env Cursor
	if err := json.Unmarshal(raw, &env); err != nil {
		return false, errors.Join(ErrCursor, err)
	}
	if env.V != version {
		return false, errors.Join(ErrCursor, errors.New("cursor version "+itoa(env.V)+", want "+itoa(version)))
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, errors.Join(ErrCursor, err)
	}
	return true, nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
