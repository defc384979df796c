package soql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// Name is the source's config name and its source label.
const Name = "soql"

// Key returns the checkpoint key of an object: "soql:<Object>".
func Key(object string) string { return Name + ":" + object }

// Events counted through source.OpenRequest.Count.
const (
	// EventCursorReset: a stored cursor was unusable and the key restarted at now − lookback.
	EventCursorReset = "cursor_reset"
	// EventLateRows: a row arrived later than the overlap window reaches back (delivered late,
	// standard objects only).
	EventLateRows = keyset.EventLateRows
	// EventLateRecovered: a row arrived late but inside the overlap window and was delivered.
	EventLateRecovered = keyset.EventLateRecovered
	// EventOverlapShrunk: the window held more rows than MaxOverlapIDs and was shrunk.
	EventOverlapShrunk = keyset.EventOverlapShrunk
	// EventFieldsAll: the explicit field list was too long for a URL; FIELDS(ALL) is used.
	EventFieldsAll = "fields_all_fallback"
)

// Source is the SOQL source. Build one per invocation with New.
type Source struct {
	opts    Options
	objects []Object
	counter *salesforce.Counter
}

// New validates opts and returns the source.
func New(opts Options) (*Source, error) {
	if opts.Client == nil {
		return nil, errors.New("soql: Options.Client is required")
	}
	var errs []error
	seen := map[string]bool{}
	objs := make([]Object, 0, len(opts.Objects))
	for _, o := range opts.Objects {
		if err := o.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[strings.ToLower(o.Name)] {
			errs = append(errs, &ObjectError{Object: o.Name, Field: "Name", Msg: "configured twice"})
			continue
		}
		seen[strings.ToLower(o.Name)] = true
		objs = append(objs, o.withDefaults())
	}
	if err := errors.Join(errs...); err != nil {
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Source{opts: opts, objects: objs, counter: opts.Counter}, nil
}

// Name implements source.Source.
func (s *Source) Name() string { return Name }

// Calls returns the Salesforce calls this source made, by kind.
func (s *Source) Calls() map[string]int64 { return s.counter.ByKind() }

// CursorTime implements source.Source: the timestamp of the last row shipped.
func (s *Source) CursorTime(key string, raw json.RawMessage) (time.Time, error) {
	for _, o := range s.objects {
		if Key(o.Name) != key {
			continue
		}
		st, _, err := decodeCursor(raw, o.TimestampField, o.kind())
		return st.Pos.TS, err
	}
	return time.Time{}, fmt.Errorf("%w: %q names no configured object", source.ErrNotMyKey, key)
}

// Open implements source.Source: one stream per object, reading its cursor from req. Nothing is
// queried until a stream's first Next.
func (s *Source) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	orgID := s.opts.OrgID
	if orgID == "" && len(s.objects) > 0 {
		var err error
		if orgID, err = s.opts.Client.OrgID(salesforce.WithCounter(ctx, s.counter)); err != nil {
			return nil, fmt.Errorf("soql: org id: %w", err)
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
	out := make([]source.Stream, 0, len(s.objects))
	for _, o := range s.objects {
		key := Key(o.Name)
		kind := o.kind()
		st := &stream{src: s, obj: o, key: key, kind: kind, log: log.With("key", key), count: count, budget: req.Budget, labels: labels}
		cur, ok, err := decodeCursor(req.Cursors[key], o.TimestampField, kind)
		if err != nil {
			st.log.Warn("stored cursor is unusable; starting from the configured start or lookback", "start", o.Start, "lookback", o.Lookback, "err", err)
			count(EventCursorReset, 1)
			ok = false
		}
		var resume *keyset.State
		if ok {
			resume = &cur
		}
		st.tr = keyset.NewTracker(keyset.Options{Kind: kind, Layout: cursorLayout(o.TimestampField, kind), Overlap: o.Overlap,
			MaxIDs: o.MaxOverlapIDs, Probe: !o.BigObject && !o.NoLateProbe, Log: st.log, Count: count}, resume)
		out = append(out, st)
	}
	return out, nil
}

// stream reads one object for one run.
type stream struct {
	src    *Source
	obj    Object
	key    string
	kind   keyset.Kind
	log    *slog.Logger
	count  func(string, int64)
	budget source.Budget
	labels []loki.Label

	tr *keyset.Tracker        // the cursor: position, overlap window, max_id
	at *salesforce.FieldIndex // finds st.fields in rows (made on first use)

	rd   reader
	read bool // rd has returned a row
	// redescribed: the object was described again this run after a query answered
	// INVALID_FIELD (see fieldGone).
	redescribed bool
	q           *querier
	fields      []string
	plan        *shape.Plan
	rec         shape.Record
	ctxIn       context.Context // the last context Next was given
	ctx         context.Context // ctxIn with the source's call counter
	emitted     int
	err         error
}

func (st *stream) Key() string { return st.key }

func (st *stream) Close() error { return nil }

// Next implements source.Stream. A row is shaped straight into rec.
func (st *stream) Next(ctx context.Context, rec *source.Record) error {
	if st.err != nil {
		return st.err
	}
	if m := st.obj.MaxRecordsPerRun; m > 0 && st.emitted >= m {
		// More rows may follow: the run is not caught up.
		return fmt.Errorf("%w: stopped at max_records_per_run (%d rows); the next run goes on after the last row shipped", source.ErrWaiting, m)
	}
	if ctx != st.ctxIn { // the job passes the same context every time: attach the counter once
		st.ctxIn, st.ctx = ctx, salesforce.WithCounter(ctx, st.src.counter)
	}
	ctx = st.ctx
	if st.rd == nil {
		if err := st.init(ctx); err != nil {
			st.err = fmt.Errorf("soql: %s: %w", st.obj.Name, err)
			return st.err
		}
	}
	for {
		r, err := st.rd.next(ctx)
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if err != nil && st.fieldGone(err) {
			if err := st.redescribe(ctx); err != nil {
				st.err = fmt.Errorf("soql: %s: %w", st.obj.Name, err)
				return st.err
			}
			continue
		}
		if err != nil {
			err = fieldHint(err, len(st.obj.Fields) > 0)
			if ctx.Err() == nil {
				st.err = fmt.Errorf("soql: %s: %w", st.obj.Name, err)
			}
			return fmt.Errorf("soql: %s: %w", st.obj.Name, err)
		}
		st.read = true
		if st.consider(r, rec) {
			st.emitted++
			return nil
		}
	}
}

// fieldGone reports whether err is a query naming a field the integration user cannot see
// (INVALID_FIELD "No such column") while the field list came from a describe that may be
// older than this run: the client keeps describes for its life, which a warm Lambda stretches
// over many invocations, and field-level security or an admin may have taken the field away
// since. Only the first query of the run is retried this way, before any row was read.
func (st *stream) fieldGone(err error) bool {
	var apiErr *salesforce.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == salesforce.CodeInvalidField &&
		len(st.obj.Fields) == 0 && !st.read && !st.redescribed
}

// redescribe describes the object again and rebuilds the field list and the reader, which
// start where the run started.
func (st *stream) redescribe(ctx context.Context) error {
	st.log.Warn("a query answered INVALID_FIELD with the field list of an earlier describe: describing the object again "+
		"(a field was removed, or field-level security hides it from the integration user now)", "object", st.obj.Name)
	st.redescribed = true
	st.src.opts.Client.ForgetDescribe(st.obj.Name)
	st.rd, st.at = nil, nil
	return st.init(ctx)
}

// fieldHint adds to an INVALID_FIELD error what the operator can do about it.
func fieldHint(err error, configured bool) error {
	var apiErr *salesforce.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != salesforce.CodeInvalidField {
		return err
	}
	if configured {
		return fmt.Errorf("%w; a field in fields does not exist or is hidden from the integration user by field-level security: "+
			"grant it read access (profile or permission set) or remove it from fields", err)
	}
	return fmt.Errorf("%w; a field of the object's describe is hidden from the integration user (field-level security) or was removed: "+
		"check the integration user's field access", err)
}

// sfNow is Salesforce's clock as last measured by the client.
func (st *stream) sfNow() time.Time {
	now := st.src.opts.Now()
	if off, ok := st.src.opts.Client.ServerClockOffset(); ok {
		now = now.Add(off)
	}
	return now
}

// init describes the object, fixes the field list and builds the reader.
func (st *stream) init(ctx context.Context) error {
	o := st.obj
	d, err := st.src.opts.Client.Describe(ctx, o.Name)
	if err != nil {
		return err
	}
	tsf, ok := d.Field(o.TimestampField)
	if !ok {
		return fmt.Errorf("the object has no field %s (timestamp_field)", o.TimestampField)
	}
	if tsf.Type != "datetime" {
		return fmt.Errorf("timestamp field %s is a %s, not a datetime", o.TimestampField, tsf.Type)
	}
	if _, ok := d.Field(st.kind.Field()); !ok {
		return fmt.Errorf("the object has no %s field to key rows on", st.kind.Field())
	}
	fields := o.Fields
	if len(fields) == 0 {
		fields = d.SelectableFields()
	}
	st.fields = withFields(fields, st.kind.Field(), o.TimestampField)
	st.q = &querier{client: st.src.opts.Client, Query: keyset.Query{Object: o.Name, TSField: tsf.Name, Kind: st.kind,
		Select: strings.Join(st.fields, ", "), Where: o.Where}}
	st.plan = st.src.opts.Shaper.Plan(shape.Schema{Source: Name, Type: o.Name, Fields: st.fields, Labels: st.labels})

	now := st.sfNow()
	def := now.Add(-o.Lookback)
	if !o.Start.IsZero() {
		def = o.Start
	}
	start, incl := st.tr.Start(def)
	if o.BigObject {
		top := now.Add(-o.Settle)
		st.rd = newBigReader(st.q, start, incl, top, o.PageSize, o.BufferRows)
		return nil
	}
	k := &keysetReader{q: st.q, pager: keyset.Pager{Query: st.q.Query, Start: start, StartIncl: incl, ProbeMax: st.tr.ProbeMax()}, limit: st.limit}
	if o.Settle > 0 {
		k.pager.Top = now.Add(-o.Settle)
	}
	if k.tooLong() {
		st.q.Select, st.q.fieldsAll = "FIELDS(ALL)", true
		k.pager.Select = st.q.Select
		st.log.Warn("the field list makes the query longer than a URL allows; using FIELDS(ALL), 200 rows per query", "fields", len(st.fields))
		st.count(EventFieldsAll, 1)
	}
	st.rd = k
	return nil
}

// withFields returns fields with the key and timestamp fields added when missing, each field
// once (compared without case).
func withFields(fields []string, need ...string) []string {
	out := make([]string, 0, len(fields)+len(need))
	seen := map[string]bool{}
	for _, f := range append(need, fields...) {
		if k := strings.ToLower(f); !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	return out
}

// limit is the LIMIT of the next standard query: none (negative) when the run can take a full
// page or more, else what it can take plus the rows the window re-reads, or 0 when it can take
// nothing more.
func (st *stream) limit() int {
	left := -1
	if m := st.obj.MaxRecordsPerRun; m > 0 {
		left = m - st.emitted
	}
	if m := st.budget.MaxRecords; m > 0 && (left < 0 || m-st.emitted < left) {
		left = m - st.emitted
	}
	switch {
	case left < 0:
		return -1
	case left == 0:
		return 0
	}
	left += st.tr.Remembered()
	if left >= fullPage {
		return -1
	}
	return left
}

// consider reports whether a row read is emitted (see keyset.Tracker.Consider), shaped into
// out (which it leaves alone otherwise).
func (st *stream) consider(r row, out *source.Record) bool {
	if !st.tr.Consider(r.pos) {
		return false
	}
	st.emit(r, out)
	return true
}

// emit shapes a row into out, a record carrying the current cursor, which it overwrites whole.
func (st *stream) emit(r row, out *source.Record) {
	rec := &st.rec
	rec.Reset()
	rec.Type = st.obj.Name
	rec.ID = append(rec.ID, r.pos.Key...)
	rec.Time = r.pos.TS
	if st.at == nil {
		st.at = salesforce.NewFieldIndex(st.fields)
	}
	// The values are ranges of the row's JSON text, not copies; a string that was decoded
	// (escapes) and an object's sorted JSON are appended to the record's own buffer.
	// The columns are the stream's fields, the same slice for every row: the plan knows at once
	// that the record follows its schema.
	rec.Use(r.rec.Text())
	rec.Columns(st.fields, len(st.fields))
	at := st.at.Locate(r.rec)
	for k := range st.fields {
		i := at[k]
		if i < 0 {
			rec.SetColumn(k, shape.Null, false, 0, 0) // absent, or below a null relationship
			continue
		}
		kind := r.rec.Kind(i)
		if s, e, ok := r.rec.Span(i); ok && kind != salesforce.ValueObject {
			rec.SetColumn(k, shapeKind(kind), r.rec.Plain(i), s, e)
			continue
		}
		setValue(rec, k, kind, r.rec.Value(i))
	}
	out.Shape(st.plan, rec)
	out.Cursor = st.tr.Cursor()
}

// shapeKind is the shape kind a string, number or boolean is written as.
func shapeKind(k salesforce.ValueKind) shape.Kind {
	switch k {
	case salesforce.ValueNumber:
		return shape.Number
	case salesforce.ValueBool:
		return shape.Bool
	}
	return shape.String
}

// setValue gives column col of a shape record one Salesforce value, with the kind it is
// written as: strings, numbers (their text as sent) and booleans as they are, an object or
// array (a compound field such as an address) as its JSON with members sorted by name.
func setValue(rec *shape.Record, col int, kind salesforce.ValueKind, v []byte) {
	switch kind {
	case salesforce.ValueNull:
		rec.SetColumn(col, shape.Null, false, 0, 0) // no bytes: nothing to copy
	case salesforce.ValueString, salesforce.ValueNumber, salesforce.ValueBool:
		rec.SetColumnCopy(col, shapeKind(kind), v)
	default:
		b, err := salesforce.ObjectJSON(v)
		if err != nil {
			b = v
		}
		rec.SetColumnCopy(col, shape.String, b)
	}
}
