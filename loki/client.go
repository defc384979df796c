package loki

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"google.golang.org/protobuf/encoding/protowire"
)

// Defaults applied to zero Options fields.
const (
	DefaultTimeout               = 30 * time.Second
	DefaultTargetCompressedBytes = 1 << 20
	DefaultMaxRequestBytes       = 4 << 20
	DefaultMaxEntriesPerRequest  = 10000
	DefaultMaxAttempts           = 9
	DefaultMinBackoff            = 500 * time.Millisecond
	DefaultMaxBackoff            = 30 * time.Second
	DefaultMaxRetryAfter         = 60 * time.Second
	DefaultSplitAfter429         = 3
	DefaultUserAgent             = "sf2loki"
)

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("loki: invalid client options")

// TLSOptions configures TLS towards the receiver. The zero value uses the
// system roots.
type TLSOptions struct {
	// CAFile is a PEM bundle of extra trusted roots (added to the system pool).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key (mutual TLS);
	// both or neither.
	CertFile string
	KeyFile  string
	// ServerName overrides the name checked against the server certificate.
	ServerName string
	// InsecureSkipVerify disables server certificate verification. Only when
	// explicitly asked for.
	InsecureSkipVerify bool
}

// Options configures a Client. Zero values mean the documented defaults; the
// secret values (Password, BearerToken) are passed in by the caller, which
// reads them from wherever they are kept.
type Options struct {
	// URL is the full push endpoint, e.g. https://loki:3100/loki/api/v1/push
	// (VictoriaLogs: /insert/loki/api/v1/push). Required. Userinfo in the URL
	// is used as basic auth when Username is empty, and never logged. A
	// redirect is not followed (net/http would re-issue the push as a GET and
	// read the page it lands on as the answer): it holds the entries with
	// ErrUnexpectedStatus.
	URL string
	// TenantID is sent as X-Scope-OrgID when set.
	TenantID string
	// Username and Password are sent as HTTP basic auth when Username or
	// Password is set (Grafana Cloud: the numeric user id and a token).
	Username string
	Password string
	// BearerToken is sent as "Authorization: Bearer …"; exclusive with basic
	// auth.
	BearerToken string
	// Headers are extra request headers (Content-Type, Content-Encoding,
	// Authorization and X-Scope-OrgID are the client's own and not allowed).
	Headers map[string]string
	// UserAgent defaults to DefaultUserAgent.
	UserAgent string
	// TLS configures certificate checks and client certificates.
	TLS TLSOptions
	// Timeout bounds each HTTP attempt; default DefaultTimeout. The context
	// passed to Push bounds the whole push, retries included.
	Timeout time.Duration
	// Encoding is EncodingProtobuf (default) or EncodingJSON.
	Encoding Encoding
	// Gzip compresses JSON bodies (Content-Encoding: gzip). Not allowed with
	// protobuf, which is always snappy.
	Gzip bool
	// TargetCompressedBytes is the compressed request size aimed at, using the
	// compression ratio seen so far; default DefaultTargetCompressedBytes
	// (1 MiB).
	TargetCompressedBytes int
	// MaxRequestBytes caps the uncompressed encoded size of a request; default
	// DefaultMaxRequestBytes (4 MiB, under Loki's 6 MiB ingestion burst). An
	// entry larger than this is sent alone.
	MaxRequestBytes int
	// MaxEntriesPerRequest caps the entries per request; default
	// DefaultMaxEntriesPerRequest.
	MaxEntriesPerRequest int
	// MaxAttempts caps how many times one request is sent: 1 never retries;
	// 0 means DefaultMaxAttempts. Counting attempts rather than retries keeps
	// "no retry" distinct from "unset".
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential backoff between retries;
	// defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a Retry-After answer is honored; default
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// SplitAfter429 is the number of consecutive 429 answers after which a
	// request of several entries is split in halves; default
	// DefaultSplitAfter429. A request refused with 429 that has no retry left,
	// or no time for the next one, is split then.
	SplitAfter429 int
	// MaxLineBytes caps a line's length in bytes; longer lines are cut on a
	// UTF-8 boundary and marked with TruncatedMetadataName, unless the marker
	// breaks Limits (structured metadata disallowed, or the entry's own at the
	// receiver's limit): the line is then sent cut without it. Default
	// DefaultMaxLineBytes (256 KiB); negative disables the cap.
	MaxLineBytes int
	// Labels configures the label guard applied to every entry's labels.
	Labels LabelOptions
	// Limits are the receiver's timestamp and structured-metadata limits,
	// checked before sending; zero values are Loki's defaults.
	Limits Limits
	// Logger receives debug and warning logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the wall clock (used for HTTP-date Retry-After); nil means
	// time.Now.
	Now func() time.Time
	// Proxy selects the proxy of each request (as http.Transport.Proxy); nil
	// means http.ProxyFromEnvironment. Ignored with Transport.
	Proxy func(*http.Request) (*url.URL, error)
	// Transport replaces the HTTP transport (tests and the in-process demo
	// receiver); the TLS options are then ignored.
	Transport http.RoundTripper
}

