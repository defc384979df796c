package gcs_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/gcs"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// seen is one request as the server received it.
type seen struct {
	Method, RawPath, Auth, ContentType, Body string
	Query                                    url.Values
}

// api is an httptest server standing in for the GCS JSON API: handle answers every request,
// and every request is recorded.
type api struct {
	URL string
	mu  sync.Mutex
	got []seen
}

func newAPI(t *testing.T, handle http.HandlerFunc) *api {
	t.Helper()
	a := &api{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.got = append(a.got, seen{Method: r.Method, RawPath: r.URL.EscapedPath(), Auth: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type"), Body: string(body), Query: r.URL.Query()})
		a.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

func (a *api) requests() []seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seen(nil), a.got...)
}

// answer writes status with a GCS-shaped JSON error body.
func answer(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "message": "injected " + reason, "errors": []any{map[string]any{"reason": reason, "domain": "global"}},
	}})
}

// isBucketGet reports the bucket metadata read Load makes after a 404.
func isBucketGet(r *http.Request) bool {
	return r.Method == http.MethodGet && !strings.Contains(r.URL.EscapedPath(), "/o/")
}

const object = "sf2loki/state.json"

func newBackend(t *testing.T, endpoint string) *gcs.Backend {
	t.Helper()
	b, err := gcs.New(t.Context(), gcs.Options{Bucket: "bkt", Object: object, Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var sentinels = []error{store.ErrAbsent, store.ErrConflict, store.ErrUnavailable, store.ErrPermission, store.ErrNoLocation, store.ErrTooLarge}

// checkClass fails unless err wraps want and no other sentinel (want nil: an error wrapping none).
func checkClass(t *testing.T, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) != errors.Is(want, s) {
			t.Fatalf("got %v; want it to wrap %v and no other sentinel", err, want)
		}
	}
}

func TestRequestsOnTheWire(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			_, _ = io.WriteString(w, `{"kind":"storage#object","name":"sf2loki/state.json","generation":"1700000000000001"}`)
		case http.MethodGet:
			w.Header().Set("X-Goog-Generation", "1700000000000001")
			_, _ = io.WriteString(w, `{"doc":1}`)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	b := newBackend(t, a.URL)
	ctx := t.Context()
	v, err := b.Store(ctx, []byte(`{"doc":1}`), "")
	if err != nil || v != "1700000000000001" {
		t.Fatalf("create = %q, %v", v, err)
	}
	if _, err := b.Store(ctx, []byte(`{"doc":2}`), v); err != nil {
		t.Fatal(err)
	}
	data, lv, err := b.Load(ctx)
	if err != nil || string(data) != `{"doc":1}` || lv != "1700000000000001" {
		t.Fatalf("Load = %q %q %v", data, lv, err)
	}
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	got := a.requests()
	if len(got) != 4 {
		t.Fatalf("%d requests, want 4: %+v", len(got), got)
	}
	for i, w := range []struct{ gen, body string }{{"0", `{"doc":1}`}, {"1700000000000001", `{"doc":2}`}} {
		r, gen := got[i], w.gen
		if r.Method != http.MethodPost || r.RawPath != "/upload/storage/v1/b/bkt/o" || r.Query.Get("uploadType") != "media" ||
			r.Query.Get("name") != object || r.Query.Get("ifGenerationMatch") != gen || r.ContentType != "application/json" ||
			r.Body != w.body {
			t.Errorf("write %d: %+v, want a media upload of %s with ifGenerationMatch=%s", i, r, object, gen)
		}
	}
	if r := got[2]; r.Method != http.MethodGet || r.RawPath != "/storage/v1/b/bkt/o/sf2loki%2Fstate.json" || r.Query.Get("alt") != "media" {
		t.Errorf("read: %+v, want a media download of the escaped object name", r)
	}
	if r := got[3]; r.Method != http.MethodDelete || r.RawPath != "/storage/v1/b/bkt/o/sf2loki%2Fstate.json" || len(r.Query) != 0 {
		t.Errorf("delete: %+v, want an unconditional DELETE of the object", r)
	}
	for _, r := range got {
		if r.Auth != "" {
			t.Errorf("%s %s carried credentials to an emulator endpoint", r.Method, r.RawPath)
		}
	}
	if b.String() != "gs://bkt/"+object {
		t.Errorf("String() = %q", b)
	}
}

func TestEndpointForms(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) { answer(w, http.StatusNotFound, "notFound") })
	for _, ep := range []string{a.URL, a.URL + "/", a.URL + "/storage/v1", a.URL + "/storage/v1/"} {
		before := len(a.requests())
		if _, _, err := newBackend(t, ep).Load(t.Context()); !errors.Is(err, store.ErrNoLocation) {
			t.Fatalf("endpoint %q: %v", ep, err)
		}
		if r := a.requests()[before]; r.RawPath != "/storage/v1/b/bkt/o/sf2loki%2Fstate.json" {
			t.Errorf("endpoint %q: request path %q", ep, r.RawPath)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		name           string
		object, bucket int // statuses of the object download and the bucket metadata read
		want           error
	}{
		{"object absent", 404, 200, store.ErrAbsent},
		{"bucket absent", 404, 404, store.ErrNoLocation},
		{"object absent, bucket metadata not readable", 404, 403, store.ErrAbsent},
		{"object absent, bucket read fails", 404, 503, store.ErrUnavailable},
		{"unauthenticated", 401, 0, store.ErrPermission},
		{"forbidden", 403, 0, store.ErrPermission},
		{"server error", 500, 0, store.ErrUnavailable},
		{"unavailable", 503, 0, store.ErrUnavailable},
		{"rate limited", 429, 0, store.ErrUnavailable},
		{"bad request", 400, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
				if isBucketGet(r) {
					if c.bucket == 200 {
						_, _ = io.WriteString(w, `{"name":"bkt"}`)
						return
					}
					answer(w, c.bucket, "bucket")
					return
				}
				answer(w, c.object, "object")
			})
			_, _, err := newBackend(t, a.URL).Load(t.Context())
			checkClass(t, err, c.want)
		})
	}
}

