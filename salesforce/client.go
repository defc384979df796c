package salesforce

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

const (
	// maxJSONBody bounds a JSON answer read into memory (a 2000-row page of
	// wide records is a few MB).
	maxJSONBody = 256 << 20
	// maxErrorBody bounds an error answer read for its code and message.
	maxErrorBody = 64 << 10
	// maxSpareBody bounds the answer buffer a client keeps for the next answer.
	maxSpareBody = 32 << 20
)

// Client talks to one Salesforce org. It is safe for concurrent use; its
// token, describe cache and counters are shared by all callers.
type Client struct {
	opts Options
	log  *slog.Logger
	rec  *recorder
	http *retryablehttp.Client
	auth *tokenSource

	orgMu sync.Mutex
	orgID string // from userinfo, when the identity URL did not carry it

	describes describeCache

	// spareBody is a buffer for the next JSON answer: the last one read, once its decoder (or
	// the caller, RowPage.Release) is done with it, so that paging through a query reads every
	// page into the same memory.
	spareBody atomic.Pointer[[]byte]
	// spareRows is the row memory of the last released RowPage, for the next page's rows.
	spareRows atomic.Pointer[rowMem]
}

// New returns a Client for opts after validating them (errors are
// *ConfigError). It makes no network call; the first token is minted on the
// first request.
func New(opts Options) (*Client, error) {
	o := opts.withDefaults()
	key, err := o.validate() // the private key of jwt_bearer, nil otherwise
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, log: o.Logger, rec: newRecorder(o.Now)}
	c.auth = newTokenSource(c, key)

	hc, err := o.httpClient()
	if err != nil {
		return nil, err
	}
	hc.Transport = &countingTransport{base: hc.Transport, rec: c.rec, idle: o.HTTPTimeout}
	c.http = &retryablehttp.Client{
		HTTPClient:   hc,
		Logger:       nil, // retries are logged by CheckRetry, without URLs' query strings
		RetryWaitMin: o.RetryWaitMin,
		RetryWaitMax: o.RetryWaitMax,
		RetryMax:     o.MaxAttempts - 1,
		CheckRetry:   c.checkRetry,
		Backoff:      backoff,
		ErrorHandler: c.giveUp,
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, attempt int) {
			if attempt > 0 {
				c.rec.retries.Add(1)
			}
		},
	}
	return c, nil
}

// httpClient builds the HTTP client from the TLS and timeout options, or
// copies Options.HTTPClient.
func (o Options) httpClient() (*http.Client, error) {
	if o.HTTPClient != nil {
		hc := *o.HTTPClient
		if hc.Transport == nil {
			hc.Transport = http.DefaultTransport
		}
		return &hc, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: min(o.HTTPTimeout, 10*time.Second), KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = min(o.HTTPTimeout, 10*time.Second)
	tr.ResponseHeaderTimeout = o.HTTPTimeout
	tr.ForceAttemptHTTP2 = true
	// A chunked body's framing is read through the connection's buffer, which then refills
	// once per chunk: 4 KiB by default, a socket read for every 4 KiB of an EventLogFile.
	tr.ReadBufferSize = bodyReadSize
	if o.Proxy != nil {
		tr.Proxy = o.Proxy
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return nil, &ConfigError{Field: "TLSCAFile", Msg: err.Error()}
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Field: "TLSCAFile", Msg: fmt.Sprintf("%s holds no PEM certificate", o.TLSCAFile)}
		}
		tlsCfg.RootCAs = pool
	}
	if o.TLSInsecureSkipVerify {
		tlsCfg.InsecureSkipVerify = true // #nosec G402 -- only when the operator asks for it
	}
	tr.TLSClientConfig = tlsCfg
	// No http.Client.Timeout: it would cut long downloads; the transport and
	// the idle guard of countingTransport bound every wait instead.
	return &http.Client{Transport: tr}, nil
}

// Stats returns a snapshot of the calls made so far.
func (c *Client) Stats() Stats { return c.rec.snapshot() }

// APIUsage returns the last Sforce-Limit-Info api-usage reading; ok is false
// when no response carried one yet.
func (c *Client) APIUsage() (usage APIUsage, ok bool) {
	s := c.rec.snapshot()
	return s.APIUsage, !s.APIUsage.At.IsZero()
}

