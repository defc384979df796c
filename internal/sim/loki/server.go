package loki

import (
	"bytes"
	"cmp"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golang/snappy"
)

// PushPath is the only path the receiver serves.
const PushPath = "/loki/api/v1/push"

// Loki's default limits (docs/architecture.md, "Loki facts"), used for zero Options fields.
const (
	DefaultMaxRecvBytes           = 100 << 20
	DefaultMaxLineBytes           = 256 << 10
	DefaultMaxLabelNames          = 15
	DefaultMaxLabelNameBytes      = 1024
	DefaultMaxLabelValueBytes     = 2048
	DefaultRejectOldSamplesMaxAge = 7 * 24 * time.Hour
	DefaultCreationGracePeriod    = 10 * time.Minute
	DefaultOutOfOrderWindow       = time.Hour
	DefaultMaxMetadataBytes       = 64 << 10
	DefaultMaxMetadataEntries     = 128
	DefaultEmptyPushStatus        = http.StatusUnprocessableEntity
	DefaultMaxReturnedErrors      = 10
	noAuthTenant                  = "fake"
)

// Options configures a Server. Zero values mean Loki's defaults; a negative
// limit disables that check.
type Options struct {
	// Now is the receiver's clock for the timestamp checks and the Date header of its answers;
	// nil means time.Now.
	Now func() time.Time
	// RequireTenant makes X-Scope-OrgID mandatory (401 without it), like Loki
	// with auth_enabled. A present header is always validated.
	RequireTenant bool
	// Username and Password, when set, are required as HTTP basic auth (401).
	Username string
	Password string
	// BearerToken, when set, is required as "Authorization: Bearer" (401).
	BearerToken string
	// MaxRecvBytes caps the request body as received and after
	// decompression (413); default DefaultMaxRecvBytes.
	MaxRecvBytes int
	// MaxLineBytes is Loki's max_line_size; default DefaultMaxLineBytes.
	MaxLineBytes int
	// MaxLabelNames is max_label_names_per_series (service_name not counted).
	MaxLabelNames int
	// MaxLabelNameBytes and MaxLabelValueBytes cap label names and values.
	MaxLabelNameBytes  int
	MaxLabelValueBytes int
	// RejectOldSamplesMaxAge rejects entries older than now minus this.
	RejectOldSamplesMaxAge time.Duration
	// CreationGracePeriod rejects entries newer than now plus this.
	CreationGracePeriod time.Duration
	// OutOfOrderWindow rejects entries older than the stream's newest entry
	// minus this (too_far_behind).
	OutOfOrderWindow time.Duration
	// MaxMetadataBytes and MaxMetadataEntries cap structured metadata per
	// entry.
	MaxMetadataBytes   int
	MaxMetadataEntries int
	// DisallowStructuredMetadata answers 400 disallowed_structured_metadata
	// for entries carrying any (allow_structured_metadata: false).
	DisallowStructuredMetadata bool
	// RejectCompressedProtobuf refuses gzip/deflate around a protobuf body
	// (Loki accepts gzip(snappy(proto)); clients should never send it).
	RejectCompressedProtobuf bool
	// EmptyPushStatus is the answer to a push without streams: 422 (Loki v3,
	// default) or 204 (older Loki). Streams without entries are skipped, as
	// Loki does: a push of such streams only is answered 204.
	EmptyPushStatus int
	// IngestionRateBytes and IngestionBurstBytes enable the tenant rate limit
	// on line + metadata bytes (0 = off): a request larger than the burst is
	// refused with 429 every time, as Loki does.
	IngestionRateBytes  int
	IngestionBurstBytes int
	// MaxReturnedErrors caps the entries an ingester error names (Loki's
	// ingester max_returned_stream_errors); default DefaultMaxReturnedErrors,
	// negative means no cap. The count in the error is never capped.
	MaxReturnedErrors int
	// CountOnly keeps counts but not entries (long benchmarks and demos).
	// Duplicates are then not detected.
	CountOnly bool
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxRecvBytes, DefaultMaxRecvBytes)
	def(&o.MaxLineBytes, DefaultMaxLineBytes)
	def(&o.MaxLabelNames, DefaultMaxLabelNames)
	def(&o.MaxLabelNameBytes, DefaultMaxLabelNameBytes)
	def(&o.MaxLabelValueBytes, DefaultMaxLabelValueBytes)
	def(&o.MaxMetadataBytes, DefaultMaxMetadataBytes)
	def(&o.MaxMetadataEntries, DefaultMaxMetadataEntries)
	def(&o.EmptyPushStatus, DefaultEmptyPushStatus)
	def(&o.MaxReturnedErrors, DefaultMaxReturnedErrors)
	defD(&o.RejectOldSamplesMaxAge, DefaultRejectOldSamplesMaxAge)
	defD(&o.CreationGracePeriod, DefaultCreationGracePeriod)
	defD(&o.OutOfOrderWindow, DefaultOutOfOrderWindow)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Pair is a label or structured-metadata name/value pair.
