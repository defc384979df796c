package salesforce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind names a class of Salesforce request, for the per-kind call counts of
// Stats.
type Kind string

// Request kinds counted by Stats.
const (
	KindToken          Kind = "token"
	KindUserinfo       Kind = "userinfo"
	KindQuery          Kind = "query"         // SOQL pages, first and next
	KindToolingQuery   Kind = "tooling_query" // Tooling SOQL pages, first and next
	KindDescribe       Kind = "describe"
	KindDescribeGlobal Kind = "describe_global"
	KindLimits         Kind = "limits"
	KindEventLogFile   Kind = "eventlogfile_download"
	KindApexLogBody    Kind = "apexlog_body"
)

// mayCarrySecrets reports whether an answer to a request of kind k may carry credentials: the
// token endpoint's answer holds the access token first (and may hold a refresh or id token, a
// signature, an echo of the grant). Errors and logs describe such a body by its size and
// Content-Type and never quote any of it: a redaction of named fields would miss a truncated
// answer, or a field nobody thought of.
func (k Kind) mayCarrySecrets() bool { return k == KindToken }

// Stats is a snapshot of what a Client has done so far.
type Stats struct {
	// Calls counts HTTP requests sent per kind, retries included (every
	// attempt that reached the transport).
	Calls map[Kind]int64
	// Retries counts backoff retries of transient failures.
	Retries int64
	// Reauths counts requests repeated with a new token after a 401.
	Reauths int64
	// BytesRead counts response body bytes read, as they came off the
	// transport (compressed size for downloads requested with gzip).
	BytesRead int64
	// APIUsage is the last Sforce-Limit-Info api-usage reading, if any.
	APIUsage APIUsage
}

// TotalCalls is the sum of Calls over all kinds.
func (s Stats) TotalCalls() int64 {
	var n int64
	for _, v := range s.Calls {
		n += v
	}
	return n
}

// APIUsage is the org's daily API consumption as reported by the
// Sforce-Limit-Info response header (api-usage=Used/Limit).
type APIUsage struct {
	Used  int64
	Limit int64
	// At is the local time of the response that carried the reading; zero
	// when no reading was seen yet.
	At time.Time
}

// recorder collects Stats and the facts read from response headers.
type recorder struct {
	now func() time.Time

	mu      sync.Mutex
	calls   map[Kind]int64
	usage   APIUsage
	skew    time.Duration
	skewSet bool

	retries atomic.Int64
	reauths atomic.Int64
	bytes   atomic.Int64
}

func newRecorder(now func() time.Time) *recorder {
	return &recorder{now: now, calls: map[Kind]int64{}}
}

func (r *recorder) countCall(k Kind) {
	r.mu.Lock()
	r.calls[k]++
	r.mu.Unlock()
}

func (r *recorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{
		Calls:     maps.Clone(r.calls),
		Retries:   r.retries.Load(),
		Reauths:   r.reauths.Load(),
		BytesRead: r.bytes.Load(),
		APIUsage:  r.usage,
	}
}

// observe records Sforce-Limit-Info and the server clock from a response.
func (r *recorder) observe(resp *http.Response) {
	now := r.now()
	usage, okUsage := parseLimitInfo(resp.Header.Get("Sforce-Limit-Info"))
	date, errDate := http.ParseTime(resp.Header.Get("Date"))
	if !okUsage && errDate != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if okUsage {
		usage.At = now
		r.usage = usage
	}
	if errDate == nil {
		r.skew = date.Sub(now)
		r.skewSet = true
	}
}

