package eventlogfile

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// SkipOutsideWindow is the skip reason of a row outside a Window's event time.
const SkipOutsideWindow = "outside_window"

// BackfillLabel is the stream label of entries shipped by a Window with OwnStreams: a
// backfill's own streams have their own heads, so its rows, hours or days behind what the
// live job shipped, are never refused as too far behind (docs/ordering.md).
var BackfillLabel = loki.Label{Name: "backfill", Value: "true"}

// Window restricts the source to a window of event time, under its own key namespace: what
// `sf2loki backfill` ships. Rows outside [Since, Until) are skipped (their cursor still moves),
// files created at or after StopAfter end the key (they cannot hold the window's events), and
// the keys are KeyPrefix + Key(type).
type Window struct {
	Since, Until time.Time
	// StopAfter is how far past the window, by CreatedDate, files are listed: a file is
	// written after the period it covers, sometimes hours late.
	StopAfter time.Time
	// KeyPrefix names the window's keys, so its cursors never mix with the live ones.
	KeyPrefix string
	// IngestTime stamps each entry with the time it is shipped and keeps its event time in
	// structured metadata (loki.EventTimeMetadata): for windows older than the receiver's
	// maximum sample age.
	IngestTime bool
	// OwnStreams adds BackfillLabel to every entry's stream labels.
	OwnStreams bool
	// Progress, when set, counts what the window read, for a progress display.
	Progress *WindowProgress
}

// WindowProgress counts what a Window read; safe for concurrent use.
type WindowProgress struct {
	Files   atomic.Int64 // files entered
	Rows    atomic.Int64 // rows inside the window, handed to the job
	Outside atomic.Int64 // rows outside the window, skipped
	Bytes   atomic.Int64 // CSV bytes read from the files' downloads

	since, until time.Time
	mu           sync.Mutex
	streams      []*atomic.Int64 // per key: the event time (unix ns) covered so far
}

// NewWindowProgress returns the progress of a window over [since, until).
func NewWindowProgress(since, until time.Time) *WindowProgress {
	return &WindowProgress{since: since, until: until}
}

func (p *WindowProgress) stream() *atomic.Int64 {
	v := &atomic.Int64{}
	if p == nil {
		return v
	}
	v.Store(p.since.UnixNano())
	p.mu.Lock()
	p.streams = append(p.streams, v)
	p.mu.Unlock()
	return v
}

// Fraction is how much of the window's event time every key has covered (the slowest one).
func (p *WindowProgress) Fraction() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.streams) == 0 {
		return 0
	}
	low := int64(math.MaxInt64)
	for _, s := range p.streams {
		low = min(low, s.Load())
	}
	span := float64(p.until.UnixNano() - p.since.UnixNano())
	return max(0, min(1, float64(low-p.since.UnixNano())/span))
}

// windowStream is one event type's stream inside a Window.
type windowStream struct {
	*stream
	w        *Window
	prog     *WindowProgress
	cov      *atomic.Int64
	lastFile string
	labels   map[string]loki.Labels // live label set -> the window's (OwnStreams)
}

func (s *windowStream) Next(ctx context.Context, rec *source.Record) error {
	if err := s.stream.Next(ctx, rec); err != nil {
		if errors.Is(err, io.EOF) {
			s.cov.Store(s.w.Until.UnixNano())
		}
		return err
	}
	// Every record handed out moved the stream's position past it (its cursor, not yet encoded).
	if c := s.cur; c.FileID != "" {
		if !c.created.Before(s.w.StopAfter) {
			// Created this long after the window ends, the file cannot hold its events; nor
			// can any later one. Not handed out, so its cursor is never committed.
			s.cov.Store(s.w.Until.UnixNano())
			return io.EOF
		}
		if c.FileID != s.lastFile {
			s.lastFile = c.FileID
			if s.prog != nil {
				s.prog.Files.Add(1)
			}
		}
	}
	if rec.Skip {
		return nil
	}
	t := rec.Entry.Timestamp
	if t.Before(s.w.Since) || !t.Before(s.w.Until) {
		if s.prog != nil {
			s.prog.Outside.Add(1)
		}
		*rec = source.Record{Skip: true, SkipReason: SkipOutsideWindow, Cursor: rec.Cursor}
		return nil
	}
	if s.prog != nil {
		s.prog.Rows.Add(1)
	}
	if t.UnixNano() > s.cov.Load() {
		s.cov.Store(t.UnixNano())
	}
	if s.w.OwnStreams {
		rec.Entry.Labels = s.own(rec.Entry.Labels)
	}
	if s.w.IngestTime {
		md := make([]loki.Label, 0, len(rec.Entry.Metadata)+1)
		md = append(md, rec.Entry.Metadata...)
		md = append(md, loki.Label{Name: loki.EventTimeMetadata, Value: t.UTC().Format(time.RFC3339Nano)})
		rec.Entry.Metadata = md
		rec.Entry.Timestamp = time.Now()
	}
	return nil
}

// own returns the window's label set for a live one, built once per stream.
func (s *windowStream) own(l loki.Labels) loki.Labels {
	if s.labels == nil {
		s.labels = map[string]loki.Labels{}
	}
	key := l.String()
	out, ok := s.labels[key]
	if !ok {
		out = l.With(BackfillLabel)
		s.labels[key] = out
	}
	return out
}