type Pair struct {
	Name  string
	Value string
}

// Entry is an entry the receiver accepted (or rejected, see Rejection).
type Entry struct {
	// Tenant is the X-Scope-OrgID, or "fake" without one (Loki's no-auth tenant).
	Tenant string
	// Stream is the canonical label string, e.g. {job="x", source="y"}.
	Stream string
	// Labels are the stream labels, sorted by name, empty values dropped.
	Labels []Pair
	// Timestamp has nanosecond precision.
	Timestamp time.Time
	// Line is the line as received.
	Line string
	// Metadata is the structured metadata sorted by name, as Loki stores it.
	Metadata []Pair
}

// Label returns the value of the stream label name, or "".
func (e Entry) Label(name string) string {
	for _, p := range e.Labels {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// MetadataValue returns the value of the structured-metadata field name, or "".
func (e Entry) MetadataValue(name string) string {
	for _, p := range e.Metadata {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// Rejection is an entry the receiver refused, with Loki's reason label
// (e.g. "line_too_long", "too_far_behind") and message.
type Rejection struct {
	Entry
	Reason  string
	Message string
}

// Request records one request the receiver answered.
type Request struct {
	Method      string
	Path        string
	Header      http.Header
	BodyBytes   int // as received
	RawBytes    int // after decompression
	Status      int
	Streams     int
	Entries     int
	Accepted    int
	Fault       string // the injected fault that decided the answer, if any
	LostAnswer  bool   // the connection was dropped after processing
	ContentType string
}

// Server is the receiver; it implements http.Handler and is safe for
// concurrent use. Fault knobs may be changed while it serves.
type Server struct {
	opts Options

	mu         sync.Mutex
	entries    []Entry
	streams    map[string]*streamState // by tenant + "\x00" + stream
	dupes      []Entry
	rejected   []Rejection
	requests   []Request
	accepted   int
	faults     faults
	tokens     float64
	tokensAt   time.Time
	allowSMeta bool
}

type streamState struct {
	highest time.Time
	idx     []int          // positions in Server.entries
	seen    map[string]int // duplicate key (timestamp and line) -> count
}

// New returns a receiver for opts.
func New(opts Options) *Server {
	o := opts.withDefaults()
	return &Server{opts: o, streams: make(map[string]*streamState), allowSMeta: !o.DisallowStructuredMetadata}
}

// tenantRE is Loki's tenant rule, compiled on first use (its `{1,150}` is costly to compile and
// the simulator is linked into the sf2loki binary for `demo`).
var tenantRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9!\-_.*'()]{1,150}$`) })

// response is the receiver's answer before it is written.
type response struct {
	status     int
	header     http.Header
	body       string
	dropAnswer bool
}

func textResponse(status int, format string, args ...any) response {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	body := ""
	if format != "" {
		body = fmt.Sprintf(format, args...) + "\n"
	}
	return response{status: status, header: h, body: body}
}

// ServeHTTP implements http.Handler. A lost answer is simulated by hijacking
// the connection and closing it after the request was processed.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp := s.handle(r)
	if resp.dropAnswer {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
			return
		}
		// Hijacking unsupported (HTTP/2): fall back to a 500 that says so.
		resp = textResponse(http.StatusInternalServerError, "simulated lost response (hijack unsupported)")
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.status)
	if resp.body != "" {
		_, _ = io.WriteString(w, resp.body)
	}
}

func (s *Server) handle(r *http.Request) (resp response) {
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), ContentType: r.Header.Get("Content-Type")}
	defer func() {
		_ = r.Body.Close()
		// Dated by the receiver's clock, as Loki dates its answers (net/http keeps a Date the
		// handler set): a client estimates that clock from it.
		if resp.header == nil {
			resp.header = http.Header{}
		}
		resp.header.Set("Date", s.opts.Now().UTC().Format(http.TimeFormat))
		rec.Status, rec.LostAnswer = resp.status, resp.dropAnswer
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
	}()
	if d := s.latency(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			rec.Fault = "latency (client gave up)"
			return textResponse(http.StatusServiceUnavailable, "client went away")
		}
	}
	if r.URL.Path != PushPath {
		return textResponse(http.StatusNotFound, "404 page not found")
	}
	if r.Method != http.MethodPost {
		return textResponse(http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
	}
	if resp, ok := s.checkAuth(r); !ok {
		return resp
	}
	tenant := r.Header.Get("X-Scope-OrgID")
	switch {
	case tenant == "" && s.opts.RequireTenant:
		return textResponse(http.StatusUnauthorized, "no org id")
	case tenant == "":
		tenant = noAuthTenant
	case strings.Contains(tenant, "|"):
		return textResponse(http.StatusBadRequest, "multiple org IDs present in push request")
	case !tenantRE().MatchString(tenant) || tenant == "." || tenant == "..":
		return textResponse(http.StatusBadRequest, "invalid org id %q", tenant)
	}

	maxBody := s.maxBodyBytes()
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(maxBody)+1))
	rec.BodyBytes = len(body)
	if err != nil {
		return textResponse(http.StatusBadRequest, "reading body: %v", err)
	}
	if len(body) > maxBody {
		// Read on (bounded) so the client sees the 413 rather than a reset
		// connection while it is still writing.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20))
		rec.Fault = "max body size"
		return textResponse(http.StatusRequestEntityTooLarge, "request body too large: %d bytes, limit %d", len(body), maxBody)
	}
	if f, ok := s.nextForced(); ok {
		rec.Fault = fmt.Sprintf("forced %d", f.status)
		resp := textResponse(f.status, "%s", f.body)
		if f.retryAfter != "" {
			resp.header.Set("Retry-After", f.retryAfter)
		}
		return resp
	}
	streams, resp, ok := s.decode(r, body, &rec)
	if !ok {
		return resp
	}
	rec.Streams = len(streams)
	for _, st := range streams {
		rec.Entries += len(st.entries)
	}
	if rec.Streams == 0 {
		// Loki's distributor; a stream without entries is skipped instead, so a
		// request of such streams only is answered 204.
		return textResponse(s.opts.EmptyPushStatus, "%s", "error at least one valid stream is required for ingestion")
	}
	resp, accepted := s.ingest(tenant, streams)
	rec.Accepted = accepted
	if d := s.holdAnswer(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			rec.Fault = "answer held (client gave up after the entries were stored)"
		}
	}
	if s.takeDrop() {
		rec.Fault = "lost answer"
		resp.dropAnswer = true
	}
	return resp
}

