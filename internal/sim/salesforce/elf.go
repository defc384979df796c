package salesforce

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Interval values of EventLogFile.
const (
	IntervalDaily  = "Daily"
	IntervalHourly = "Hourly"
)

// EventLogFileSpec describes an EventLogFile to add. Zero fields take
// defaults: Interval Daily, LogDate the previous full bucket before now,
// CreatedDate now, Sequence 0 for Daily and 1 for Hourly, 100 rows.
type EventLogFileSpec struct {
	// ID fixes the record id (default: allocated, prefix 0AT).
	ID          string
	EventType   string // e.g. "Login", "API", "Report", "URI", "ApexExecution"
	Interval    string // IntervalDaily or IntervalHourly
	LogDate     time.Time
	CreatedDate time.Time
	Sequence    int
	// Rows is the number of generated CSV rows. TargetBytes, when set,
	// chooses Rows so that the file is about that long (e.g. 1 GiB).
	Rows        int
	TargetBytes int64
	// Body, when non-nil, is served verbatim instead of generated rows
	// (its first line must be the CSV header).
	Body []byte
	// FieldTypes is the LogFileFieldTypes of a file with an explicit Body
	// (comma-separated, in header order). By default each column is typed as
	// Salesforce documents it (Number for CPU_TIME, Boolean for SUCCESS, Id
	// for USER_ID, …; String for a column the simulator does not know).
	FieldTypes string
	// CRLF ends generated lines with \r\n instead of \n.
	CRLF bool
	// OversizedField, when > 0, makes the middle row carry a quoted
	// free-text field of that many bytes with embedded newlines, quotes and
	// commas (for parsers with a field-size cap).
	OversizedField int
	// VisibleAt hides the file from queries and downloads until then.
	VisibleAt time.Time
	// ReadyAt: before then the file is listed but its download answers 404
	// (Salesforce's "body not ready").
	ReadyAt time.Time
	// PartialUntil: before then the download serves only the first half
	// of the body's bytes (a blob listed before it was fully written), which
	// usually ends inside a row; the transfer itself ends cleanly.
	PartialUntil time.Time
	// LengthDelta is added to the body's size to make the listed
	// LogFileLength: positive lists more bytes than the download serves,
	// negative fewer (Salesforce documents LogFileLength only as the file's
	// length in bytes; whether it always equals the CSV as downloaded is not
	// documented).
	LengthDelta int64
}

// elfFile is the download side of an EventLogFile record.
type elfFile struct {
	body         *elfBody
	readyAt      time.Time
	partialUntil time.Time
	lengthDelta  int64
}

