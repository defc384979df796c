package salesforce

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testOrgID  = "00D5g000000AbCdEAA"
	testUserID = "0055g000000XyZwAAA"
)

var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func testKeyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(testKey())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// testOrg is a minimal Salesforce double for precise edge cases: a token
// endpoint issuing tok-1, tok-2, … and whatever handlers a test registers.
type testOrg struct {
	mux    *http.ServeMux
	srv    *httptest.Server
	tokens atomic.Int64 // token requests answered
	// tokenHook, when set, answers the token request instead.
	tokenHook func(w http.ResponseWriter, r *http.Request) bool
}

func newTestOrg(t *testing.T) *testOrg {
	t.Helper()
	o := &testOrg{mux: http.NewServeMux()}
	o.mux.HandleFunc("POST /services/oauth2/token", func(w http.ResponseWriter, r *http.Request) {
		if o.tokenHook != nil && o.tokenHook(w, r) {
			return
		}
		n := o.tokens.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{
			"access_token": fmt.Sprintf("tok-%d", n),
			"instance_url": "http://" + r.Host,
			"id":           "https://login.salesforce.com/id/" + testOrgID + "/" + testUserID,
			"token_type":   "Bearer",
			"issued_at":    "1760000000000",
			"signature":    "c2ln",
		})
	})
	o.srv = httptest.NewServer(o.mux)
	t.Cleanup(o.srv.Close)
	return o
}

func (o *testOrg) handle(pattern string, h http.HandlerFunc) { o.mux.HandleFunc(pattern, h) }

// client returns a Client for the org with fast backoff, adjusted by mods.
func (o *testOrg) client(t *testing.T, mods ...func(*Options)) *Client {
	t.Helper()
	opts := Options{
		LoginURL:      o.srv.URL,
		ClientID:      "3MVG9-test-client",
		Username:      "integration@example.com",
		PrivateKeyPEM: testKeyPEM(),
		RetryWaitMin:  time.Millisecond,
		RetryWaitMax:  4 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
	}
	for _, m := range mods {
		m(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeSFError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, []map[string]any{{"message": msg, "errorCode": code}})
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// handlerTransport serves requests from a handler in memory (no sockets),
// so tests can run inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	if req.Body != nil {
		defer func() { _ = req.Body.Close() }()
	}
	ht.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// inMemoryClient returns a Client whose requests go to h in memory, with the
// default (real-sized) backoff bounds unless mods change them.
func inMemoryClient(t testing.TB, h http.Handler, mods ...func(*Options)) *Client {
	t.Helper()
	opts := Options{
		LoginURL:      "http://127.0.0.1:1",
		ClientID:      "3MVG9-test-client",
		Username:      "integration@example.com",
		PrivateKeyPEM: testKeyPEM(),
		HTTPClient:    &http.Client{Transport: handlerTransport{h}},
		Logger:        slog.New(slog.DiscardHandler),
	}
	for _, m := range mods {
		m(&opts)
	}
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// tokenMux returns a mux whose token endpoint issues tok-1, tok-2, … and
// counts them in n.
func tokenMux(n *atomic.Int64) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /services/oauth2/token", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		k := n.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{
			"access_token": fmt.Sprintf("tok-%d", k),
			"instance_url": "http://127.0.0.1:1",
			"id":           "https://login.salesforce.com/id/" + testOrgID + "/" + testUserID,
		})
	})
	return mux
}

// queryPage writes a query result page.
func queryPage(w http.ResponseWriter, total int, next string, records ...map[string]any) {
	if records == nil {
		records = []map[string]any{}
	}
	page := map[string]any{"totalSize": total, "done": next == "", "records": records}
	if next != "" {
		page["nextRecordsUrl"] = next
	}
	writeJSON(w, http.StatusOK, page)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