func (s *Server) checkAuth(r *http.Request) (response, bool) {
	switch {
	case s.opts.BearerToken != "":
		if r.Header.Get("Authorization") != "Bearer "+s.opts.BearerToken {
			return textResponse(http.StatusUnauthorized, "invalid bearer token"), false
		}
	case s.opts.Username != "" || s.opts.Password != "":
		u, p, ok := r.BasicAuth()
		if !ok || u != s.opts.Username || p != s.opts.Password {
			return textResponse(http.StatusUnauthorized, "invalid basic auth"), false
		}
	}
	return response{}, true
}

// decode applies Content-Encoding and Content-Type in Loki's order. Loki matches
// Content-Encoding exactly ("gzip", not "GZIP"); the media type is parsed with
// mime.ParseMediaType, which ignores its case.
func (s *Server) decode(r *http.Request, body []byte, rec *Request) ([]wireStream, response, bool) {
	limit := s.opts.MaxRecvBytes
	enc := r.Header.Get("Content-Encoding")
	var err error
	switch enc {
	case "", "snappy":
	case "gzip":
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = readCapped(zr, limit)
		}
	case "deflate":
		body, err = readCapped(flate.NewReader(bytes.NewReader(body)), limit)
	default:
		return nil, textResponse(http.StatusBadRequest, "Content-Encoding %q not supported", enc), false
	}
	if errors.Is(err, errTooLarge) {
		return nil, textResponse(http.StatusRequestEntityTooLarge, "decompressed request body too large, limit %d", limit), false
	}
	if err != nil {
		return nil, textResponse(http.StatusBadRequest, "decompressing %s body: %v", enc, err), false
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, textResponse(http.StatusBadRequest, "Content-Type %q: %v", ct, err), false
	}
	var streams []wireStream
	if mt == "application/json" {
		rec.RawBytes = len(body)
		streams, err = decodeJSON(body)
	} else {
		if s.opts.RejectCompressedProtobuf && (enc == "gzip" || enc == "deflate") {
			return nil, textResponse(http.StatusBadRequest, "protobuf must be snappy-compressed only, got Content-Encoding %s", enc), false
		}
		if bytes.HasPrefix(body, []byte("\xff\x06\x00\x00sNaPpY")) {
			return nil, textResponse(http.StatusBadRequest, "body is framed snappy; Loki expects the snappy block format"), false
		}
		n, derr := snappy.DecodedLen(body)
		if derr == nil && n > limit {
			return nil, textResponse(http.StatusRequestEntityTooLarge, "decompressed request body too large: %d bytes, limit %d", n, limit), false
		}
		var raw []byte
		if raw, err = snappy.Decode(nil, body); err == nil {
			rec.RawBytes = len(raw)
			streams, err = decodeProto(raw)
		} else {
			err = fmt.Errorf("snappy: %w", err)
		}
	}
	if err != nil {
		return nil, textResponse(http.StatusBadRequest, "decoding push request: %v", err), false
	}
	return streams, response{}, true
}