// AddEventLogFile adds an EventLogFile record with its (generated) CSV body
// and returns its id.
func (o *Org) AddEventLogFile(spec EventLogFileSpec) (string, error) {
	now := o.now().UTC()
	if spec.EventType == "" {
		return "", fmt.Errorf("%w: EventType is required", ErrInvalidValue)
	}
	if spec.Interval == "" {
		spec.Interval = IntervalDaily
	}
	span := 24 * time.Hour
	switch spec.Interval {
	case IntervalDaily:
	case IntervalHourly:
		span = time.Hour
		if spec.Sequence == 0 {
			spec.Sequence = 1
		}
	default:
		return "", fmt.Errorf("%w: interval %q", ErrInvalidValue, spec.Interval)
	}
	if spec.LogDate.IsZero() {
		spec.LogDate = now.Add(-span).Truncate(span)
	}
	spec.LogDate = spec.LogDate.UTC()
	if spec.CreatedDate.IsZero() {
		spec.CreatedDate = now
	}
	body := &elfBody{startMs: spec.LogDate.UnixMilli(), spanMs: span.Milliseconds(), bigRow: -1}
	names, types := "", ""
	if spec.Body != nil {
		body.explicit = spec.Body
		if n, t, err := ListedFields(bytes.NewReader(spec.Body)); err == nil {
			names, types = n, t
			if spec.FieldTypes != "" {
				types = spec.FieldTypes
			}
		}
	} else {
		body.tpl = templatesFor(o.opts.Seed, o.orgID[:15], spec.EventType, spec.CRLF)
		names, types = body.tpl.names, body.tpl.types
		switch {
		case spec.TargetBytes > 0:
			spec.Rows = int(float64(spec.TargetBytes-int64(len(body.tpl.header))) / body.tpl.avgLen)
		case spec.Rows == 0:
			spec.Rows = 100
		}
		if spec.Rows < 0 {
			spec.Rows = 0
		}
	}
	body.rows, body.spacingRows = spec.Rows, max(spec.Rows, 1)
	if spec.OversizedField > 0 && body.tpl != nil && spec.Rows > 0 {
		body.bigRow = spec.Rows / 2
		body.big = oversizedTemplate(o.opts.Seed, o.orgID[:15], spec.EventType, spec.CRLF, spec.OversizedField)
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	obj := o.objectByName("EventLogFile")
	rec, err := o.buildRecord(obj, Record{
		"Id": spec.ID, "EventType": spec.EventType, "Interval": spec.Interval, "LogDate": spec.LogDate,
		"CreatedDate": spec.CreatedDate, "Sequence": spec.Sequence, "LogFileContentType": "CSV",
		"LogFileFieldNames": names, "LogFileFieldTypes": types, "ApiVersion": o.apiVer,
		"CreatedById": syntheticUsers()[syntheticUserCount-1].id,
	}, now)
	if err != nil {
		return "", err
	}
	body.key = splitmix64(uint64(o.opts.Seed) ^ hashString(rec.id))
	body.length = body.lengthOf(body.rows)
	rec.vals["LogFileLength"] = float64(max(body.length+spec.LengthDelta, 0))
	rec.visibleAt = spec.VisibleAt
	rec.elf = &elfFile{body: body, readyAt: spec.ReadyAt, partialUntil: spec.PartialUntil, lengthDelta: spec.LengthDelta}
	o.addRecord(rec)
	return rec.id, nil
}

// RegenerateEventLogFile makes a (Daily) file be regenerated in place when
// the clock reaches at: same id, CreatedDate = at, and rows rows — a
// superset of the old content whose extra rows are late events scattered
// over the day. If at is not after now it applies immediately.
func (o *Org) RegenerateEventLogFile(id string, at time.Time, rows int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.byID[to15(id)]
	if r == nil || r.elf == nil {
		return fmt.Errorf("%w: EventLogFile %s", ErrNotFound, id)
	}
	if r.elf.body.explicit != nil {
		return fmt.Errorf("%w: file %s has an explicit body", ErrInvalidValue, id)
	}
	apply := func() {
		old := r.elf.body
		nb := *old
		nb.rows = max(rows, old.rows)
		nb.length = nb.lengthOf(nb.rows)
		ts := at.UTC().Truncate(time.Millisecond)
		r.elf = &elfFile{body: &nb, readyAt: r.elf.readyAt, partialUntil: r.elf.partialUntil, lengthDelta: r.elf.lengthDelta}
		r.vals["CreatedDate"] = ts
		r.vals["LastModifiedDate"] = ts
		r.vals["SystemModstamp"] = ts
		r.vals["LogFileLength"] = float64(max(nb.length+r.elf.lengthDelta, 0))
	}
	if at.After(o.now()) {
		o.schedule(at, apply)
	} else {
		apply()
	}
	return nil
}

// EventLogFileContent writes a file's current CSV content to w (for tests
// comparing downloads with the expected bytes).
func (o *Org) EventLogFileContent(id string, w io.Writer) error {
	o.mu.RLock()
	r := o.byID[to15(id)]
	var f *elfFile
	if r != nil {
		f = r.elf
	}
	o.mu.RUnlock()
	if f == nil {
		return fmt.Errorf("%w: EventLogFile %s", ErrNotFound, id)
	}
	return f.body.writeTo(w, f.body.rows)
}

// resetWriter aborts the connection once limit bytes have been written.
type resetWriter struct {
	w       http.ResponseWriter
	limit   int64
	written int64
}

func (rw *resetWriter) Write(p []byte) (int, error) {
	if rw.written+int64(len(p)) >= rw.limit {
		n := rw.limit - rw.written
		_, _ = rw.w.Write(p[:n])
		if fl, ok := rw.w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	n, err := rw.w.Write(p)
	rw.written += int64(n)
	return n, err
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}

func (o *Org) serveLogFile(w http.ResponseWriter, r *http.Request, c *execCtx, id string, reset *Fault) {
	o.applyDue(c.now)
	o.mu.RLock()
	rec := o.byID[to15(id)]
	var f *elfFile
	if rec != nil && rec.obj.name == "EventLogFile" && (rec.visibleAt.IsZero() || !rec.visibleAt.After(c.now)) {
		f = rec.elf
	}
	obj := o.objectByName("EventLogFile")
	o.mu.RUnlock()
	if !c.user.perms.canRead(obj) {
		writeAPIError(w, newAPIError(http.StatusForbidden, CodeInsufficientAccess, "insufficient access rights on object id"))
		return
	}
	if f == nil || (!f.readyAt.IsZero() && c.now.Before(f.readyAt)) {
		writeAPIError(w, notFound())
		return
	}
	if !f.partialUntil.IsZero() && c.now.Before(f.partialUntil) {
		half := f.body.length / 2
		o.streamBody(w, r, reset, "text/csv", func() int64 { return half }, func(dst io.Writer) error {
			return f.body.writeTo(&prefixWriter{w: dst, left: half}, f.body.rows)
		})
		return
	}
	o.streamBody(w, r, reset, "text/csv", func() int64 { return f.body.length },
		func(dst io.Writer) error { return f.body.writeTo(dst, f.body.rows) })
}

// prefixWriter passes the first left bytes to w and drops the rest.
type prefixWriter struct {
	w    io.Writer
	left int64
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	if len(b) > 0 {
		if _, err := p.w.Write(b); err != nil {
			return 0, err
		}
		p.left -= int64(len(b))
	}
	return n, nil
}

// streamBody writes a download, gzip-encoded when the client accepts it,
// with an optional connection reset after some bytes.
func (o *Org) streamBody(w http.ResponseWriter, r *http.Request, reset *Fault, contentType string, length func() int64, write func(io.Writer) error) {
	w.Header().Set("Content-Type", contentType)
	var dst io.Writer = w
	if reset != nil {
		dst = &resetWriter{w: w, limit: reset.ResetAfterBytes}
	}
	if !o.opts.DisableGzip && acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		zw, err := gzip.NewWriterLevel(dst, o.opts.GzipLevel)
		if err != nil {
			zw = gzip.NewWriter(dst)
		}
		if err := write(zw); err != nil {
			return
		}
		_ = zw.Close()
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(length(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	_ = write(dst)
}