func TestLoadWithoutGeneration(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") })
	_, _, err := newBackend(t, a.URL).Load(t.Context())
	checkClass(t, err, nil)
}

// cutAfterHeaders answers 200 with a Content-Length longer than the body it sends, then
// closes the connection: the body read fails mid-stream.
func cutAfterHeaders(w http.ResponseWriter, gen string) {
	w.Header().Set("X-Goog-Generation", gen)
	w.Header().Set("Content-Length", "100")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"schema":`)
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func TestLoadBodyCut(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) { cutAfterHeaders(w, "7") })
	_, _, err := newBackend(t, a.URL).Load(t.Context())
	checkClass(t, err, store.ErrUnavailable)
}

// The protocol retries a read cut mid-stream as a unit: the bytes and generation it returns
// come from the one complete answer.
func TestReadRetriesACutBodyAsAUnit(t *testing.T) {
	var (
		mu    sync.Mutex
		calls int
	)
	doc := `{"schema":2,"fence":{"epoch":3},"checkpoints":{}}`
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			cutAfterHeaders(w, "41")
			return
		}
		w.Header().Set("X-Goog-Generation", "42")
		_, _ = io.WriteString(w, doc)
	})
	snap, err := storetest.NewStore(newBackend(t, a.URL)).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != "42" || snap.Floor() != 3 || len(a.requests()) != 2 {
		t.Fatalf("version %q floor %d after %d requests; want 42, 3, 2", snap.Version, snap.Floor(), len(a.requests()))
	}
}

func TestStoreErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string // 2xx body
		expect store.Version
		want   error
	}{
		{"stale generation", 412, "", "5", store.ErrConflict},
		{"create over an existing object", 412, "", "", store.ErrConflict},
		{"object to update is gone", 404, "", "5", store.ErrConflict},
		{"bucket absent on create", 404, "", "", store.ErrNoLocation},
		{"unauthenticated", 401, "", "5", store.ErrPermission},
		{"forbidden", 403, "", "5", store.ErrPermission},
		{"too large", 413, "", "5", store.ErrTooLarge},
		{"server error after send", 500, "", "5", store.ErrUnavailable},
		{"bad gateway after send", 502, "", "", store.ErrUnavailable},
		{"unavailable after send", 503, "", "5", store.ErrUnavailable},
		{"rate limited", 429, "", "5", store.ErrUnavailable},
		{"bad request", 400, "", "5", nil},
		{"written, answer unreadable", 200, "<html>", "5", store.ErrUnavailable},
		{"written, no generation", 200, `{"name":"x"}`, "5", store.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
				if c.status == 200 {
					_, _ = io.WriteString(w, c.body)
					return
				}
				answer(w, c.status, "injected")
			})
			_, err := newBackend(t, a.URL).Store(t.Context(), []byte(`{}`), c.expect)
			checkClass(t, err, c.want)
			if n := len(a.requests()); n != 1 {
				t.Fatalf("%d requests reached the server, want exactly 1 (a conditional write is never retried)", n)
			}
		})
	}
}

// A connection that breaks after the write was sent leaves the outcome unknown: unavailable,
// never a conflict, and never re-sent.
func TestStoreConnectionLostAfterSend(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	_, err := newBackend(t, a.URL).Store(t.Context(), []byte(`{"k":1}`), "9")
	checkClass(t, err, store.ErrUnavailable)
	if got := a.requests(); len(got) != 1 || got[0].Body != `{"k":1}` {
		t.Fatalf("requests %+v, want the one write, sent whole, once", got)
	}
}

func TestStoreRefusesANonGeneration(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) { t.Error("a request was sent") })
	_, err := newBackend(t, a.URL).Store(t.Context(), []byte(`{}`), `"etag"`)
	checkClass(t, err, store.ErrConflict)
}

func TestDeleteErrors(t *testing.T) {
	for _, c := range []struct {
		status int
		want   error
		ok     bool
	}{
		{204, nil, true},
		{200, nil, true},
		{404, nil, true},
		{403, store.ErrPermission, false},
		{500, store.ErrUnavailable, false},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			a := newAPI(t, func(w http.ResponseWriter, r *http.Request) { answer(w, c.status, "injected") })
			err := newBackend(t, a.URL).Delete(t.Context())
			if c.ok {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			checkClass(t, err, c.want)
		})
	}
}

func TestTransportFailureIsUnavailable(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {})
	b := newBackend(t, a.URL)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := b.Load(ctx)
	checkClass(t, err, store.ErrUnavailable)
	_, err = b.Store(ctx, []byte(`{}`), "")
	checkClass(t, err, store.ErrUnavailable)
}

func TestNewRefuses(t *testing.T) {
	key := writeKey(t, "http://127.0.0.1:1/token")
	for name, o := range map[string]gcs.Options{
		"no bucket":                   {Object: "o"},
		"no object":                   {Bucket: "b"},
		"endpoint not a URL":          {Bucket: "b", Object: "o", Endpoint: "localhost:4443"},
		"credentials over plain HTTP": {Bucket: "b", Object: "o", Endpoint: "http://127.0.0.1:4443", CredentialsFile: key},
		"credentials file missing":    {Bucket: "b", Object: "o", CredentialsFile: filepath.Join(t.TempDir(), "none.json")},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := gcs.New(t.Context(), o); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

// tokenServer is an OAuth2 token endpoint granting token to a JWT bearer assertion, or
// refusing every request with status when status is not 200.
func tokenServer(t *testing.T, token string, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.PostForm.Get("assertion") == "" {
			t.Errorf("token request %v: not a JWT bearer grant", r.PostForm)
		}
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"injected"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/token"
}

var rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// writeKey writes a service account JSON key whose token endpoint is tokenURI.
func writeKey(t *testing.T, tokenURI string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(rsaKey())
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "sf2loki@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURI,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// redirect sends every request (addressed to Google's endpoint) to the test server instead.
type redirect struct{ to *url.URL }

func (rd redirect) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = rd.to.Scheme, rd.to.Host, rd.to.Host
	return http.DefaultTransport.RoundTrip(r)
}

func redirectTo(t *testing.T, u string) *http.Client {
	t.Helper()
	to, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: redirect{to: to}}
}

func TestCredentials(t *testing.T) {
	for _, c := range []struct {
		name string
		opts func(t *testing.T, key string) gcs.Options
	}{
		{"service account key file", func(t *testing.T, key string) gcs.Options { return gcs.Options{CredentialsFile: key} }},
		{"application default credentials", func(t *testing.T, key string) gcs.Options {
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)
			return gcs.Options{}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Goog-Generation", "3")
				_, _ = io.WriteString(w, "{}")
			})
			o := c.opts(t, writeKey(t, tokenServer(t, "tok-secret", http.StatusOK)))
			o.Bucket, o.Object, o.HTTPClient = "bkt", object, redirectTo(t, a.URL)
			b, err := gcs.New(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, _, err := b.Load(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			got := a.requests()
			if len(got) != 2 {
				t.Fatalf("%d requests, want 2", len(got))
			}
			for _, r := range got {
				if r.Auth != "Bearer tok-secret" {
					t.Fatalf("Authorization %q, want the service account's token", r.Auth)
				}
			}
		})
	}
}

func TestRefusedTokenIsPermission(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) { t.Error("a request without a token reached the API") })
	b, err := gcs.New(t.Context(), gcs.Options{Bucket: "bkt", Object: object, HTTPClient: redirectTo(t, a.URL),
		CredentialsFile: writeKey(t, tokenServer(t, "", http.StatusBadRequest))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Store(t.Context(), []byte(`{}`), "")
	checkClass(t, err, store.ErrPermission)
}

// STORAGE_EMULATOR_HOST (host:port, as the Google client libraries read it) points the
// backend at an emulator without credentials, even when credentials are configured.
func TestEmulatorHostVariable(t *testing.T) {
	a := newAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Goog-Generation", "8")
		_, _ = io.WriteString(w, "{}")
	})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(a.URL, "http://"))
	key := writeKey(t, "http://127.0.0.1:1/token")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)
	for _, o := range []gcs.Options{{}, {CredentialsFile: key}} {
		o.Bucket, o.Object = "bkt", object
		b, err := gcs.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if _, v, err := b.Load(t.Context()); err != nil || v != "8" {
			t.Fatalf("Load = %q, %v", v, err)
		}
	}
	got := a.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests reached the emulator, want 2", len(got))
	}
	for _, r := range got {
		if r.Auth != "" {
			t.Fatalf("credentials sent to the emulator: %q", r.Auth)
		}
	}
}