// ServerClockOffset returns the Salesforce clock minus the local clock, as of
// the Date header of the last response (1 s resolution); ok is false before
// the first response. Add it to the local time to get "now" on Salesforce.
func (c *Client) ServerClockOffset() (offset time.Duration, ok bool) {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	return c.rec.skew, c.rec.skewSet
}

// APIVersion returns the REST API version in use, e.g. "60.0".
func (c *Client) APIVersion() string { return c.opts.APIVersion }

// dataPath returns the REST path of an API resource: /services/data/vNN.N/<rest>.
func (c *Client) dataPath(rest string) string {
	return "/services/data/v" + c.opts.APIVersion + "/" + strings.TrimPrefix(rest, "/")
}

// request is one logical HTTP call (retries included).
type request struct {
	kind   Kind
	method string
	url    string // absolute
	header http.Header
	body   []byte
	// accept validates a 2xx response before it is returned; an error makes
	// the attempt a failure, classified by the policy like any other. nil
	// accepts any 2xx.
	accept func(*http.Response) error
	// keepsBody: the decoder keeps the JSON answer it is given (a RowPage), so callJSON must
	// not reuse it.
	keepsBody bool
}

// send performs r with the retry policy; no authentication. On success the
// caller owns resp.Body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.sendOnce(ctx, r)
		if err == nil || classify(ctx, nil, err) != actWaitLimit {
			return resp, err
		}
		wait, again := limitWait(ctx, c.opts.RetryWaitMin, c.opts.RetryWaitMax, c.opts.MaxAttempts-1, attempt)
		if !again {
			return nil, unavailable(fmt.Errorf("%w (gave up after %d attempts)", err, attempt+1))
		}
		c.rec.retries.Add(1)
		c.log.Debug("salesforce: concurrent request limit, retrying", "kind", string(r.kind), "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// sendOnce performs r through the transient-failure retries of retryablehttp.
func (c *Client) sendOnce(ctx context.Context, r request) (*http.Response, error) {
	var body any
	if r.body != nil {
		body = r.body
	}
	req, err := retryablehttp.NewRequestWithContext(withKind(ctx, r.kind), r.method, r.url, body)
	if err != nil {
		return nil, fmt.Errorf("salesforce: building %s request: %w", r.kind, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.SetResponseHandler(func(resp *http.Response) error {
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return responseError(resp)
		}
		if r.accept != nil {
			return r.accept(resp)
		}
		return nil
	})
	return c.http.Do(req)
}

// responseError reads and closes a non-2xx body and returns the typed error.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	k, _ := resp.Request.Context().Value(kindKey{}).(Kind)
	return errorFromBody(resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, b, !k.mayCarrySecrets())
}

// checkRetry is retryablehttp's CheckRetry: the policy of policy.go.
func (c *Client) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, &ctxEndedError{ctx.Err()}
	}
	if classify(ctx, resp, err) == actBackoff {
		k, _ := ctx.Value(kindKey{}).(Kind)
		attrs := []any{"kind", string(k)}
		if resp != nil {
			attrs = append(attrs, "status", resp.StatusCode)
		}
		if err != nil {
			attrs = append(attrs, "error", err.Error())
		}
		c.log.Debug("salesforce: transient failure", attrs...)
		return true, nil
	}
	return false, err
}

// ctxEndedError marks the caller's context ending, as seen by checkRetry, so
// that giveUp can tell it from a transport timeout (which also matches
// context.DeadlineExceeded).
type ctxEndedError struct{ err error }

func (e *ctxEndedError) Error() string { return e.err.Error() }
func (e *ctxEndedError) Unwrap() error { return e.err }

// giveUp is retryablehttp's ErrorHandler, called when an attempt failed and
// no retry follows: it closes the response and returns the typed error,
// marked ErrUnavailable when the failure was transient.
func (c *Client) giveUp(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if err == nil && resp != nil {
		// Retries exhausted on a status the handler never saw (5xx).
		err = responseError(resp)
	} else if resp != nil {
		_ = resp.Body.Close()
	}
	if err == nil {
		err = errors.New("salesforce: request failed")
	}
	var ended *ctxEndedError
	if errors.As(err, &ended) {
		return nil, ended.err // the caller's context ended: not the org's fault
	}
	if classify(context.Background(), nil, err) == actBackoff {
		return nil, unavailable(fmt.Errorf("%w (gave up after %d attempts)", err, attempts))
	}
	return nil, err
}

