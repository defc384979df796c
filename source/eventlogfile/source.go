package eventlogfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// Name is the source's name: the source label and the first part of its checkpoint keys.
const Name = "eventlogfile"

// Key returns the checkpoint key of an event type: "eventlogfile:<EventType>" (the Python
// original's key, so its state carries over). The interval is not part of the key: a
// configuration ships one interval, and a cursor keeps its keyset meaning across a change of
// interval. The job prefixes "org=<name>:" in multi-org configurations; sources never see it.
func Key(eventType string) string { return Name + ":" + eventType }

// Intervals of EventLogFile.
const (
	IntervalHourly = "Hourly"
	IntervalDaily  = "Daily"
)

// Defaults of Options.
const (
	DefaultInterval        = IntervalHourly
	DefaultLookback        = 24 * time.Hour
	DefaultSettleWindow    = 5 * time.Minute
	DefaultDownloadMaxAge  = 24 * time.Hour
	DefaultPageSize        = 1000
	DefaultTimestampColumn = "TIMESTAMP_DERIVED"
	DefaultMaxRowBytes     = 8 << 20
	// ExtraField holds the cells of a ragged row beyond the header, joined by commas.
	ExtraField = "_extra"
)

// Options configures the source. Zero values take the documented defaults.
type Options struct {
	// Client talks to the org. Required.
	Client *salesforce.Client
	// Shaper turns rows into entries. Required.
	Shaper *shape.Shaper
	// Counter counts the source's Salesforce requests (Source.Calls, the run report); nil means
	// a counter of the source's own.
	Counter *salesforce.Counter
	// Interval is IntervalHourly (default) or IntervalDaily.
	Interval string
	// EventTypes are the types to ship; shape.Wildcard ("*") discovers every type the org
	// produces for the interval (one GROUP BY query per run), minus Exclude and minus types whose
	// category is in OwnedCategories. Explicit names are always shipped. Required.
	EventTypes []string
	// Exclude lists types discovery leaves out.
	Exclude []string
	// OwnedCategories are event categories other sources ship (shape.Owned); discovery skips
	// types in them.
	OwnedCategories []string
	// Lookback is how far back (by CreatedDate) a type without a cursor starts; default 24h.
	Lookback time.Duration
	// Start, when set, is where (by CreatedDate) a type without a usable cursor starts, instead
	// of now − Lookback. A stored cursor always wins.
	Start time.Time
	// SettleWindow holds back files created less than this long ago on Salesforce's clock (a
	// file may be listed before it is completely written); 0 means DefaultSettleWindow (5m),
	// negative means none.
	SettleWindow time.Duration
	// DownloadMaxAge: a file whose download (or CSV) keeps failing is abandoned once its
	// CreatedDate is older than this (error log, counter file_abandoned); younger, its type stops
	// at it for the run. Default 24h.
	DownloadMaxAge time.Duration
	// PageSize is the listing's LIMIT (default 1000, at most 2000).
	PageSize int
	// TimestampColumn is the CSV column with each row's time (default TIMESTAMP_DERIVED); then
	// TIMESTAMP, then the file's LogDate.
	TimestampColumn string
	// StringValues writes every value as a JSON string; by default Number and Boolean columns
	// (per LogFileFieldTypes) are written as JSON numbers and booleans when they parse as such.
	StringValues bool
	// MaxRowBytes caps one CSV row (default 8 MiB); a longer row is skipped and counted.
	MaxRowBytes int
	// OrgID is the sf_org_id label; empty means Client.OrgID.
	OrgID string
	// Labels are further stream labels of every entry (the org label in multi-org setups).
	Labels []loki.Label
	// Log receives the source's messages besides OpenRequest.Log (nil = slog.Default()); the
	// request's logger is used when the job provides one.
	Log *slog.Logger
	// Now is the local clock (nil = time.Now); Salesforce's clock is derived with the client's
	// measured offset.
	Now func() time.Time
	// Window, when set, restricts the source to a window of event time under its own keys (a
	// backfill).
	Window *Window
}