// Client pushes entries to one Loki endpoint. It is safe for concurrent use.
type Client struct {
	url      string
	opts     Options
	guard    *LabelGuard
	http     *http.Client
	headers  http.Header
	policy   retryPolicy
	log      *slog.Logger
	ratioBit atomic.Uint64 // float64 bits: compressed/uncompressed seen recently

	spareScratch atomic.Pointer[scratch]
	spareWire    atomic.Pointer[wireBuf]
}

// validTenant reports a tenant ID Loki accepts: 1 to 150 of A-Z, a-z, 0-9 and !-_.*'() (a
// loop, not a regular expression: `{1,150}` compiles into a program of 150 copies, 0.6 ms and
// 137 KB at every start).
func validTenant(s string) bool {
	if len(s) == 0 || len(s) > 150 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("!-_.*'()", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// New returns a client for opts, or an error wrapping ErrInvalidOptions.
func New(opts Options) (*Client, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	c := &Client{opts: o, log: o.Logger}
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: URL: %w", ErrInvalidOptions, redactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%w: URL %q: need http(s)://host/path", ErrInvalidOptions, u.Redacted())
	}
	if u.User != nil {
		if o.Username == "" && o.Password == "" && o.BearerToken == "" {
			o.Username = u.User.Username()
			o.Password, _ = u.User.Password()
		}
		u.User = nil
	}
	// Credentials never stay in the URL, so the URL (and the transport's
	// errors, which quote it) can be logged.
	c.url = u.String()
	if c.guard, err = NewLabelGuard(o.Labels); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if c.headers, err = o.headers(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	rt := o.Transport
	if rt == nil {
		tr := cleanhttp.DefaultPooledTransport()
		if tr.TLSClientConfig, err = o.TLS.config(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		if o.Proxy != nil {
			tr.Proxy = o.Proxy
		}
		tr.DialContext = wholeBodies(tr.DialContext)
		rt = tr
	}
	c.http = &http.Client{Transport: rt, Timeout: o.Timeout, CheckRedirect: keepRedirect}
	c.policy = retryPolicy{
		maxRetries:    o.MaxAttempts - 1,
		minBackoff:    o.MinBackoff,
		maxBackoff:    o.MaxBackoff,
		maxRetryAfter: o.MaxRetryAfter,
		splitAfter429: o.SplitAfter429,
		now:           o.Now,
		log:           o.Logger,
	}
	c.opts = o
	c.storeRatio(0.5)
	return c, nil
}

// keepRedirect makes a redirect the answer to the push. Followed, a 301, 302 or 303 turns the
// POST into a GET without a body, and the 200 of the page it lands on (an auth proxy's login
// page) would read as an acceptance of entries that were never stored.
func keepRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (o Options) resolve() (Options, error) {
	if o.URL == "" {
		return o, errors.New("URL is required")
	}
	if o.Encoding != EncodingProtobuf && o.Encoding != EncodingJSON {
		return o, fmt.Errorf("unknown encoding %d", o.Encoding)
	}
	if o.Gzip && o.Encoding == EncodingProtobuf {
		return o, errors.New("gzip applies to the JSON encoding only; protobuf is always snappy-compressed")
	}
	if o.BearerToken != "" && (o.Username != "" || o.Password != "") {
		return o, errors.New("set either basic auth (username/password) or a bearer token, not both")
	}
	if o.TenantID != "" && (!validTenant(o.TenantID) || o.TenantID == "." || o.TenantID == "..") {
		return o, fmt.Errorf("tenant id %q: need 1-150 characters of [A-Za-z0-9!-_.*'()], one tenant only", o.TenantID)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.TargetCompressedBytes, DefaultTargetCompressedBytes)
	def(&o.MaxRequestBytes, DefaultMaxRequestBytes)
	def(&o.MaxEntriesPerRequest, DefaultMaxEntriesPerRequest)
	def(&o.MaxAttempts, DefaultMaxAttempts)
	def(&o.SplitAfter429, DefaultSplitAfter429)
	def(&o.MaxLineBytes, DefaultMaxLineBytes)
	defD(&o.Timeout, DefaultTimeout)
	defD(&o.MinBackoff, DefaultMinBackoff)
	defD(&o.MaxBackoff, DefaultMaxBackoff)
	defD(&o.MaxRetryAfter, DefaultMaxRetryAfter)
	o.Limits = o.Limits.WithDefaults()
	if o.TargetCompressedBytes < 0 || o.MaxRequestBytes < 0 || o.MaxEntriesPerRequest < 0 || o.SplitAfter429 < 0 || o.MaxAttempts < 0 {
		return o, errors.New("size and count limits must not be negative")
	}
	if o.MaxBackoff < o.MinBackoff {
		return o, fmt.Errorf("max backoff %s is below min backoff %s", o.MaxBackoff, o.MinBackoff)
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

func (o Options) headers() (http.Header, error) {
	h := make(http.Header)
	for k, v := range o.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Type", "Content-Encoding", "Content-Length", "Authorization", "X-Scope-Orgid":
			return nil, fmt.Errorf("header %q is set by the client itself", k)
		}
		h.Set(k, v)
	}
	h.Set("User-Agent", o.UserAgent)
	if o.Encoding == EncodingJSON {
		h.Set("Content-Type", "application/json")
		if o.Gzip {
			h.Set("Content-Encoding", "gzip")
		}
	} else {
		h.Set("Content-Type", "application/x-protobuf")
		h.Set("Content-Encoding", "snappy")
	}
	if o.TenantID != "" {
		h.Set("X-Scope-OrgID", o.TenantID)
	}
	switch {
	case o.BearerToken != "":
		h.Set("Authorization", "Bearer "+o.BearerToken)
	case o.Username != "" || o.Password != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(o.Username+":"+o.Password)))
	}
	return h, nil
}

