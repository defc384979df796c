// Package gcs keeps the checkpoint document in one Google Cloud Storage object, over the GCS
// JSON API with plain net/http (no client library: its package initialisation alone cost every
// invocation ~20 MB of memory and ~10 ms of start-up, see docs/performance.md).
//
// The version is the object's generation. A read is one media download whose
// X-Goog-Generation header names the generation of exactly the bytes returned, so bytes and
// version always belong together (a body cut off mid-stream fails the read, which the
// protocol retries as a unit). A write is one media upload (no resumable session) carrying
// ifGenerationMatch (0 to create); 412 is a conflict. The write is never retried here: an
// ambiguous failure (5xx, reset, timeout after sending) is settled by the protocol re-reading
// the object and looking for its own writer stamp.
//
// Authentication is an OAuth2 bearer token from a service account key (Options.CredentialsFile)
// or Application Default Credentials. An emulator endpoint (Options.Endpoint, or the
// STORAGE_EMULATOR_HOST variable the Google client libraries honour) gets no credentials.
package gcs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/sf2loki/sf2loki/store"
)

// DefaultMaxSize is the default document cap.
const DefaultMaxSize = 16 << 20

// DefaultEndpoint is Google's GCS endpoint; the JSON API lives under /storage/v1 and uploads
// under /upload/storage/v1.
const DefaultEndpoint = "https://storage.googleapis.com"

// scope lets the token read and write objects (devstorage.read_write).
const scope = "https://www.googleapis.com/auth/devstorage.read_write"

// emulatorHostEnv is the variable the Google client libraries read for an emulator's address
// (host:port or a URL); a request to it carries no credentials.
const emulatorHostEnv = "STORAGE_EMULATOR_HOST"

// Options configures the GCS backend. Zero values mean the defaults.
type Options struct {
	// Bucket and Object locate the document. Both required.
	Bucket string
	Object string
	// Endpoint is the base URL of an emulator (fake-gcs-server, e.g. "http://127.0.0.1:4443";
	// a trailing "/storage/v1/" is accepted too). Requests to it carry no credentials unless
	// CredentialsFile is set (then it must be https). Default: Google's endpoint, or
	// "http://" + STORAGE_EMULATOR_HOST (never with credentials) when that variable is set.
	Endpoint string
	// CredentialsFile is a service account JSON key file. Default: Application Default
	// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the metadata server).
	CredentialsFile string
	// MaxSize is the largest document written, in bytes. Default 16 MiB.
	MaxSize int
	// HTTPClient carries the requests (tests, proxies). Default: a client with Go's default
	// transport. When credentials apply, the bearer token is added by wrapping its Transport.
	HTTPClient *http.Client
}

// Backend is a store.Backend over one GCS object.
type Backend struct {
	hc       *http.Client
	base     string // endpoint without a trailing slash
	bucket   string
	object   string
	max      int
	emulator bool // no credentials are sent
}

// New returns a GCS backend. It finds the credentials (reading CredentialsFile, or looking up
// Application Default Credentials) but does not contact GCS.
func New(ctx context.Context, o Options) (*Backend, error) {
	if o.Bucket == "" || o.Object == "" {
		return nil, errors.New("gcs store: bucket and object are required")
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	// An explicit endpoint is an emulator unless credentials are configured for it; the
	// variable always names an emulator, as it does for the Google client libraries.
	endpoint, emulator := o.Endpoint, o.Endpoint != "" && o.CredentialsFile == ""
	if endpoint == "" {
		if h := os.Getenv(emulatorHostEnv); h != "" {
			endpoint, emulator = h, true
			if !strings.Contains(h, "://") {
				endpoint = "http://" + h
			}
		}
	}
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	base, err := baseURL(endpoint)
	if err != nil {
		return nil, err
	}
	b := &Backend{base: base, bucket: o.Bucket, object: o.Object, max: o.MaxSize, emulator: emulator}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if b.emulator {
		b.hc = hc
		return b, nil
	}
	if strings.HasPrefix(base, "http://") {
		return nil, fmt.Errorf("gcs store: endpoint %s is plain HTTP: credentials are only sent over HTTPS", base)
	}
	// The token source keeps the context for every later refresh: it must outlive New's caller.
	tctx := context.WithoutCancel(ctx)
	var creds *google.Credentials
	if o.CredentialsFile != "" {
		data, err := os.ReadFile(o.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("gcs store: credentials file: %w", err)
		}
		if creds, err = google.CredentialsFromJSONWithType(tctx, data, google.ServiceAccount, scope); err != nil {
			return nil, fmt.Errorf("gcs store: credentials file %s: %w", o.CredentialsFile, err)
		}
	} else if creds, err = google.FindDefaultCredentials(tctx, scope); err != nil {
		return nil, fmt.Errorf("gcs store: application default credentials: %w", err)
	}
	authed := *hc
	// ReuseTokenSource: one token per hour, not per request, whatever the credential type does.
	authed.Transport = &oauth2.Transport{Source: oauth2.ReuseTokenSource(nil, creds.TokenSource), Base: hc.Transport}
	b.hc = &authed
	return b, nil
}

// baseURL validates an endpoint and returns it without a trailing slash or JSON API path.
func baseURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("gcs store: endpoint %q is not an http(s) URL", endpoint)
	}
	base := strings.TrimRight(endpoint, "/")
	return strings.TrimSuffix(base, "/storage/v1"), nil
}