// ErrOptions marks invalid Options.
var ErrOptions = errors.New("eventlogfile: invalid options")

// Source is the EventLogFile source. Build one per invocation with New.
type Source struct {
	opts Options
}

// New validates opts and returns the source.
func New(opts Options) (*Source, error) {
	if opts.Client == nil || opts.Shaper == nil {
		return nil, fmt.Errorf("%w: Client and Shaper are required", ErrOptions)
	}
	if opts.Interval == "" {
		opts.Interval = DefaultInterval
	}
	if opts.Interval != IntervalHourly && opts.Interval != IntervalDaily {
		return nil, fmt.Errorf("%w: interval %q is not Hourly or Daily", ErrOptions, opts.Interval)
	}
	if len(opts.EventTypes) == 0 {
		return nil, fmt.Errorf("%w: no event types (list them, or * to discover)", ErrOptions)
	}
	for name, list := range map[string][]string{"event_types": opts.EventTypes, "exclude": opts.Exclude} {
		for _, t := range list {
			if t == shape.Wildcard && name == "event_types" {
				continue
			}
			if err := salesforce.ValidateIdentifier(t); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrOptions, name, err)
			}
		}
	}
	if opts.Lookback <= 0 {
		opts.Lookback = DefaultLookback
	}
	switch {
	case opts.SettleWindow == 0:
		opts.SettleWindow = DefaultSettleWindow
	case opts.SettleWindow < 0:
		opts.SettleWindow = 0
	}
	if opts.DownloadMaxAge <= 0 {
		opts.DownloadMaxAge = DefaultDownloadMaxAge
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	opts.PageSize = min(opts.PageSize, 2000)
	if opts.TimestampColumn == "" {
		opts.TimestampColumn = DefaultTimestampColumn
	}
	if opts.MaxRowBytes <= 0 {
		opts.MaxRowBytes = DefaultMaxRowBytes
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Counter == nil {
		opts.Counter = &salesforce.Counter{}
	}
	return &Source{opts: opts}, nil
}

// Calls returns the Salesforce requests the source made so far, by kind (for the run report).
func (s *Source) Calls() map[string]int64 { return s.opts.Counter.ByKind() }

// CursorTime implements source.Source: the CreatedDate of the file the cursor stands at.
func (s *Source) CursorTime(key string, raw json.RawMessage) (time.Time, error) {
	prefix := s.key("")
	typ, ok := strings.CutPrefix(key, prefix)
	if !ok || salesforce.ValidateIdentifier(typ) != nil {
		return time.Time{}, fmt.Errorf("%w: %q is not %s<EventType>", source.ErrNotMyKey, key, prefix)
	}
	if !slices.Contains(s.opts.EventTypes, shape.Wildcard) && !slices.ContainsFunc(s.opts.EventTypes, func(t string) bool { return strings.EqualFold(t, typ) }) {
		return time.Time{}, fmt.Errorf("%w: %s is not among the event types %v", source.ErrNotMyKey, typ, s.opts.EventTypes)
	}
	c, _, ok, err := decodeCursor(raw)
	if err != nil || !ok {
		return time.Time{}, err
	}
	return c.created, nil
}

// Name implements source.Source.
func (s *Source) Name() string { return Name }

// ctx attaches the request counter.
func (s *Source) ctx(ctx context.Context) context.Context {
	if s.opts.Counter != nil {
		return salesforce.WithCounter(ctx, s.opts.Counter)
	}
	return ctx
}

// sfNow is the current time on Salesforce's clock: the local clock plus the offset measured from
// response Date headers when it exceeds 30 s.
func (s *Source) sfNow() time.Time {
	now := s.opts.Now()
	if off, ok := s.opts.Client.ServerClockOffset(); ok && (off > 30*time.Second || off < -30*time.Second) {
		now = now.Add(off)
	}
	return now.UTC()
}

// Open implements source.Source: it resolves the event types (discovery for *) and returns one
// stream per type, sorted by type. No file is listed until a stream is read.
func (s *Source) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	ctx = s.ctx(ctx)
	log := req.Log
	if log == nil {
		log = s.opts.Log
	}
	count := req.Count
	if count == nil {
		count = func(string, int64) {}
	}
	types, err := s.eventTypes(ctx, log, count)
	if err != nil {
		return nil, err
	}
	orgID := s.opts.OrgID
	if orgID == "" {
		if orgID, err = s.opts.Client.OrgID(ctx); err != nil {
			return nil, fmt.Errorf("eventlogfile: org id: %w", err)
		}
	}
	labels := append([]loki.Label{{Name: "sf_org_id", Value: orgID}}, s.opts.Labels...)
	now := s.sfNow()
	var out []source.Stream
	for _, t := range types {
		key := s.key(t)
		st := &stream{src: s, typ: t, key: key, log: log.With("key", key), count: count, labels: labels}
		c, skip, ok, err := decodeCursor(req.Cursors[key])
		switch {
		case err != nil:
			st.log.Warn("stored cursor is unusable; starting from the configured start or lookback", "start", s.opts.Start, "lookback", s.opts.Lookback, "err", err)
			count("cursor_reset", 1)
		case ok:
			st.cur, st.has, st.skipIDs, st.skipAt = c, true, skip, c.Created
		}
		if !st.has {
			since := now.Add(-s.opts.Lookback)
			if !s.opts.Start.IsZero() {
				since = s.opts.Start
			}
			st.cur = Cursor{V: cursorVersion, Created: salesforce.FormatDateTime(since), created: since}
		}
		if w := s.opts.Window; w != nil {
			out = append(out, &windowStream{stream: st, w: w, prog: w.Progress, cov: w.Progress.stream()})
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// key is the checkpoint key of an event type: Key(type), under the window's prefix if any.
func (s *Source) key(eventType string) string {
	if w := s.opts.Window; w != nil {
		return w.KeyPrefix + Key(eventType)
	}
	return Key(eventType)
}

// eventTypes resolves the configured types: explicit names plus, for *, the discovered ones.
func (s *Source) eventTypes(ctx context.Context, log *slog.Logger, count func(string, int64)) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(t string) {
		if k := strings.ToLower(t); !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	wildcard := false
	for _, t := range s.opts.EventTypes {
		if t == shape.Wildcard {
			wildcard = true
			continue
		}
		add(t)
	}
	if wildcard {
		found, err := s.discover(ctx)
		switch {
		case err != nil && (len(out) == 0 || errors.Is(err, salesforce.ErrRequestLimit) || ctx.Err() != nil):
			return nil, fmt.Errorf("eventlogfile: discovering event types: %w", err)
		case err != nil:
			log.Warn("event type discovery failed; shipping the explicitly listed types only", "err", err)
			count("discovery_failed", 1)
		}
		for _, t := range found {
			switch {
			case slices.ContainsFunc(s.opts.Exclude, func(x string) bool { return strings.EqualFold(x, t) }):
			case slices.Contains(s.opts.OwnedCategories, s.opts.Shaper.Category(t)):
				if !seen[strings.ToLower(t)] {
					log.Info("discovered event type skipped: its category is shipped by another source", "event_type", t, "category", s.opts.Shaper.Category(t))
				}
			default:
				add(t)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(a, b) })
	return out, nil
}

// discover lists the event types the org has files of for the interval (one query).
func (s *Source) discover(ctx context.Context) ([]string, error) {
	q := "SELECT EventType FROM EventLogFile WHERE Interval = " + salesforce.QuoteString(s.opts.Interval) + " GROUP BY EventType"
	var out []string
	for rec, err := range s.opts.Client.Records(ctx, q) {
		if err != nil {
			return nil, err
		}
		t, ok := rec.String("EventType")
		if !ok || salesforce.ValidateIdentifier(t) != nil {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}
