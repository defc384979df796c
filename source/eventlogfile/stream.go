package eventlogfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// Skip reasons of the records that only advance the cursor.
const (
	SkipEmptyFile   = "empty_file"      // a file without data rows
	SkipFileDone    = "file_done"       // a resumed file had no rows left
	SkipAbandoned   = "file_abandoned"  // a failing file older than DownloadMaxAge
	SkipRowTooLarge = "row_too_large"   // a row over MaxRowBytes
	SkipLegacyDone  = "legacy_done"     // a file a legacy (Python) cursor had already shipped
	SkipIncomplete  = "file_incomplete" // a file held open by a body shorter than LogFileLength
)

// fileInfo is one row of the listing.
type fileInfo struct {
	ID      string
	Created string // SOQL literal form
	created time.Time
	logDate time.Time
	length  int64
	names   string // LogFileFieldNames
	types   string // LogFileFieldTypes
}

// stream ships the files of one event type in (CreatedDate, Id) order.
type stream struct {
	src    *Source
	typ    string
	key    string
	log    *slog.Logger
	count  func(string, int64)
	labels []loki.Label

	cur     Cursor          // position after the last record handed out (or the stored one)
	has     bool            // cur came from the store (else it is the lookback start)
	skipIDs map[string]bool // legacy: files at skipAt already shipped
	skipAt  string          // legacy: the Python cursor's last_created (where cur started)

	files    []fileInfo
	next     int
	listed   bool
	more     bool // the last listing filled its page: list again after its files
	finished bool
	waiting  error // why the type stopped at a held file (wraps source.ErrWaiting); nil at its end

	file *openFile
	pos  positions
}

// openFile is the file being shipped.
type openFile struct {
	*filePos  // the file as listed (info), shared by the positions of its rows
	dl        io.Closer
	csv       *csvReader
	plan      *shape.Plan
	names     []string
	kinds     []shape.Kind
	tsIdx     []int
	clock     rowClock // parses the rows' times
	row       int64    // data rows consumed so far: the next row's index
	rec       shape.Record
	extra     []byte // scratch for ExtraField
	fallbacks int64  // rows timestamped from LogDate
	// lastShort is the length of the body at the last download, when the stored cursor held the
	// file open for a body shorter than LogFileLength (see held); nil otherwise.
	lastShort *int64
}

func (st *stream) Key() string { return st.key }

// daily reports that the stream ships Daily files (their cursors say so).
func (st *stream) daily() bool { return st.src.opts.Interval == IntervalDaily }

// fromDaily moves a cursor written under Daily to where the Daily files' coverage ended, for a
// type now shipped Hourly: the hourly files of the hours after the last Daily file's day,
// however long before that file they were created, are listed first; none is skipped. A Daily
// file shipped partly is covered again from its day's start (its shipped rows come again, from
// the hourly files). It costs one query, in the first run after the switch.
func (st *stream) fromDaily(ctx context.Context) error {
	c := st.cur
	if !st.has || c.Interval != IntervalDaily || st.daily() || c.FileID == "" {
		return nil
	}
	q := "SELECT LogDate FROM EventLogFile WHERE Id = '" + c.FileID + "'"
	var logDate time.Time
	found := false
	for rec, err := range st.src.opts.Client.Records(st.src.ctx(ctx), q) {
		if err != nil {
			return fmt.Errorf("eventlogfile: the Daily file of the cursor (%s), to switch %s to Hourly: %w", c.FileID, st.typ, err)
		}
		logDate, found = rec.Time("LogDate")
	}
	if !found {
		// The Daily file is gone: its day is the UTC day before its creation.
		logDate = c.created.UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	}
	from := logDate
	if c.Done {
		from = logDate.Add(24 * time.Hour)
	}
	st.log.Info("the event type was shipped Daily: Hourly files are listed from the end of the last Daily file's coverage",
		"daily_file", c.FileID, "log_date", logDate, "from", from)
	st.count("interval_switched", 1)
	st.cur = Cursor{V: cursorVersion, Created: salesforce.FormatDateTime(from), created: from}
	return nil
}

