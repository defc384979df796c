package salesforce

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testUser     = "integration@example.com"
	testClientID = "3MVG9test-client"
)

var (
	keyOnce  sync.Once
	testKey  *rsa.PrivateKey
	otherKey *rsa.PrivateKey
)

func keys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	keyOnce.Do(func() {
		var err error
		if testKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if otherKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return testKey, otherKey
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var epoch = time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)

type env struct {
	t     testing.TB
	org   *Org
	srv   *httptest.Server
	clock *fakeClock
	token string
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	clock := &fakeClock{t: epoch}
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	if opts.Seed == 0 {
		opts.Seed = 42
	}
	org := New(opts)
	key, _ := keys(t)
	org.AddUser(testUser, AllPermissions())
	if err := org.AddJWTApp(testClientID, &key.PublicKey, testUser); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(org.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, org: org, srv: srv, clock: clock}
}

func signJWT(t testing.TB, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`))
	cb, _ := json.Marshal(claims)
	signing := hdr + "." + base64.RawURLEncoding.EncodeToString(cb)
	d := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func (e *env) claims() map[string]any {
	return map[string]any{"iss": testClientID, "sub": testUser, "aud": e.srv.URL, "exp": e.clock.Now().Add(3 * time.Minute).Unix()}
}

func (e *env) postToken(form url.Values) (int, map[string]any) {
	e.t.Helper()
	resp, err := http.PostForm(e.srv.URL+"/services/oauth2/token", form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("token response not JSON: %s", b)
	}
	return resp.StatusCode, m
}

func (e *env) login() string {
	e.t.Helper()
	key, _ := keys(e.t)
	code, m := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(e.t, key, e.claims())}})
	if code != 200 {
		e.t.Fatalf("login: %d %v", code, m)
	}
	e.token = m["access_token"].(string)
	return e.token
}

// reply is a finished response (its body already read and closed).
type reply struct {
	StatusCode int
	Header     http.Header
}

func (e *env) get(path string, hdr ...string) (reply, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("read %s: %v", path, err)
	}
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, b
}

type page struct {
	TotalSize      int              `json:"totalSize"`
	Done           bool             `json:"done"`
	NextRecordsURL string           `json:"nextRecordsUrl"`
	Records        []map[string]any `json:"records"`
}

type sfErr struct {
	Message   string `json:"message"`
	ErrorCode string `json:"errorCode"`
}

const ver = "/services/data/v62.0"

// query runs q and returns the status, the page (on 200) or the error code.
func (e *env) query(q string, hdr ...string) (int, page, string) {
	e.t.Helper()
	return e.queryPath(ver+"/query?q="+url.QueryEscape(q), hdr...)
}

func (e *env) queryPath(path string, hdr ...string) (int, page, string) {
	e.t.Helper()
	resp, b := e.get(path, hdr...)
	var p page
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &p); err != nil {
			e.t.Fatalf("bad page JSON: %v: %s", err, b)
		}
		return 200, p, ""
	}
	var errs []sfErr
	if err := json.Unmarshal(b, &errs); err != nil || len(errs) != 1 {
		e.t.Fatalf("error body is not a Salesforce error array (%d): %s", resp.StatusCode, b)
	}
	return resp.StatusCode, p, errs[0].ErrorCode
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

var _ = strings.Contains

func (o *Org) mustUser(t testing.TB, name string) string {
	id, ok := o.UserID(name)
	if !ok {
		t.Fatalf("no user %s", name)
	}
	return id
}

func stdB64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
