// Package apexlog is the ApexLog source: Apex debug logs listed through the Tooling API and
// shipped one Loki entry per log, the body as the line and the log's metadata (Id, LogUser,
// Operation, Status, StartTime, …) as structured metadata.
//
// The key is "apexlog". Its cursor is versioned JSON,
//
//	{"v":1,"start_time":"…","last_id":"07L…","from_ts":"…","seen":"<base64url>","max_id":"07L…"}
//
// start_time and last_id are the last log shipped in (StartTime, Id) order; the other members
// are the overlap window's and the late-row probe's (package keyset; a cursor without them, as
// releases before them wrote it, resumes just after its position). Logs are listed with the
// keyset condition
//
//	WHERE [(LogUser.Username IN (…)) AND] (StartTime > X OR (StartTime = X AND Id > 'last'))
//	ORDER BY StartTime ASC, Id ASC
//
// so any number of logs sharing one StartTime is paged through exactly, and the user filter
// stays a separate conjunct. A missing or unusable cursor starts at now − Lookback (an unusable
// one is logged and counted as "cursor_reset").
//
// Salesforce writes a log when its transaction ends, but the listing follows StartTime, when
// it began: a long transaction's log becomes visible after the logs of shorter ones that
// started later were listed and shipped. Each run therefore lists again the logs of the last
// Overlap (by StartTime), shipping those it has not shipped before (counted as
// "late_rows_recovered"), and, unless NoLateProbe, probes for logs older than that with an Id
// above every Id read: the Id is allocated when the log is written, so a log written after
// everything listed has a higher one whatever its StartTime. Those are shipped too, counted as
// "late_rows" and logged as a warning; keyset describes both mechanisms and their bounds
// (MaxOverlapIDs, "overlap_shrunk"). The listing stays on StartTime rather than SystemModstamp
// or LastModifiedDate: that those follow the write, and that the Tooling API filters and orders
// ApexLog on them, is documented nowhere, and stored cursors hold a StartTime.
//
// Each log costs one body download. Bodies are fetched ahead of the job, in listing order, up to
// DownloadConcurrency at a time (Salesforce answers each call in 50-200 ms; one at a time, a
// stream would ship at most a few logs per second); they are shipped in order, so a failure
// still stops the key at the first log that could not be shipped. A log whose LogLength
// exceeds MaxBodyBytes is not downloaded: its entry carries the metadata, body_skipped=true and
// body_skip_reason=size, and a short line saying so (counted as "body_skipped"). A body that
// cannot be downloaded (5xx, transport errors, an HTML page answered in its place, after the
// client's retries; any other refusal) stops the key for this run without passing the log, so
// the next run tries again — until the log's transaction ended (StartTime +
// DurationMilliseconds: the log is written then, so a long transaction's is listed late) longer
// than DownloadMaxAge ago (Salesforce's clock), when it is shipped as metadata with
// body_skip_reason=download_failed and counted as "body_failed". A body gone (404) is shipped as metadata with body_skip_reason=not_found.
// REQUEST_LIMIT_EXCEEDED ends the run.
package apexlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// Name is the source's config name, source label and checkpoint key.
const Name = "apexlog"

// Key is the checkpoint key of the source.
const Key = "apexlog"

// Defaults of Options fields left zero.
const (
	DefaultLookback       = time.Hour
	DefaultOverlap        = 5 * time.Minute
	DefaultMaxOverlapIDs  = 500
	DefaultMaxBodyBytes   = 5 << 20
	DefaultDownloadMaxAge = 2 * time.Hour
	DefaultPageSize       = 200
	MaxPageSize           = 2000
	// DefaultDownloadConcurrency is how many bodies are downloaded at once: well within the
	// concurrent requests an org allows (docs/performance.md, ApexLog), enough to hide the
	// latency of one call.
	DefaultDownloadConcurrency = 8
	MaxDownloadConcurrency     = 16
)

// Events counted through source.OpenRequest.Count.
const (
	EventCursorReset = "cursor_reset"
	EventBodySkipped = "body_skipped"
	EventBodyFailed  = "body_failed"
	EventBodyMissing = "body_not_found"
	// EventLateRows: a log became visible later than the overlap window reaches back; the
	// late-row probe found it and it is shipped late.
	EventLateRows = keyset.EventLateRows
	// EventLateRecovered: a log became visible late, inside the overlap window, and is shipped.
	EventLateRecovered = keyset.EventLateRecovered
	// EventOverlapShrunk: more logs than MaxOverlapIDs fell inside the window; it was shrunk.
	EventOverlapShrunk = keyset.EventOverlapShrunk
)

