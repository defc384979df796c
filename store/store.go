package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Options configures a Store. The zero value is usable: every zero field means its default.
type Options struct {
	// Host is recorded in every writer stamp. Default: os.Hostname().
	Host string
	// MaxBytes caps the encoded document size. Default (0): the backend's MaxSize. A write
	// above the cap fails with ErrTooLarge; above WarnFraction of it a warning is logged.
	MaxBytes int
	// WarnFraction of the size cap above which every write logs a warning. Default 0.8.
	WarnFraction float64
	// ReadAttempts bounds how often Read retries an unreachable backend. Default 3.
	ReadAttempts int
	// WriteAttempts bounds how often one Claim or Commit writes before giving up with
	// ErrUnavailable (each retry follows a re-read that proved the previous attempt did not
	// land). Default 6.
	WriteAttempts int
	// Backoff is the first pause between retries; it doubles up to 2s. Default 50ms.
	Backoff time.Duration
	// HistoryLen is how many claims the document's history keeps. Default 10.
	HistoryLen int
	// Now is the wall clock for stamps and timestamps. Default time.Now.
	Now func() time.Time
	// Logger receives warnings (size, recreated lease, migration). Default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.WarnFraction <= 0 || o.WarnFraction > 1 {
		o.WarnFraction = 0.8
	}
	if o.ReadAttempts <= 0 {
		o.ReadAttempts = 3
	}
	if o.WriteAttempts <= 0 {
		o.WriteAttempts = 6
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	if o.HistoryLen <= 0 {
		o.HistoryLen = 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Store runs the checkpoint protocol (Read, Claim, and Commit through the Writer that Claim
// returns) over one Backend.
type Store struct {
	b Backend
	o Options
}

// New returns a Store over b.
func New(b Backend, o Options) *Store {
	return &Store{b: b, o: o.withDefaults()}
}

// Backend returns the backend the store writes through.
func (s *Store) Backend() Backend { return s.b }

// Object names the document for messages.
func (s *Store) Object() string { return s.b.String() }

// Snapshot is one version of the document as read.
type Snapshot struct {
	Doc     *Document // nil when Absent
	Version Version   // empty when Absent
	Absent  bool
	Legacy  bool // a Python flat key map, converted; the first claim rewrites it as schema 2
	Size    int  // stored bytes
}

// Floor is the fence epoch of the snapshot (0 when absent or unfenced): the lowest epoch any
// new lease grant may build on.
func (s Snapshot) Floor() uint64 { return s.Doc.FenceEpoch() }

// Read returns the current document. It distinguishes absent (Snapshot.Absent), unreachable
// (ErrUnavailable, after ReadAttempts), corrupt (ErrCorrupt, never treated as absent) and
// configuration problems (ErrPermission, ErrNoLocation).
func (s *Store) Read(ctx context.Context) (Snapshot, error) {
	var last error
	for i := range s.o.ReadAttempts {
		if i > 0 {
			if err := s.sleep(ctx, i); err != nil {
				return Snapshot{}, fmt.Errorf("%w: reading %s: %w", ErrUnavailable, s.Object(), last)
			}
		}
		snap, err := s.readOnce(ctx)
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return snap, err
		}
		last = err
	}
	return Snapshot{}, last
}

func (s *Store) readOnce(ctx context.Context) (Snapshot, error) {
	data, v, err := s.b.Load(ctx)
	if errors.Is(err, ErrAbsent) {
		return Snapshot{Absent: true}, nil
	}
	if err == nil && s.sizeCap() > 0 && len(data) > s.sizeCap() {
		err = fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, len(data), s.sizeCap())
	}
	if errors.Is(err, ErrTooLarge) {
		return Snapshot{}, fmt.Errorf("%w: %s is over the document size limit and was not read (%w); it was left untouched. "+
			"Keep it aside as a backup (move or copy it away), then `sf2loki state import` a copy without the stale keys, "+
			"or let every source restart from its configured lookback", ErrIntegrity, s.Object(), err)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading %s: %w", s.Object(), err)
	}
	doc, legacy, err := Decode(s.Object(), data)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Doc: doc, Version: v, Legacy: legacy, Size: len(data)}, nil
}

// sleep waits the i-th backoff step or until ctx ends.
func (s *Store) sleep(ctx context.Context, i int) error {
	d := s.o.Backoff << min(i-1, 6)
	d = min(d, 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SizeLimit is the largest encoded document this store writes (doctor compares
// Snapshot.Size with it).
func (s *Store) SizeLimit() int { return s.sizeCap() }

// sizeCap is the effective document size limit.
func (s *Store) sizeCap() int {
	limit := s.b.MaxSize()
	if s.o.MaxBytes > 0 && (limit <= 0 || s.o.MaxBytes < limit) {
		limit = s.o.MaxBytes
	}
	return limit
}

// roomer is a backend whose object holds other data beside the document (the other keys of a
// ConfigMap): Room is the part of the limit they leave the document, and their size. The
// backend refuses a document past its room itself, with what takes the rest.
type roomer interface {
	Room() (limit, others int)
}

// Room is the largest document the store writes (0: no limit): the size cap, less what other
// data in the object take (as the backend last read them), and how much they take.
func (s *Store) Room() (limit, others int) {
	limit = s.sizeCap()
	if r, ok := s.b.(roomer); ok {
		room, o := r.Room()
		if limit <= 0 || room < limit {
			limit = room
		}
		others = o
	}
	return limit, others
}

// encode renders doc and applies the size guard.
func (s *Store) encode(doc *Document) ([]byte, error) {
	data, err := doc.Encode()
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", s.Object(), err)
	}
	limit := s.sizeCap()
	if limit > 0 {
		if len(data) > limit {
			return nil, fmt.Errorf("%w: %s would be %d bytes, the limit is %d; nothing was written "+
				"(remove stale keys with `sf2loki state delete`)", ErrTooLarge, s.Object(), len(data), limit)
		}
		warnAt, shared := s.Room()
		if float64(len(data)) > s.o.WarnFraction*float64(warnAt) {
			s.o.Logger.Warn("checkpoint document is approaching its size limit",
				"object", s.Object(), "bytes", len(data), "limit", warnAt, "shared_bytes", shared)
		}
	}
	return data, nil
}

// definite reports write errors that prove nothing was written and are not worth re-reading for.
func definite(err error) bool {
	return errors.Is(err, ErrPermission) || errors.Is(err, ErrNoLocation) || errors.Is(err, ErrTooLarge)
}