var errTooLarge = errors.New("too large")

func readCapped(r io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// candidate is an entry that passed the distributor checks.
type candidate struct {
	key    string
	stream int // the index of its stream in the request
	entry  Entry
}

// ingest validates like Loki's distributor (whole request first), applies the
// rate limit, then stores like the ingester (order window, dedup), stream by
// stream in request order, and answers as Loki does: the ingester's answer is
// what happened to the last stream it was given (pkg/ingester/instance.go), so
// when that stream had entries refused the answer is its error, naming at most
// MaxReturnedErrors entries (the distributor's validation errors are then not
// reported at all); otherwise the validation errors grouped by message, or 204
// when there were none, even though an earlier stream had entries refused.
// Neither is a complete account of what failed.
func (s *Server) ingest(tenant string, streams []wireStream) (response, int) {
	type parsed struct {
		labels []Pair
	}
	ps := make([]parsed, len(streams))
	for i, st := range streams {
		pairs, err := parseLabels(st.labels)
		if err != nil {
			return textResponse(http.StatusBadRequest, "couldn't parse labels: %v", err), 0
		}
		ps[i].labels = pairs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	var valErrs groupedErrors
	var cands []candidate
	validated, refused := 0, 0
	for i, st := range streams {
		labels, reason, msg := s.checkStream(ps[i].labels)
		canon := formatLabels(labels)
		for _, we := range st.entries {
			e := Entry{Tenant: tenant, Stream: canon, Labels: labels, Timestamp: we.ts, Line: we.line, Metadata: sortedPairs(we.metadata)}
			r, m := reason, msg
			if r == "" {
				r, m = s.checkEntry(now, &e)
			}
			if r != "" {
				s.rejected = append(s.rejected, Rejection{Entry: e, Reason: r, Message: m})
				valErrs.add(m)
				refused++
				continue
			}
			validated += len(e.Line) + metadataBytes(e.Metadata)
			cands = append(cands, candidate{key: tenant + "\x00" + canon, stream: i, entry: e})
		}
	}
	if len(cands) > 0 && !s.takeTokens(now, validated) {
		// All or nothing: nothing stored, and the rejections above were not
		// final either (the client will resend them).
		s.rejected = s.rejected[:len(s.rejected)-refused]
		return textResponse(http.StatusTooManyRequests, "Ingestion rate limit exceeded for user %s (limit: %d bytes/sec) while attempting to ingest '%d' lines totaling '%d' bytes, reduce log volume or contact your Loki administrator to see if the limit can be increased",
			tenant, s.opts.IngestionRateBytes, len(cands), validated), 0
	}
	accepted := 0
	// The ingester pushes each stream of the request in turn, and its answer is
	// the last stream's alone: refusals in the streams before it are answered by
	// nothing (last stays nil when the last stream was stored whole).
	var last *streamFailure
	for lo := 0; lo < len(cands); {
		hi := lo + 1
		for hi < len(cands) && cands[hi].stream == cands[lo].stream {
			hi++
		}
		var f streamFailure
		for _, c := range cands[lo:hi] {
			if r, m := s.store(c); r != "" {
				s.rejected = append(s.rejected, Rejection{Entry: c.entry, Reason: r, Message: m})
				f.entries = append(f.entries, failedEntry{ts: c.entry.Timestamp, msg: m})
				continue
			}
			accepted++
		}
		last = nil
		if len(f.entries) > 0 {
			f.total, f.stream = hi-lo, cands[lo].entry.Stream
			last = &f
		}
		lo = hi
	}
	s.accepted += accepted
	switch {
	case last != nil:
		return textResponse(http.StatusBadRequest, "%s", last.message(tenant, s.opts.MaxReturnedErrors)), accepted
	case len(valErrs.order) > 0:
		return textResponse(http.StatusBadRequest, "%s", valErrs.String()), accepted
	}
	status := http.StatusNoContent
	if s.faults.successStatus != 0 {
		status = s.faults.successStatus
	}
	return response{status: status, header: http.Header{}}, accepted
}

// groupedErrors is the distributor's account of validation errors: each
// distinct message once, prefixed with its count when there is more than one
// message or more than one occurrence, joined by "; " (Loki's order is a map's,
// so callers cannot rely on it; here it is first occurrence).
type groupedErrors struct {
	order []string
	count map[string]int
}

func (g *groupedErrors) add(msg string) {
	if g.count == nil {
		g.count = map[string]int{}
	}
	if g.count[msg] == 0 {
		g.order = append(g.order, msg)
	}
	g.count[msg]++
}

func (g *groupedErrors) String() string {
	var b strings.Builder
	for i, m := range g.order {
		if i > 0 {
			b.WriteString("; ")
		}
		if n := g.count[m]; len(g.order) > 1 || n > 1 {
			fmt.Fprintf(&b, "%d errors like: ", n)
		}
		b.WriteString(m)
	}
	return b.String()
}

// streamFailure is the ingester's account of one stream's refused entries.
type streamFailure struct {
	stream  string
	total   int
	entries []failedEntry
}

type failedEntry struct {
	ts  time.Time
	msg string
}

// message renders the failure as Loki's ingester does: one line per refused
// entry, at most limit of them (limit < 0: all), then the totals.
func (f *streamFailure) message(tenant string, limit int) string {
	var b strings.Builder
	named := f.entries
	if limit >= 0 && len(named) > limit {
		named = named[:limit]
	}
	for _, e := range named {
		fmt.Fprintf(&b, "entry with timestamp %s ignored, reason: '%s',\n", e.ts.UTC().String(), e.msg)
	}
	fmt.Fprintf(&b, "user '%s', total ignored: %d out of %d for stream: %s", tenant, len(f.entries), f.total, f.stream)
	return b.String()
}

// checkStream drops empty-valued labels and applies the stream-level limits.
func (s *Server) checkStream(in []Pair) (labels []Pair, reason, msg string) {
	for _, p := range in {
		if p.Value != "" {
			labels = append(labels, p)
		}
	}
	slices.SortStableFunc(labels, func(a, b Pair) int { return cmp.Compare(a.Name, b.Name) })
	canon := formatLabels(labels)
	if len(labels) == 0 {
		return labels, "missing_labels", "error at least one label pair is required per stream"
	}
	n := 0
	for i, p := range labels {
		if i > 0 && labels[i-1].Name == p.Name {
			return labels, "duplicate_label_names", fmt.Sprintf("stream '%s' has duplicate label name: '%s'", canon, p.Name)
		}
		if strings.HasPrefix(p.Name, "__") {
			return labels, "invalid_labels", fmt.Sprintf("Error parsing labels '%s' with error: label name %q is reserved", canon, p.Name)
		}
		if lim := s.opts.MaxLabelNameBytes; lim > 0 && len(p.Name) > lim {
			return labels, "label_name_too_long", fmt.Sprintf("stream '%s' has label name too long: '%s'", canon, p.Name)
		}
		if lim := s.opts.MaxLabelValueBytes; lim > 0 && len(p.Value) > lim {
			return labels, "label_value_too_long", fmt.Sprintf("stream '%s' has label value too long: '%s'", canon, p.Value)
		}
		if !utf8.ValidString(p.Value) {
			return labels, "invalid_labels", fmt.Sprintf("Error parsing labels '%s' with error: invalid UTF-8 value", canon)
		}
		if p.Name != "service_name" {
			n++
		}
	}
	if lim := s.opts.MaxLabelNames; lim > 0 && n > lim {
		return labels, "max_label_names_per_series", fmt.Sprintf("entry for stream '%s' has %d label names; limit %d", canon, n, lim)
	}
	return labels, "", ""
}

// checkEntry applies the per-entry distributor checks in Loki's order, then
// the injected rejection predicate. Times in the messages are whole seconds
// (time.RFC3339), as Loki writes them: the oldest acceptable time it states
// can be up to a second before the cutoff it applies.
func (s *Server) checkEntry(now time.Time, e *Entry) (reason, msg string) {
	o := &s.opts
	if o.RejectOldSamplesMaxAge > 0 {
		if oldest := now.Add(-o.RejectOldSamplesMaxAge); e.Timestamp.Before(oldest) {
			return "greater_than_max_sample_age", fmt.Sprintf("entry for stream '%s' has timestamp too old: %s, oldest acceptable timestamp is: %s",
				e.Stream, e.Timestamp.UTC().Format(time.RFC3339), oldest.UTC().Format(time.RFC3339))
		}
	}
	if o.CreationGracePeriod > 0 && e.Timestamp.After(now.Add(o.CreationGracePeriod)) {
		return "too_far_in_future", fmt.Sprintf("entry for stream '%s' has timestamp too new: %s", e.Stream, e.Timestamp.UTC().Format(time.RFC3339))
	}
	maxLine := o.MaxLineBytes
	if s.faults.maxLine > 0 {
		maxLine = s.faults.maxLine
	}
	if maxLine > 0 && len(e.Line) > maxLine {
		return "line_too_long", fmt.Sprintf("Max entry size '%d' bytes exceeded for stream '%s' while adding an entry with length '%d' bytes", maxLine, e.Stream, len(e.Line))
	}
	if len(e.Metadata) > 0 {
		if !s.allowSMeta {
			return "disallowed_structured_metadata", fmt.Sprintf("stream '%s' includes structured metadata, but this feature is disallowed. Please see `limits_config.allow_structured_metadata` or contact your Loki administrator to enable it.", e.Stream)
		}
		if lim := o.MaxMetadataBytes; lim > 0 && metadataBytes(e.Metadata) > lim {
			return "structured_metadata_too_large", fmt.Sprintf("stream '%s' has structured metadata too large: '%d' bytes, limit: '%d' bytes", e.Stream, metadataBytes(e.Metadata), lim)
		}
		if lim := o.MaxMetadataEntries; lim > 0 && len(e.Metadata) > lim {
			return "structured_metadata_too_many", fmt.Sprintf("stream '%s' has too many structured metadata labels: '%d', limit: '%d'", e.Stream, len(e.Metadata), lim)
		}
	}
	if pred, reason := s.faults.reject, s.faults.rejectReason; pred != nil && pred(*e) {
		return reason, fmt.Sprintf("entry for stream '%s' with timestamp %s rejected: %s (injected)", e.Stream, e.Timestamp.UTC().Format(time.RFC3339Nano), reason)
	}
	return "", ""
}

// store applies the ingester rules: the out-of-order window (newest entry of
// the stream, earlier entries of this request included) and silent skipping
// of duplicates, which are counted. Loki's head block skips an entry whose
// timestamp and line equal a stored one's without comparing structured
// metadata, so two different rows with the same line and timestamp are one
// entry at the receiver.
func (s *Server) store(c candidate) (reason, msg string) {
	st := s.streams[c.key]
	if st == nil {
		st = &streamState{seen: make(map[string]int)}
		s.streams[c.key] = st
	}
	e := c.entry
	if w := s.opts.OutOfOrderWindow; w > 0 && !st.highest.IsZero() {
		if oldest := st.highest.Add(-w); e.Timestamp.Before(oldest) {
			return "too_far_behind", fmt.Sprintf("entry too far behind, entry timestamp is: %s, oldest acceptable timestamp is: %s",
				e.Timestamp.UTC().Format(time.RFC3339), oldest.UTC().Format(time.RFC3339))
		}
	}
	if e.Timestamp.After(st.highest) {
		st.highest = e.Timestamp
	}
	if s.opts.CountOnly {
		return "", ""
	}
	k := dupKey(e)
	if st.seen[k] > 0 {
		st.seen[k]++
		s.dupes = append(s.dupes, e)
		return "", ""
	}
	st.seen[k] = 1
	st.idx = append(st.idx, len(s.entries))
	s.entries = append(s.entries, e)
	return "", ""
}

func dupKey(e Entry) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(e.Timestamp.UnixNano(), 10))
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(len(e.Line)))
	b.WriteByte(0)
	b.WriteString(e.Line)
	return b.String()
}