func (st *stream) Close() error {
	st.closeFile()
	return nil
}

func (st *stream) closeFile() {
	if st.file == nil {
		return
	}
	if n := st.file.fallbacks; n > 0 {
		st.count("timestamp_fallback", n)
	}
	if w := st.src.opts.Window; w != nil && w.Progress != nil {
		w.Progress.Bytes.Add(st.file.csv.BytesRead())
	}
	_ = st.file.dl.Close()
	st.file = nil
}

// Next implements source.Stream. A row is shaped straight into rec.
func (st *stream) Next(ctx context.Context, rec *source.Record) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if st.finished {
			if st.waiting != nil {
				return st.waiting
			}
			return io.EOF
		}
		if st.file != nil {
			ok, err := st.nextRow(rec)
			if err != nil {
				return st.failed(ctx, rec, st.file.info, err)
			}
			if ok {
				return nil
			}
			continue
		}
		f, ok, err := st.nextFile(ctx)
		if err != nil {
			return err
		}
		if !ok {
			st.finished = true
			return io.EOF
		}
		if st.skipIDs[f.ID] && f.Created == st.skipAt { // not at a newer CreatedDate: regenerated
			*rec = st.done(f, 0, SkipLegacyDone)
			return nil
		}
		r, ok, err := st.open(ctx, f)
		if err != nil {
			return st.failed(ctx, rec, f, err)
		}
		if ok {
			*rec = r
			return nil
		}
	}
}

// newOpenFile is f being shipped from csv (the download dl).
func (st *stream) newOpenFile(f fileInfo, dl io.Closer, csv *csvReader) *openFile {
	return &openFile{filePos: &filePos{info: f, daily: st.daily()}, dl: dl, csv: csv}
}

// done closes the file and returns a Skip record marking it finished after rows rows.
func (st *stream) done(f fileInfo, rows int64, reason string) source.Record {
	st.closeFile()
	st.cur = Cursor{V: cursorVersion, Created: f.Created, FileID: f.ID, Row: rows, Done: true, created: f.created}
	return source.Record{Skip: true, SkipReason: reason, Cursor: source.LazyCursor(st.pos.at(&filePos{info: f, daily: st.daily()}, rows, true))}
}

// failed handles a file that could not be downloaded or read: abandoned (skipped, loudly) when
// older than DownloadMaxAge (its Skip record is written into rec, and the error is nil), else
// the type stops at it for this run without advancing.
func (st *stream) failed(ctx context.Context, rec *source.Record, f fileInfo, err error) error {
	rows := int64(0)
	if st.file != nil {
		rows = st.file.row
	}
	st.closeFile()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, salesforce.ErrRequestLimit) || errors.Is(err, salesforce.ErrConcurrentLimit) {
		st.finished = true // throttled: never a reason to abandon a file
		return err
	}
	age := st.src.sfNow().Sub(f.created)
	if age > st.src.opts.DownloadMaxAge {
		st.log.Error("abandoning an EventLogFile that keeps failing: its remaining rows are not shipped",
			"file_id", f.ID, "created", f.Created, "age", age.Round(time.Second), "download_max_age", st.src.opts.DownloadMaxAge,
			"rows_shipped", rows, "err", err)
		st.count("file_abandoned", 1)
		*rec = st.done(f, rows, SkipAbandoned)
		return nil
	}
	st.count("file_failed", 1)
	st.finished = true
	return fmt.Errorf("eventlogfile: file %s (%s, created %s, %d rows shipped): %w; retried next run, abandoned once older than %s",
		f.ID, st.typ, f.Created, rows, err, st.src.opts.DownloadMaxAge)
}