// callJSON performs r, reads the 2xx body and passes it to decode; a body
// decode rejects is a *BadResponseError (and is retried). For a kind whose
// answers may carry secrets, decode's error must not quote the body either.
func (c *Client) callJSON(ctx context.Context, r request, decode func([]byte) error) error {
	r.accept = func(resp *http.Response) error {
		defer func() { _ = resp.Body.Close() }()
		b, err := readAll(c.takeBody(), io.LimitReader(resp.Body, maxJSONBody+1))
		if err != nil {
			c.putBody(b)
			return fmt.Errorf("salesforce: reading %s response: %w", r.kind, err)
		}
		if len(b) > maxJSONBody {
			err = fmt.Errorf("body exceeds %d bytes", maxJSONBody)
		} else {
			err = decode(b)
		}
		if err != nil {
			bad := badResponse(resp, b, r.kind.mayCarrySecrets(), err)
			c.putBody(b)
			return bad
		}
		if !r.keepsBody {
			c.putBody(b)
		}
		return nil
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	_ = resp.Body.Close() // already read and closed by accept
	return nil
}

// takeBody returns the spare answer buffer (empty), or nil.
func (c *Client) takeBody() []byte {
	if b := c.spareBody.Swap(nil); b != nil {
		return (*b)[:0]
	}
	return nil
}

// putBody offers b, which nothing refers to any more, as the spare answer buffer.
func (c *Client) putBody(b []byte) {
	if cap(b) == 0 || cap(b) > maxSpareBody {
		return
	}
	c.spareBody.Store(&b)
}

// readAll is io.ReadAll appending to buf[:0] (growing it as io.ReadAll grows its own).
func readAll(buf []byte, r io.Reader) ([]byte, error) {
	b := buf[:0]
	if cap(b) < 512 {
		b = make([]byte, 0, 512)
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append pick the next capacity
		}
	}
}

// authorize performs r (whose url is a path on the instance) with the current
// session; a rejected session is invalidated and the request repeated once
// with a new token.
func (c *Client) authorize(ctx context.Context, r request, path string, call func(request) error) error {
	for attempt := 0; ; attempt++ {
		s, err := c.auth.session(ctx)
		if err != nil {
			return err
		}
		ar := r
		ar.url = s.InstanceURL + path
		ar.header = r.header.Clone()
		if ar.header == nil {
			ar.header = http.Header{}
		}
		ar.header.Set("Authorization", "Bearer "+s.AccessToken)
		err = call(ar)
		if err == nil || !needsReauth(err) {
			return err
		}
		if attempt > 0 {
			return fmt.Errorf("%w: the session was rejected again right after a new token: %w", ErrAuth, err)
		}
		c.auth.invalidate(s.AccessToken)
		c.rec.reauths.Add(1)
		c.log.Debug("salesforce: session rejected, renewing the token", "kind", string(r.kind))
	}
}

// authorizedJSON GETs path on the instance and decodes the JSON answer.
func (c *Client) authorizedJSON(ctx context.Context, kind Kind, path string, header http.Header, decode func([]byte) error) error {
	return c.authorizedJSONKeep(ctx, kind, path, header, false, decode)
}

// authorizedJSONKeep is authorizedJSON for a decoder that keeps the answer's bytes when keep
// is set (they are then never reused for another answer).
func (c *Client) authorizedJSONKeep(ctx context.Context, kind Kind, path string, header http.Header, keep bool, decode func([]byte) error) error {
	if header == nil {
		header = http.Header{}
	}
	header.Set("Accept", "application/json")
	r := request{kind: kind, method: http.MethodGet, header: header, keepsBody: keep}
	return c.authorize(ctx, r, path, func(ar request) error {
		return c.callJSON(ctx, ar, decode)
	})
}

// authorizedStream GETs path on the instance and returns the 2xx response
// with its body unread. An answer that is an HTML page is refused (see
// htmlPage).
func (c *Client) authorizedStream(ctx context.Context, kind Kind, path string, header http.Header) (*http.Response, error) {
	var resp *http.Response
	r := request{kind: kind, method: http.MethodGet, header: header, accept: htmlPage}
	err := c.authorize(ctx, r, path, func(ar request) error {
		var err error
		resp, err = c.send(ctx, ar) //nolint:bodyclose // handed to the caller, who closes it
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