// String implements store.Backend.
func (b *Backend) String() string { return "gs://" + b.bucket + "/" + b.object }

// MaxSize implements store.Backend.
func (b *Backend) MaxSize() int { return b.max }

func (b *Backend) bucketURL() string { return b.base + "/storage/v1/b/" + url.PathEscape(b.bucket) }

func (b *Backend) objectURL() string { return b.bucketURL() + "/o/" + url.PathEscape(b.object) }

// apiError is a non-2xx answer of the JSON API.
type apiError struct {
	Status  int
	Reason  string // errors[0].reason, e.g. "notFound", "conditionNotMet"
	Message string
}

func (e *apiError) Error() string {
	s := "HTTP " + strconv.Itoa(e.Status)
	if e.Reason != "" {
		s += " " + e.Reason
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// readError builds the apiError of resp from its status and JSON error body (GCS answers
// {"error":{"code":..,"message":..,"errors":[{"reason":..}]}}; emulators and proxies may not).
func readError(resp *http.Response) *apiError {
	e := &apiError{Status: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var doc struct {
		Error struct {
			Message string `json:"message"`
			Errors  []struct {
				Reason string `json:"reason"`
			} `json:"errors"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) == nil && (doc.Error.Message != "" || len(doc.Error.Errors) > 0) {
		e.Message = doc.Error.Message
		if len(doc.Error.Errors) > 0 {
			e.Reason = doc.Error.Errors[0].Reason
		}
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
	}
	return e
}

// classify maps what every operation shares: refusals, overload and server errors. Other
// client errors (400: an invalid bucket or object name) carry no sentinel: they are neither
// retried nor a known configuration problem.
func (b *Backend) classify(verb string, e *apiError) error {
	switch {
	case e.Status == http.StatusUnauthorized && b.emulator:
		return fmt.Errorf("%w: %s %s: %w (no credentials are sent to a custom endpoint unless credentials_file is set)", store.ErrPermission, verb, b, e)
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return fmt.Errorf("%w: %s %s: %w", store.ErrPermission, verb, b, e)
	case e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout:
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, verb, b, e)
	default:
		return fmt.Errorf("%s %s: %w", verb, b, e)
	}
}

// transportError maps a request that got no HTTP answer: a token the token endpoint refused
// is a permission problem (nothing was sent to GCS); anything else (DNS, reset, timeout,
// cancellation) leaves the outcome unknown.
func (b *Backend) transportError(verb string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 {
		return fmt.Errorf("%w: %s %s: getting an access token: %w", store.ErrPermission, verb, b, err)
	}
	return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, verb, b, err)
}

// do sends one request; it never retries.
func (b *Backend) do(ctx context.Context, method, u string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return b.hc.Do(req)
}

// drain lets the connection be reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// Load implements store.Backend.
func (b *Backend) Load(ctx context.Context) ([]byte, store.Version, error) {
	resp, err := b.do(ctx, http.MethodGet, b.objectURL()+"?alt=media", nil)
	if err != nil {
		return nil, "", b.transportError("reading", err)
	}
	defer drain(resp)
	if resp.StatusCode == http.StatusNotFound {
		return nil, "", b.missing(ctx, "reading", readError(resp))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", b.classify("reading", readError(resp))
	}
	gen := resp.Header.Get("X-Goog-Generation")
	if n, err := strconv.ParseInt(gen, 10, 64); err != nil || n <= 0 {
		return nil, "", fmt.Errorf("reading %s: the answer has no object generation (X-Goog-Generation %q): is the endpoint a GCS JSON API?", b, gen)
	}
	if resp.ContentLength > int64(b.max) {
		return nil, "", fmt.Errorf("%w: %s is %d bytes, more than %d", store.ErrTooLarge, b, resp.ContentLength, b.max)
	}
	data, err := store.ReadLimited(resp.Body, b.max)
	if errors.Is(err, store.ErrTooLarge) {
		return nil, "", fmt.Errorf("%s: %w", b, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: reading the body of %s: %w", store.ErrUnavailable, b, err)
	}
	return data, store.Version(gen), nil
}

// missing tells an absent object from an absent bucket with a metadata read of the bucket
// (one extra request, only when the object is absent). A credential allowed to use objects
// but not to read bucket metadata (storage.buckets.get) sees an absent object.
func (b *Backend) missing(ctx context.Context, verb string, objErr *apiError) error {
	resp, err := b.do(ctx, http.MethodGet, b.bucketURL()+"?fields=name", nil)
	if err != nil {
		return b.transportError(verb, err)
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s %s: bucket %q does not exist: %w", store.ErrNoLocation, verb, b, b.bucket, objErr)
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return b.classify(verb, readError(resp))
	}
	return store.ErrAbsent
}

// Store implements store.Backend.
func (b *Backend) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	gen := "0" // ifGenerationMatch=0: only if no live object exists
	if expect != "" {
		n, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("%w: %s: %q is not a generation", store.ErrConflict, b, expect)
		}
		gen = string(expect)
	}
	q := url.Values{"uploadType": {"media"}, "name": {b.object}, "ifGenerationMatch": {gen}}
	u := b.base + "/upload/storage/v1/b/" + url.PathEscape(b.bucket) + "/o?" + q.Encode()
	resp, err := b.do(ctx, http.MethodPost, u, data)
	if err != nil {
		return "", b.transportError("writing", err)
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated:
	case http.StatusPreconditionFailed:
		return "", fmt.Errorf("%w: %s: %w", store.ErrConflict, b, readError(resp))
	case http.StatusNotFound:
		if expect != "" { // the object to update is gone
			return "", fmt.Errorf("%w: %s: %w", store.ErrConflict, b, readError(resp))
		}
		return "", fmt.Errorf("%w: writing %s: bucket %q does not exist: %w", store.ErrNoLocation, b, b.bucket, readError(resp))
	case http.StatusRequestEntityTooLarge:
		return "", fmt.Errorf("%w: %s: %w", store.ErrTooLarge, b, readError(resp))
	default:
		return "", b.classify("writing", readError(resp))
	}
	var obj struct {
		Generation json.Number `json:"generation"` // a string in GCS's JSON
	}
	// Written, but an unreadable answer is as ambiguous as a lost one.
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
		return "", fmt.Errorf("%w: writing %s: reading the answer: %w", store.ErrUnavailable, b, err)
	}
	if n, err := obj.Generation.Int64(); err != nil || n <= 0 {
		return "", fmt.Errorf("%w: writing %s: generation %q in the answer", store.ErrUnavailable, b, obj.Generation)
	}
	return store.Version(obj.Generation.String()), nil
}

// Delete implements store.Backend. It removes whatever generation is live: the contract's
// delete is unconditional, and deleting an absent object (or bucket) is not an error.
func (b *Backend) Delete(ctx context.Context) error {
	resp, err := b.do(ctx, http.MethodDelete, b.objectURL(), nil)
	if err != nil {
		return b.transportError("deleting", err)
	}
	defer drain(resp)
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotFound {
		return nil
	}
	return b.classify("deleting", readError(resp))
}