// nextFile returns the next file in order, listing when the current page is used up.
func (st *stream) nextFile(ctx context.Context) (fileInfo, bool, error) {
	for {
		if st.next < len(st.files) {
			f := st.files[st.next]
			st.next++
			return f, true, nil
		}
		if st.listed && !st.more {
			return fileInfo{}, false, nil
		}
		first := !st.listed
		if first {
			if err := st.fromDaily(ctx); err != nil {
				return fileInfo{}, false, err
			}
		}
		files, err := st.list(ctx)
		if err != nil {
			return fileInfo{}, false, err
		}
		st.files, st.next, st.listed, st.more = files, 0, true, len(files) >= st.src.opts.PageSize
		if first {
			st.checkPartial()
		}
		if len(files) == 0 {
			return fileInfo{}, false, nil
		}
	}
}

// checkPartial notices a partly shipped file that is no longer where the cursor left it: it
// was regenerated in place (same Id, newer CreatedDate: it comes again later in the order and
// is shipped again from row 0) or deleted.
func (st *stream) checkPartial() {
	c := st.cur
	if !st.has || c.Done || c.FileID == "" {
		return
	}
	if len(st.files) > 0 && st.files[0].ID == c.FileID && st.files[0].Created == c.Created {
		return
	}
	st.count("file_regenerated", 1)
	st.log.Warn("a partly shipped EventLogFile changed since the last run (regenerated in place, or deleted): it is not resumed; a regenerated file is shipped again from row 0 at its new CreatedDate",
		"file_id", c.FileID, "created", c.Created, "rows_shipped", c.Row)
}