// Skip reasons in body_skip_reason.
const (
	ReasonSize     = "size"
	ReasonFailed   = "download_failed"
	ReasonNotFound = "not_found"
)

// Options configures the ApexLog source. Zero fields take the documented defaults.
type Options struct {
	// Client is the org's client (required).
	Client *salesforce.Client
	// Shaper shapes logs into entries; nil uses the default shaping.
	Shaper *shape.Shaper
	// Counter attributes this source's API calls (see Source.Calls); nil makes one.
	Counter *salesforce.Counter
	// OrgID is the sf_org_id label; empty means Client.OrgID (read at Open).
	OrgID string
	// Labels are further stream labels of every entry (the org label in multi-org setups).
	Labels []loki.Label
	// Users limits the logs to those of these usernames (LogUser.Username); empty means all.
	Users []string
	// Lookback is where a key without a usable cursor starts (0 = DefaultLookback).
	Lookback time.Duration
	// Start, when set, is where (by StartTime) a key without a usable cursor starts, instead of
	// now − Lookback. A stored cursor always wins.
	Start time.Time
	// Overlap is how far back (by StartTime) each run lists again the logs before the last one
	// shipped, for logs written after it (0 = DefaultOverlap; negative = no window).
	Overlap time.Duration
	// MaxOverlapIDs caps the logs remembered in the window (0 = DefaultMaxOverlapIDs); past it
	// the window shrinks, with a warning.
	MaxOverlapIDs int
	// NoLateProbe leaves out the probe for logs written later than the overlap window reaches
	// back ((before the window) AND Id > max_id); such logs are then missed silently.
	NoLateProbe bool
	// MaxBodyBytes is the largest body downloaded (0 = DefaultMaxBodyBytes); larger logs are
	// shipped as metadata only.
	MaxBodyBytes int64
	// DownloadMaxAge is how long a log whose body fails to download holds the key back
	// before it is shipped as metadata only (0 = DefaultDownloadMaxAge), counted from the end of
	// its transaction (StartTime + DurationMilliseconds), when the log was written.
	DownloadMaxAge time.Duration
	// PageSize is the LIMIT of one listing query, at most MaxPageSize (0 = DefaultPageSize).
	PageSize int
	// DownloadConcurrency is how many bodies are downloaded at once, ahead of the job, at most
	// MaxDownloadConcurrency (0 = DefaultDownloadConcurrency; 1 = one at a time, when the job
	// pulls the log).
	DownloadConcurrency int
	// MaxRecordsPerRun ends the key's run after this many logs (0 = only the job's budget),
	// waiting for the next run (source.ErrWaiting): the run is not caught up.
	MaxRecordsPerRun int
	// Now is the wall clock (nil = time.Now).
	Now func() time.Time
	// Log is used when the job gives none (nil = slog.Default()).
	Log *slog.Logger
}

// usernameRE is what a username in the filter may contain.
var usernameRE = regexp.MustCompile(`^[A-Za-z0-9._%+\-@]+$`)

// ValidUsername reports whether u may be used in the user filter: letters, digits and
// . _ % + - @ (it is quoted in SOQL anyway).
func ValidUsername(u string) bool { return usernameRE.MatchString(u) }

// Validate checks opts without any network call; errors name the Options field.
func (o Options) Validate() error {
	var errs []error
	for i, u := range o.Users {
		if !ValidUsername(u) {
			errs = append(errs, fmt.Errorf("apexlog: Users[%d]: %q is not a username (letters, digits and . _ %% + - @)", i, u))
		}
	}
	if o.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("apexlog: MaxBodyBytes must not be negative"))
	}
	if o.PageSize < 0 || o.PageSize > MaxPageSize {
		errs = append(errs, fmt.Errorf("apexlog: PageSize %d is outside 1..%d", o.PageSize, MaxPageSize))
	}
	if o.DownloadConcurrency < 0 || o.DownloadConcurrency > MaxDownloadConcurrency {
		errs = append(errs, fmt.Errorf("apexlog: DownloadConcurrency %d is outside 1..%d", o.DownloadConcurrency, MaxDownloadConcurrency))
	}
	if o.Lookback < 0 || o.DownloadMaxAge < 0 || o.MaxRecordsPerRun < 0 || o.MaxOverlapIDs < 0 {
		errs = append(errs, errors.New("apexlog: Lookback, DownloadMaxAge, MaxRecordsPerRun and MaxOverlapIDs must not be negative"))
	}
	return errors.Join(errs...)
}