func metadataBytes(md []Pair) int {
	n := 0
	for _, p := range md {
		n += len(p.Name) + len(p.Value)
	}
	return n
}

func sortedPairs(ps []Pair) []Pair {
	if len(ps) == 0 {
		return nil
	}
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b Pair) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func mapPairs(m map[string]string) []Pair {
	ps := make([]Pair, 0, len(m))
	for k, v := range m {
		ps = append(ps, Pair{Name: k, Value: v})
	}
	slices.SortFunc(ps, func(a, b Pair) int { return cmp.Compare(a.Name, b.Name) })
	return ps
}

// formatLabels renders labels the way Prometheus' labels.String does.
func formatLabels(ps []Pair) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(p.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// takeTokens applies the optional tenant token bucket; called with mu held.
func (s *Server) takeTokens(now time.Time, n int) bool {
	burst := s.faults.burstBytes
	if burst <= 0 {
		burst = s.opts.IngestionBurstBytes
	}
	rate := s.faults.rateBytes
	if rate <= 0 {
		rate = s.opts.IngestionRateBytes
	}
	if burst <= 0 {
		return true
	}
	if n > burst {
		return false
	}
	if rate <= 0 {
		return true
	}
	if s.tokensAt.IsZero() {
		s.tokens, s.tokensAt = float64(burst), now
	}
	s.tokens = min(float64(burst), s.tokens+now.Sub(s.tokensAt).Seconds()*float64(rate))
	s.tokensAt = now
	if s.tokens < float64(n) {
		return false
	}
	s.tokens -= float64(n)
	return true
}