// list runs the listing query from the cursor's keyset position (one query, LIMIT page size).
func (st *stream) list(ctx context.Context) ([]fileInfo, error) {
	o := st.src.opts
	c := st.cur
	var pos string
	switch {
	case c.FileID == "":
		pos = "CreatedDate >= " + c.Created
	case c.Done:
		pos = "(CreatedDate > " + c.Created + " OR (CreatedDate = " + c.Created + " AND Id > '" + c.FileID + "'))"
	default:
		pos = "(CreatedDate > " + c.Created + " OR (CreatedDate = " + c.Created + " AND Id >= '" + c.FileID + "'))"
	}
	q := "SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength, Sequence, LogFileFieldNames, LogFileFieldTypes" +
		" FROM EventLogFile WHERE EventType = " + salesforce.QuoteString(st.typ) +
		" AND Interval = " + salesforce.QuoteString(o.Interval) + " AND " + pos
	if o.SettleWindow > 0 {
		q += " AND CreatedDate <= " + salesforce.FormatDateTime(st.src.sfNow().Add(-o.SettleWindow))
	}
	q += " ORDER BY CreatedDate, Id LIMIT " + strconv.Itoa(o.PageSize)
	var out []fileInfo
	for rec, err := range o.Client.Records(st.src.ctx(ctx), q) {
		if err != nil {
			return nil, fmt.Errorf("eventlogfile: listing %s files: %w", st.typ, err)
		}
		f, err := parseFile(rec)
		if err != nil {
			st.log.Warn("listing row skipped", "err", err)
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFile(rec salesforce.Record) (fileInfo, error) {
	var f fileInfo
	id, _ := rec.String("Id")
	if err := salesforce.ValidateID(id); err != nil {
		return f, fmt.Errorf("EventLogFile row without a usable Id: %w", err)
	}
	created, ok := rec.Time("CreatedDate")
	if !ok {
		return f, fmt.Errorf("EventLogFile %s has no usable CreatedDate", id)
	}
	f.ID, f.created, f.Created = id, created, salesforce.FormatDateTime(created)
	f.logDate, _ = rec.Time("LogDate")
	if n, ok := rec.Float64("LogFileLength"); ok {
		f.length = int64(n)
	}
	f.names, _ = rec.String("LogFileFieldNames")
	f.types, _ = rec.String("LogFileFieldTypes")
	return f, nil
}

// open downloads a file, reads its header and skips to the resume row. It returns a record
// when the file turns out to have nothing left to ship (ok true), or ok false with the file
// open for nextRow.
func (st *stream) open(ctx context.Context, f fileInfo) (source.Record, bool, error) {
	o := st.src.opts
	start, lastShort := int64(0), (*int64)(nil)
	switch {
	case st.has && !st.cur.Done && st.cur.FileID == f.ID && st.cur.Created == f.Created:
		start, lastShort = st.cur.Row, st.cur.ShortBytes
	case st.has && !st.cur.Done && st.cur.FileID == f.ID:
		st.log.Info("shipping a regenerated EventLogFile again from row 0", "file_id", f.ID, "was_created", st.cur.Created, "created", f.Created)
	}
	dl, err := o.Client.DownloadEventLogFile(st.src.ctx(ctx), f.ID)
	if err != nil {
		return source.Record{}, false, fmt.Errorf("download: %w", err)
	}
	of := st.newOpenFile(f, dl, newCSVReader(dl, o.MaxRowBytes))
	of.row, of.lastShort = start, lastShort // the rows shipped before count as consumed
	st.file = of
	// The cursor now names this file: rows are counted from 0 of it.
	st.cur = Cursor{V: cursorVersion, Created: f.Created, FileID: f.ID, Row: start, created: f.created}
	switch err := of.csv.Read(); {
	case errors.Is(err, io.EOF):
		return st.finish(SkipEmptyFile)
	case err != nil:
		return source.Record{}, false, fmt.Errorf("reading the header: %w", err)
	}
	var held source.Record
	if st.cut(of, &held) {
		return held, true, nil
	}
	st.header(of)
	if start > 0 {
		n, err := of.csv.Skip(start)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("the file has %d rows but %d were shipped before: the download is short", n, start)
			}
			return source.Record{}, false, err
		}
	}
	end, err := of.csv.AtEnd()
	if err != nil {
		return source.Record{}, false, err
	}
	if end {
		reason := SkipFileDone
		if start == 0 {
			reason = SkipEmptyFile
		}
		return st.finish(reason)
	}
	return source.Record{}, false, nil
}

// finish ends a file that has no (more) rows: it is done, unless its body is held (see held).
func (st *stream) finish(reason string) (source.Record, bool, error) {
	of := st.file
	if st.held(of) {
		return source.Record{Skip: true, SkipReason: SkipIncomplete, Cursor: st.hold(of)}, true, nil
	}
	st.checkLength(of)
	return st.done(of.info, of.row, reason), true, nil
}

// held reports whether a file whose body was read to its end stays open (see "Files" in the
// package doc): the body is shorter than LogFileLength, it is not as long as at the download
// that last held the file (that one would show nothing more is being written to it), and the
// file is not older than DownloadMaxAge. A body still being written and a complete one whose
// LogFileLength says more look alike, wherever they end: only a second download tells them apart.
func (st *stream) held(of *openFile) bool {
	f := of.info
	n := of.csv.BytesRead()
	if f.length <= 0 || n >= f.length || of.lastShort != nil && *of.lastShort == n {
		return false
	}
	return st.src.sfNow().Sub(f.created) <= st.src.opts.DownloadMaxAge
}

// hold ends the run's work on a held file (see held) after the rows consumed so far: it closes
// the file, stops the type for the run — the next call of Next says it waits for a later run
// (source.ErrWaiting), which names the file — and returns the cursor after those rows, not
// done, remembering the body's length.
func (st *stream) hold(of *openFile) source.Position {
	f := of.info
	n, row := of.csv.BytesRead(), of.row
	st.log.Warn("EventLogFile body is shorter than its LogFileLength: its whole rows are shipped and the file is downloaded again next run, to be resumed at the next row or, at the same length, taken as it is",
		"file_id", f.ID, "bytes", n, "length", f.length, "row", row)
	st.count("file_incomplete", 1)
	st.closeFile()
	st.finished = true
	st.waiting = fmt.Errorf("%w: EventLogFile %s (%s, created %s) is held after %d rows: its body is %d bytes, shorter than its LogFileLength %d "+
		"(still being written, or a LogFileLength that says more); the next run downloads it again and ships the rest, or takes it as it is at the same length",
		source.ErrWaiting, f.ID, st.typ, f.Created, row, n, f.length)
	st.cur = Cursor{V: cursorVersion, Created: f.Created, FileID: f.ID, Row: row, ShortBytes: &n, created: f.created}
	return source.CursorJSON(appendCursor(nil, f.Created, f.ID, row, false, st.daily(), &n))
}

// checkLength notes a file finished with a body shorter than its LogFileLength (see held): a
// download of the same length as the last one, or a file older than DownloadMaxAge. It is
// complete as downloaded: warning and the file_short counter.
func (st *stream) checkLength(of *openFile) {
	f := of.info
	n := of.csv.BytesRead()
	if f.length <= 0 || n >= f.length {
		return
	}
	why := "the same length as the last download: nothing more is being written to it"
	if of.lastShort == nil || *of.lastShort != n {
		why = "older than download_max_age"
	}
	st.log.Warn("EventLogFile body shorter than its LogFileLength taken as it is ("+why+"); the file is complete as downloaded",
		"file_id", f.ID, "bytes", n, "length", f.length, "rows", of.row)
	st.count("file_short", 1)
}

// cut handles a record just read (the header, a row, or a row over MaxRowBytes) that ended
// without a line break, at the end of the body. When the file is held (see held), the record is
// not taken — however many fields it holds and whatever its size: a cut right after a comma, or
// inside the header, reads as a record as whole as any — and cut writes into rec the skip
// record that holds the file at the row before it, and returns true. Otherwise the record is
// taken as it is.
func (st *stream) cut(of *openFile, rec *source.Record) bool {
	if !of.csv.Unterminated() || !st.held(of) {
		return false
	}
	*rec = source.Record{Skip: true, SkipReason: SkipIncomplete, Cursor: st.hold(of)}
	return true
}

// header takes the field names from the file's first record, its CSV header: the header is
// the truth, whatever LogFileFieldNames says (a newer API version adds columns, and the listing
// may order them differently). Names are trimmed of surrounding white space; an empty one is
// named by its position. LogFileFieldTypes is matched to the header by name, and builds the
// file's shaping plan.
func (st *stream) header(of *openFile) {
	o := st.src.opts
	names := make([]string, of.csv.NumFields())
	for i := range names {
		names[i] = strings.TrimSpace(string(of.csv.Field(i)))
		if names[i] == "" {
			names[i] = "_column_" + strconv.Itoa(i+1)
		}
	}
	of.names = names
	of.kinds = make([]shape.Kind, len(names))
	if !o.StringValues {
		listed, types := splitNames(of.info.names), splitNames(of.info.types)
		byName := map[string]string{}
		for i, n := range listed {
			if i < len(types) {
				byName[strings.ToUpper(n)] = types[i]
			}
		}
		for i, n := range names {
			of.kinds[i] = kindOf(byName[strings.ToUpper(n)])
		}
	}
	for _, c := range []string{o.TimestampColumn, "TIMESTAMP_DERIVED", "TIMESTAMP"} {
		for i, n := range names {
			if strings.EqualFold(n, c) && !containsInt(of.tsIdx, i) {
				of.tsIdx = append(of.tsIdx, i)
			}
		}
	}
	of.plan = o.Shaper.Plan(shape.Schema{Source: Name, Type: st.typ, Fields: names, Labels: st.labels})
}

// kindOf maps a LogFileFieldTypes entry to the JSON kind of its values.
func kindOf(typ string) shape.Kind {
	switch typ {
	case "Number", "Double", "Integer", "Long", "Decimal":
		return shape.Number
	case "Boolean":
		return shape.Bool
	}
	return shape.String
}

// nextRow ships the next row of the open file into rec, which it overwrites whole. ok false
// with a nil error means the file was finished without a record to return (the caller moves
// on). The record is filled in place, not returned: it is 152 bytes, and each copy of it
// costs real time beyond its instructions (a copy read back right after it was written).
func (st *stream) nextRow(rec *source.Record) (bool, error) {
	of := st.file
	r := &of.rec
	r.Reset()
	switch err := of.csv.Read(); {
	case err == nil: // nearly every row
	case errors.Is(err, io.EOF):
		done, ok, err := st.finish(SkipFileDone)
		*rec = done
		return ok, err
	case errors.Is(err, errRowTooLarge):
		if st.cut(of, rec) { // the rest of it comes with the whole body
			return true, nil
		}
		of.row++
		st.count("row_too_large", 1)
		st.log.Warn("CSV row larger than max_row_bytes skipped", "file_id", of.info.ID, "row", of.row-1, "max_row_bytes", st.src.opts.MaxRowBytes)
		*rec = source.Record{Skip: true, SkipReason: SkipRowTooLarge}
		return st.rowRecord(rec)
	case err != nil:
		return false, err
	}
	if st.cut(of, rec) {
		return true, nil
	}
	st.fill(r)
	nf := of.csv.NumFields()
	if of.plan.UsesID() {
		r.ID = append(r.ID, of.info.ID...)
		r.ID = append(r.ID, ':')
		r.ID = strconv.AppendInt(r.ID, of.row, 10)
	}
	r.Time = of.info.logDate
	found := false
	for _, i := range of.tsIdx {
		if i < nf {
			if t, ok := of.clock.parse(of.csv.Field(i)); ok {
				r.Time, found = t, true
				break
			}
		}
	}
	if !found {
		of.fallbacks++
	}
	of.row++
	rec.Shape(of.plan, r)
	return st.rowRecord(rec)
}

// fill makes the record of the current CSV row without copying its values (they are ranges
// of the reader's buffer, valid until it reads on): one field per header name (missing cells
// empty), and the cells beyond the header joined into ExtraField.
func (st *stream) fill(r *shape.Record) {
	of := st.file
	c := of.csv
	nf := c.NumFields()
	set := min(nf, len(of.names))
	r.Use(c.Data())
	r.Columns(of.names, set)
	kinds := of.kinds[:set]
	for i, f := range c.Fields()[:set] {
		kind := kinds[i]
		if f.start == f.end {
			kind = shape.String
		}
		r.SetColumn(i, kind, f.plain, f.start, f.end)
	}
	if nf > len(of.names) {
		x := of.extra[:0]
		for i := len(of.names); i < nf; i++ {
			if i > len(of.names) {
				x = append(x, ',')
			}
			x = append(x, c.Field(i)...)
		}
		of.extra = x
		r.EndField(ExtraField, shape.String, append(r.AppendTo(), x...))
	}
	r.Type = st.typ
}

// rowRecord stamps a row's record with the cursor after it, looking ahead to mark the file's
// last row done.
func (st *stream) rowRecord(rec *source.Record) (bool, error) {
	of := st.file
	f := &of.info
	end, err := of.csv.AtEnd()
	done := false
	if err == nil && end {
		if st.held(of) {
			rec.Cursor = st.hold(of)
			return true, nil
		}
		st.checkLength(of)
		done = true
		st.closeFile()
	}
	st.cur = Cursor{V: cursorVersion, Created: f.Created, FileID: f.ID, Row: of.row, Done: done, created: f.created}
	rec.Cursor = source.LazyCursor(st.pos.at(of.filePos, of.row, done))
	return true, nil
}

func splitNames(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