func (t TLSOptions) config() (*tls.Config, error) {
	// InsecureSkipVerify is false unless the operator explicitly asks.
	cfg := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s: no PEM certificates found", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("TLS client certificate needs both cert file and key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New("cannot parse URL")
	}
	return err
}

func (c *Client) ratio() float64 { return math.Float64frombits(c.ratioBit.Load()) }

func (c *Client) storeRatio(r float64) { c.ratioBit.Store(math.Float64bits(min(max(r, 0.02), 1))) }

// push is the state of one Push call.
type push struct {
	c       *Client
	entries []Entry
	res     *Result
	s       *scratch
	// out, while a body is encoded, takes each full piece (snappyPiece bytes) of the
	// uncompressed encoding (see spill); nil encodes the whole body into one slice.
	out func(piece []byte)
}

// Push sends entries and reports, per entry, what became of them. It never
// returns before every entry has an outcome; ctx bounds the whole push,
// retries included, and entries left unsent when it ends are NotDelivered.
// Push does not modify entries.
func (c *Client) Push(ctx context.Context, entries []Entry) Result {
	res := Result{Outcomes: make([]Outcome, len(entries))}
	if len(entries) == 0 {
		return res
	}
	if len(entries) > math.MaxInt32 {
		res.Err = fmt.Errorf("loki: %d entries in one push, at most %d", len(entries), math.MaxInt32)
		return res
	}
	p := &push{c: c, entries: entries, res: &res, s: c.getScratch()}
	defer c.putScratch(p.s)
	p.prepareAt(c.opts.Now().Add(clockOffset(ctx)))
	res.Err = p.run(func(lo, hi int) error { return p.send(ctx, lo, hi, false) })
	p.finish()
	return res
}