// Source is the ApexLog source. Build one per invocation with New.
type Source struct {
	opts Options
}

// New validates opts and returns the source.
func New(opts Options) (*Source, error) {
	if opts.Client == nil {
		return nil, errors.New("apexlog: Options.Client is required")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Shaper == nil {
		sh, err := shape.New(shape.Options{})
		if err != nil {
			return nil, err
		}
		opts.Shaper = sh
	}
	if opts.Counter == nil {
		opts.Counter = &salesforce.Counter{}
	}
	if opts.Lookback == 0 {
		opts.Lookback = DefaultLookback
	}
	switch {
	case opts.Overlap == 0:
		opts.Overlap = DefaultOverlap
	case opts.Overlap < 0:
		opts.Overlap = 0
	}
	if opts.MaxOverlapIDs == 0 {
		opts.MaxOverlapIDs = DefaultMaxOverlapIDs
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.DownloadMaxAge == 0 {
		opts.DownloadMaxAge = DefaultDownloadMaxAge
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.DownloadConcurrency == 0 {
		opts.DownloadConcurrency = DefaultDownloadConcurrency
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Source{opts: opts}, nil
}

// Name implements source.Source.
func (s *Source) Name() string { return Name }

// Calls returns the Salesforce calls this source made, by kind.
func (s *Source) Calls() map[string]int64 { return s.opts.Counter.ByKind() }

// CursorTime implements source.Source: the StartTime of the last log shipped.
func (s *Source) CursorTime(key string, raw json.RawMessage) (time.Time, error) {
	if key != Key {
		return time.Time{}, fmt.Errorf("%w: the ApexLog source's only key is %q", source.ErrNotMyKey, Key)
	}
	st, _, err := decodeCursor(raw)
	return st.Pos.TS, err
}

// cursorVersion is the version of the cursor format documented in the package comment.
const cursorVersion = 1

// cursorLayout writes the cursors: {"v":1,"start_time":…,"last_id":…,<keyset.Members>}.
var cursorLayout = keyset.NewLayout(keyset.ByID, cursorVersion, "start_time")

// cursor is the stored form.
type cursor struct {
	V         int    `json:"v"`
	StartTime string `json:"start_time"`
	LastID    string `json:"last_id"`
	keyset.Members
}

// decodeCursor reads a stored cursor; ok is false when there is none. Errors wrap
// source.ErrCursor.
func decodeCursor(raw json.RawMessage) (keyset.State, bool, error) {
	var c cursor
	ok, err := source.DecodeCursor(raw, cursorVersion, &c)
	if err != nil || !ok {
		return keyset.State{}, ok, err
	}
	st, err := cursorLayout.Decode(c.Members, c.StartTime, c.LastID)
	if err != nil {
		return keyset.State{}, false, err
	}
	return st, true, nil
}

// listFields are the ApexLog fields listed (all but the body).
var listFields = []string{"Id", "LogUserId", "LogUser.Username", "LogLength", "Operation", "Request", "Status",
	"StartTime", "Application", "DurationMilliseconds", "Location", "RequestIdentifier"}

// Names of the fields an entry adds to the listed ones.
const (
	fieldSkipped = "body_skipped"
	fieldReason  = "body_skip_reason"
	fieldBody    = "Body"
)

// Open implements source.Source: one stream, key "apexlog".
func (s *Source) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	orgID := s.opts.OrgID
	if orgID == "" {
		var err error
		if orgID, err = s.opts.Client.OrgID(salesforce.WithCounter(ctx, s.opts.Counter)); err != nil {
			return nil, fmt.Errorf("apexlog: org id: %w", err)
		}
	}
	labels := append([]loki.Label{{Name: "sf_org_id", Value: orgID}}, s.opts.Labels...)
	log := req.Log
	if log == nil {
		log = s.opts.Log
	}
	count := req.Count
	if count == nil {
		count = func(string, int64) {}
	}
	st := &stream{src: s, log: log.With("key", Key), count: count, budget: req.Budget}
	cur, ok, err := decodeCursor(req.Cursors[Key])
	var resume *keyset.State
	switch {
	case err != nil:
		st.log.Warn("stored cursor is unusable; starting from the configured start or lookback", "start", s.opts.Start, "lookback", s.opts.Lookback, "err", err)
		count(EventCursorReset, 1)
	case ok:
		resume = &cur
	}
	st.tr = keyset.NewTracker(keyset.Options{Kind: keyset.ByID, Layout: cursorLayout, Overlap: s.opts.Overlap,
		MaxIDs: s.opts.MaxOverlapIDs, Probe: !s.opts.NoLateProbe, Log: st.log, Count: count}, resume)
	fields := append(append([]string(nil), listFields...), fieldSkipped, fieldReason, fieldBody)
	st.fields = fields
	st.plan = s.opts.Shaper.Plan(shape.Schema{Source: Name, Type: "ApexLog", Fields: fields, LineField: fieldBody, Labels: labels})
	return []source.Stream{st}, nil
}

type stream struct {
	src    *Source
	log    *slog.Logger
	count  func(string, int64)
	budget source.Budget

	tr    *keyset.Tracker // the cursor: position, overlap window, max_id
	pager *keyset.Pager   // the listing queries (nil before the first)

	fields  []string
	plan    *shape.Plan
	rec     shape.Record
	buf     []listed
	ahead   []*body // per log of buf: its body being fetched ahead, nil when not started
	fetches sync.WaitGroup
	stop    context.CancelFunc // cancels the fetches ahead (nil before the first)
	fctx    context.Context    // the fetches' context
	page    *salesforce.Page
	open    bool // a listing query's pages are being read
	asked   int
	got     int
	done    bool
	emitted int
	err     error
}

// listed is a log to ship, in order, with the cursor its entry carries.
type listed struct {
	rec    salesforce.Record
	id     string
	start  time.Time
	cursor source.Position
}

// body is one log's body download: done is closed when b and err are set.
type body struct {
	done chan struct{}
	b    []byte
	err  error
}

func (st *stream) Key() string { return Key }

// Close cancels the downloads still running ahead and waits for them.
func (st *stream) Close() error {
	if st.stop != nil {
		st.stop()
	}
	st.fetches.Wait()
	return nil
}

// Next implements source.Stream.
func (st *stream) Next(ctx context.Context, rec *source.Record) error {
	r, err := st.nextRecord(ctx)
	return source.Fill(rec, r, err)
}

// nextRecord returns the next record, for Next to fill in.
func (st *stream) nextRecord(ctx context.Context) (source.Record, error) {
	if st.err != nil {
		return source.Record{}, st.err
	}
	o := st.src.opts
	if m := o.MaxRecordsPerRun; m > 0 && st.emitted >= m {
		// More logs may follow: the run is not caught up.
		return source.Record{}, fmt.Errorf("%w: stopped at max_records_per_run (%d logs); the next run goes on after the last log shipped", source.ErrWaiting, m)
	}
	ctx = salesforce.WithCounter(ctx, o.Counter)
	for len(st.buf) == 0 {
		if err := st.fill(ctx); err != nil {
			if errors.Is(err, io.EOF) {
				return source.Record{}, io.EOF
			}
			return source.Record{}, st.fail(ctx, err)
		}
	}
	st.fetchAhead(ctx)
	rec, err := st.ship(ctx, st.buf[0], st.ahead[0])
	if err != nil {
		return source.Record{}, st.fail(ctx, err)
	}
	st.buf, st.ahead = st.buf[1:], st.ahead[1:]
	st.emitted++
	return rec, nil
}

// fetchAhead starts the body downloads of the next logs of buf, up to DownloadConcurrency in
// flight. With a concurrency of 1 nothing is fetched ahead: ship downloads the body itself.
func (st *stream) fetchAhead(ctx context.Context) {
	o := st.src.opts
	if len(st.ahead) != len(st.buf) {
		st.ahead = make([]*body, len(st.buf), cap(st.buf))
	}
	if o.DownloadConcurrency <= 1 {
		return
	}
	if st.stop == nil {
		// The downloads outlive this call: they end with the stream (Close) or its context.
		st.fctx, st.stop = context.WithCancel(ctx)
	}
	ctx = st.fctx
	for i := range min(len(st.buf), o.DownloadConcurrency) {
		if st.ahead[i] != nil || !st.wantsBody(st.buf[i].rec) {
			continue
		}
		id := st.buf[i].id
		f := &body{done: make(chan struct{})}
		st.ahead[i] = f
		st.fetches.Add(1)
		go func() {
			defer st.fetches.Done()
			defer close(f.done)
			f.b, f.err = st.download(ctx, id)
		}()
	}
}

// wantsBody reports whether the log's body is to be downloaded (not over MaxBodyBytes).
func (st *stream) wantsBody(r salesforce.Record) bool {
	n, ok := r.Int64("LogLength")
	return !ok || n <= st.src.opts.MaxBodyBytes
}

// fail makes err sticky unless the run is being canceled.
func (st *stream) fail(ctx context.Context, err error) error {
	err = fmt.Errorf("apexlog: %w", err)
	if ctx.Err() == nil {
		st.err = err
	}
	return err
}

// fill reads the next page of the listing into buf, or returns io.EOF when it is exhausted.
// Each log listed is classified at once (keyset.Tracker.Consider): only those to ship are
// buffered, with their cursors, so that no body is fetched for a log shipped before.
func (st *stream) fill(ctx context.Context) error {
	c := st.src.opts.Client
	if st.open && !st.page.Done {
		p, err := c.NextPage(ctx, st.page)
		var apiErr *salesforce.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.ErrorCode == salesforce.CodeInvalidQueryLocator:
			// The locator timed out while the page's bodies were shipped, or was released
			// because the user opened too many: a new keyset query goes on after the last
			// log listed.
			st.log.Info("the listing's query locator expired; listing again after the last log listed", "err", err)
			st.open = false
		case err != nil:
			return err
		default:
			st.got += len(p.Records)
			return st.take(p)
		}
	}
	if st.open {
		st.open = false
		if st.got < st.asked && !st.pager.Drained() {
			st.done = true
		}
	}
	if st.done {
		return io.EOF
	}
	n := st.src.opts.PageSize
	if left := st.left(); left >= 0 {
		// The window's logs listed again do not count against the run's budget.
		n = min(n, left+st.tr.Remembered())
	}
	if n == 0 {
		st.done = true
		return io.EOF
	}
	if st.pager == nil {
		o := st.src.opts
		def := st.sfNow().Add(-o.Lookback)
		if !o.Start.IsZero() {
			def = o.Start
		}
		start, incl := st.tr.Start(def)
		st.pager = &keyset.Pager{Query: keyset.Query{Object: "ApexLog", Select: strings.Join(listFields, ", "), TSField: "StartTime", Kind: keyset.ByID},
			Start: start, StartIncl: incl, ProbeMax: st.tr.ProbeMax()}
		if len(o.Users) > 0 {
			st.pager.Where = "LogUser.Username IN " + salesforce.QuoteStrings(o.Users)
		}
	}
	soql, err := st.pager.Next(n)
	if err != nil {
		return err
	}
	p, err := c.ToolingQuery(ctx, soql)
	if err != nil {
		return err
	}
	st.open, st.asked, st.got = true, n, len(p.Records)
	return st.take(p)
}

// take buffers the logs of a listing page that are to be shipped.
func (st *stream) take(p *salesforce.Page) error {
	st.page = p
	for _, r := range p.Records {
		id, ok := r.String("Id")
		if !ok || salesforce.ValidateID(id) != nil {
			return fmt.Errorf("listing returned a log without a valid Id: %v", r["Id"])
		}
		start, ok := r.Time("StartTime")
		if !ok {
			return fmt.Errorf("log %s has no StartTime", id)
		}
		pos := keyset.Position{TS: start, Key: id}
		ok, err := st.pager.Row(pos)
		if err != nil {
			return err
		}
		if !ok {
			// The pager abandons the query: its next one lists the logs in another order.
			st.open = false
			return nil
		}
		if st.tr.Consider(pos) {
			st.buf = append(st.buf, listed{rec: r, id: id, start: start, cursor: st.tr.Cursor()})
		}
	}
	return nil
}

// left is how many more logs the run can take (-1 = no bound but the page size).
func (st *stream) left() int {
	left := -1
	if m := st.src.opts.MaxRecordsPerRun; m > 0 {
		left = m - st.emitted
	}
	if m := st.budget.MaxRecords; m > 0 && (left < 0 || m-st.emitted < left) {
		left = m - st.emitted
	}
	return max(left, -1)
}

func (st *stream) sfNow() time.Time {
	now := st.src.opts.Now()
	if off, ok := st.src.opts.Client.ServerClockOffset(); ok {
		now = now.Add(off)
	}
	return now
}

// ship downloads one log's body (or decides not to) and returns its record. An error leaves
// the log unshipped.
func (st *stream) ship(ctx context.Context, l listed, ahead *body) (source.Record, error) {
	o := st.src.opts
	r, id, start := l.rec, l.id, l.start
	var body []byte
	reason := ""
	if !st.wantsBody(r) {
		reason = ReasonSize
	} else {
		b, err := st.body(ctx, id, ahead)
		var apiErr *salesforce.APIError
		switch {
		case err == nil:
			body = b
		case errors.Is(err, salesforce.ErrBodyTooLarge):
			reason = ReasonSize
		case ctx.Err() != nil, errors.Is(err, salesforce.ErrRequestLimit), errors.Is(err, salesforce.ErrConcurrentLimit):
			// A limit is about the org, not this log: the key stops and waits, whatever its age.
			return source.Record{}, err
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
			reason = ReasonNotFound
		case st.sfNow().Sub(ended(r, start)) <= o.DownloadMaxAge:
			return source.Record{}, fmt.Errorf("log %s: body download failed; the key waits for it (up to download_max_age, %s, after the log's transaction ended): %w", id, o.DownloadMaxAge, err)
		default:
			st.log.Error("a log body keeps failing to download and its transaction ended longer than download_max_age ago; shipping its metadata only",
				"id", id, "start_time", salesforce.FormatDateTime(start), "ended", salesforce.FormatDateTime(ended(r, start)), "err", err)
			reason = ReasonFailed
		}
	}
	switch reason {
	case ReasonSize:
		st.count(EventBodySkipped, 1)
	case ReasonNotFound:
		st.count(EventBodyMissing, 1)
	case ReasonFailed:
		st.count(EventBodyFailed, 1)
	}

	rec := &st.rec
	rec.Reset()
	rec.Type = "ApexLog"
	rec.ID = append(rec.ID, id...)
	rec.Time = start
	for _, f := range listFields {
		v, _ := r.Get(f)
		appendValue(rec, f, v)
	}
	if reason == "" {
		rec.AppendString(fieldSkipped, shape.Null, "")
		rec.AppendString(fieldReason, shape.Null, "")
		rec.Append(fieldBody, shape.String, body)
	} else {
		rec.AppendString(fieldSkipped, shape.Bool, "true")
		rec.AppendString(fieldReason, shape.String, reason)
		line := "[ApexLog " + id + ": body not shipped: " + reason + "]"
		if n, ok := r.Int64("LogLength"); ok && reason == ReasonSize {
			line = fmt.Sprintf("[ApexLog %s: body not shipped: %d bytes, max_body_bytes is %d]", id, n, o.MaxBodyBytes)
		}
		rec.AppendString(fieldBody, shape.String, line)
	}
	var out source.Record
	out.Shape(st.plan, rec)
	out.Cursor = l.cursor
	return out, nil
}

// maxTransaction bounds the DurationMilliseconds that ended believes: no Apex transaction runs
// for a day, and a value past it (a corrupt record) would hold a key whose body keeps failing
// for as long as the value says.
const maxTransaction = 24 * time.Hour

// ended is when the log's transaction ended, StartTime + DurationMilliseconds (at most
// maxTransaction): Salesforce writes the log then, so its body could not be fetched before.
// Without a usable duration it is the StartTime.
func ended(r salesforce.Record, start time.Time) time.Time {
	ms, ok := r.Int64("DurationMilliseconds")
	if !ok || ms <= 0 {
		return start
	}
	return start.Add(time.Duration(min(ms, maxTransaction.Milliseconds())) * time.Millisecond)
}

// body returns the log's body: the download fetched ahead when there is one (waiting for it),
// else downloaded now.
func (st *stream) body(ctx context.Context, id string, ahead *body) ([]byte, error) {
	if ahead == nil {
		return st.download(ctx, id)
	}
	select {
	case <-ahead.done:
		return ahead.b, ahead.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// download reads a body up to the cap.
func (st *stream) download(ctx context.Context, id string) ([]byte, error) {
	d, err := st.src.opts.Client.DownloadApexLog(ctx, id, st.src.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }()
	return io.ReadAll(d)
}

// appendValue adds one Salesforce value to a shape record with the kind it is written as.
func appendValue(rec *shape.Record, name string, v any) {
	switch x := v.(type) {
	case nil:
		rec.AppendString(name, shape.Null, "")
	case string:
		rec.AppendString(name, shape.String, x)
	case json.Number:
		rec.AppendString(name, shape.Number, x.String())
	case bool:
		rec.AppendString(name, shape.Bool, strconv.FormatBool(x))
	default:
		b, err := json.Marshal(x)
		if err != nil {
			b = []byte(fmt.Sprint(x))
		}
		rec.Append(name, shape.String, b)
	}
}