// parseLimitInfo reads "api-usage=25/15000" out of a Sforce-Limit-Info value,
// which may list other entries ("per-app-api-usage=17/250(appName=x)").
func parseLimitInfo(v string) (APIUsage, bool) {
	for part := range strings.SplitSeq(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !strings.EqualFold(name, "api-usage") {
			continue
		}
		used, limit, ok := strings.Cut(val, "/")
		if !ok {
			return APIUsage{}, false
		}
		u, err1 := strconv.ParseInt(strings.TrimSpace(used), 10, 64)
		l, err2 := strconv.ParseInt(strings.TrimSpace(limit), 10, 64)
		if err1 != nil || err2 != nil || u < 0 || l < 0 {
			return APIUsage{}, false
		}
		return APIUsage{Used: u, Limit: l}, true
	}
	return APIUsage{}, false
}

// Counter attributes requests to one caller (a source) while the Client and
// its token are shared: every request made with a context from
// WithCounter is counted both in the Client's Stats and in the Counter.
// The zero value is ready to use; it is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	calls map[Kind]int64
	bytes atomic.Int64
}

// WithCounter returns a context whose requests are also counted in c.
func WithCounter(ctx context.Context, c *Counter) context.Context {
	return context.WithValue(ctx, counterKey{}, c)
}

// Calls returns the requests counted so far per kind (retries included).
func (c *Counter) Calls() map[Kind]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// ByKind returns the calls counted so far by kind name (the run report's api_calls).
func (c *Counter) ByKind() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.calls))
	for k, v := range c.calls {
		out[string(k)] = v
	}
	return out
}

// Total returns the number of requests counted so far.
func (c *Counter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.calls {
		n += v
	}
	return n
}

// BytesRead returns the response body bytes read by the counted requests.
func (c *Counter) BytesRead() int64 { return c.bytes.Load() }

func (c *Counter) count(k Kind) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[Kind]int64{}
	}
	c.calls[k]++
	c.mu.Unlock()
}

type counterKey struct{}

type kindKey struct{}

func withKind(ctx context.Context, k Kind) context.Context {
	return context.WithValue(ctx, kindKey{}, k)
}

// countingTransport counts every attempt per kind, reads the observable
// headers of every response and guards response bodies with an idle timeout.
type countingTransport struct {
	base http.RoundTripper
	rec  *recorder
	idle time.Duration
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	k, _ := req.Context().Value(kindKey{}).(Kind)
	ctr, _ := req.Context().Value(counterKey{}).(*Counter)
	if k != "" {
		t.rec.countCall(k)
		if ctr != nil {
			ctr.count(k)
		}
	}
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	t.rec.observe(resp)
	wb := &watchedBody{rc: resp.Body, cancel: cancel, idle: t.idle, rec: t.rec, ctr: ctr}
	if t.idle > 0 {
		// Created once and never replaced, so Close may race with Read.
		wb.timer = time.AfterFunc(time.Hour, wb.stall)
		wb.timer.Stop()
	}
	resp.Body = wb
	return resp, nil
}

// errBodyIdle reports a response body that delivered no bytes for the idle
// timeout. It is transient (retried, then ErrUnavailable).
var errBodyIdle = errors.New("salesforce: response body stalled")

// watchedBody counts bytes and cancels the request when one Read waits longer
// than idle for data (a stalled connection), without limiting how long the
// whole download may take or how slowly the caller consumes it.
type watchedBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
	idle   time.Duration
	rec    *recorder
	ctr    *Counter // nil unless the request carried one

	timer *time.Timer
	fired atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.timer != nil {
		b.timer.Reset(b.idle)
	}
	n, err := b.rc.Read(p)
	if b.timer != nil {
		b.timer.Stop()
	}
	b.rec.bytes.Add(int64(n))
	if b.ctr != nil {
		b.ctr.bytes.Add(int64(n))
	}
	if err != nil && !errors.Is(err, io.EOF) && b.fired.Load() {
		err = fmt.Errorf("%w: no data for %s", errBodyIdle, b.idle)
	}
	return n, err
}

func (b *watchedBody) stall() {
	b.fired.Store(true)
	b.cancel()
}

func (b *watchedBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.rc.Close()
	b.cancel()
	return err
}