// run cuts the prepared items into requests, one stream each, by the size and count caps, and
// calls send for each, in order, until one fails.
func (p *push) run(send func(lo, hi int) error) error {
	o := &p.c.opts
	limit := o.MaxRequestBytes
	if o.Encoding == EncodingProtobuf || o.Gzip {
		limit = min(limit, int(float64(o.TargetCompressedBytes)/p.c.ratio()))
	} else {
		limit = min(limit, o.TargetCompressedBytes)
	}
	envelope := 0
	if o.Encoding == EncodingJSON {
		envelope = len(`{"streams":[]}`)
	}
	items := p.s.items
	lo, size, prev := 0, envelope, int32(-1)
	for i := range items {
		overhead := 0
		if items[i].stream != prev {
			overhead = streamOverhead(o.Encoding, p.labels(items[i].stream))
		}
		// One stream per request: Loki's ingester answers a request for its last stream only, so
		// an entry it refused in an earlier stream (too far behind, the per-stream rate limit, the
		// stream limit) would be answered 204 with the rest, and taken as accepted.
		if i > lo && (overhead > 0 || size+items[i].size > limit || i-lo >= o.MaxEntriesPerRequest) {
			if err := send(lo, i); err != nil {
				return err
			}
			// The next request starts with this entry's stream.
			lo, size, overhead = i, envelope, streamOverhead(o.Encoding, p.labels(items[i].stream))
		}
		size += overhead + items[i].size
		prev = items[i].stream
	}
	if lo < len(items) {
		return send(lo, len(items))
	}
	return nil
}

// prepare checks labels and timestamps, applies the line cap, and fills the items sorted by
// stream, time and input position.
func (p *push) prepare() { p.prepareAt(p.c.opts.Now()) }

// prepareAt is prepare with the timestamps checked against the receiver's clock reading now.
func (p *push) prepareAt(now time.Time) {
	s, o := p.s, &p.c.opts
	accept := o.Limits.at(now)
	// Consecutive entries mostly share their labels, often the very same string: the last
	// entry's stream is taken without a lookup when its key is equal.
	lastKey, lastSID := "", int32(-1)
	for i := range p.entries {
		e := &p.entries[i]
		key := e.Labels.String()
		sid := lastSID
		if sid < 0 || key != lastKey {
			var ok bool
			if sid, ok = s.index[key]; !ok {
				sid = int32(len(s.streams))
				s.streams = append(s.streams, stream{labels: e.Labels, err: p.c.guard.Check(e.Labels)})
				s.index[key] = sid
			}
			lastKey, lastSID = key, sid
		}
		if err := s.streams[sid].err; err != nil {
			reason := ReasonInvalidLabels
			if le, ok := err.(*LabelError); ok {
				reason = le.Reason()
			}
			p.reject(i, reason, 0, err.Error())
			continue
		}
		if e.Timestamp.IsZero() || e.Timestamp.Before(minTimestamp) || e.Timestamp.After(maxTimestamp) {
			p.reject(i, ReasonInvalidTimestamp, 0, "timestamp "+e.Timestamp.String()+" is outside the Unix-nanosecond range")
			continue
		}
		ns := e.Timestamp.UnixNano()
		if reason, detail := accept.check(e, ns); reason != "" {
			p.reject(i, reason, 0, detail)
			continue
		}
		line, cut := CapLine(e.Line, o.MaxLineBytes)
		it := item{ns: ns, idx: int32(i), stream: sid, line: len(line)}
		mark := p.marked(e, &it)
		if cut {
			p.res.Truncated++
			p.res.Truncations = append(p.res.Truncations, Truncation{Index: i, Bytes: len(line), Marked: mark})
		}
		it.body = entryBodySize(e, it.ns, it.line, mark)
		if o.Encoding == EncodingJSON {
			it.size = jsonEntrySize(e, it.ns, it.line, mark)
		} else {
			it.size = protowire.SizeTag(fieldStreamEntries) + protowire.SizeBytes(it.body)
		}
		s.items = append(s.items, it)
	}
	// Order streams by their canonical string so output does not depend on
	// how the caller interleaved them.
	n := len(s.streams)
	s.remap = slices.Grow(s.remap[:0], 2*n)[:n]
	for i := range s.remap {
		s.remap[i] = int32(i)
	}
	slices.SortFunc(s.remap, func(a, b int32) int {
		return strings.Compare(s.streams[a].labels.String(), s.streams[b].labels.String())
	})
	rank := s.remap[n : 2*n]
	for r, sid := range s.remap[:n] {
		rank[sid] = int32(r)
	}
	// Bucket the items by stream rank, keeping input order (a counting sort),
	// then sort each stream by time only where the caller's order was not
	// already oldest first, which is the common case.
	counts := slices.Grow(s.counts[:0], n+1)[:n+1]
	clear(counts)
	for i := range s.items {
		r := rank[s.items[i].stream]
		s.items[i].stream = r
		counts[r+1]++
	}
	for r := 1; r <= n; r++ {
		counts[r] += counts[r-1]
	}
	sorted := slices.Grow(s.spare[:0], len(s.items))[:len(s.items)]
	for _, it := range s.items {
		sorted[counts[it.stream]] = it
		counts[it.stream]++
	}
	s.items, s.spare, s.counts = sorted, s.items, counts
	byTime := func(a, b item) int {
		if c := cmp.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	}
	for lo := 0; lo < len(sorted); {
		hi := lo + 1
		for hi < len(sorted) && sorted[hi].stream == sorted[lo].stream {
			hi++
		}
		if seg := sorted[lo:hi]; !slices.IsSortedFunc(seg, byTime) {
			slices.SortFunc(seg, byTime)
		}
		lo = hi
	}
}

// marked reports whether the entry of it, its line cut, carries the truncation marker: only
// when the receiver takes structured metadata and the marker keeps the entry's within the
// receiver's limits. The receiver refuses an entry over them whole; cut and shipped without the
// marker, the line is kept, and Result.Truncations still reports the cut.
func (p *push) marked(e *Entry, it *item) bool {
	if it.line == len(e.Line) {
		return false
	}
	l := &p.c.opts.Limits
	if l.DisallowStructuredMetadata {
		return false
	}
	if l.MaxMetadataEntries > 0 && len(e.Metadata)+1 > l.MaxMetadataEntries {
		return false
	}
	return l.MaxMetadataBytes <= 0 || MetadataBytes(e.Metadata)+len(TruncatedMetadataName)+decimalLen(len(e.Line)) <= l.MaxMetadataBytes
}

// labels returns the label set of the stream ranked r.
func (p *push) labels(r int32) *Labels { return &p.s.streams[p.s.remap[r]].labels }
