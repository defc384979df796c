package storetest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Proxy is an HTTP proxy in front of a real object-store server that injects network faults:
// a write (PUT/POST) forwarded and applied by the server whose response is then replaced by a
// 500 (the lost acknowledgement), a write answered 409 ConditionalRequestConflict without being
// forwarded (S3's answer to concurrent conditional requests), and a read (GET) whose body is
// cut off halfway.
type Proxy struct {
	// URL is the proxy's base URL, to use as the client's endpoint.
	URL string

	target    *url.URL
	mu        sync.Mutex
	writes    int // next writes to apply then fail
	conflicts int // next writes to refuse with 409 without forwarding
	reads     int // next reads to truncate
	fired     int
}

// NewProxy starts a proxy to target (a base URL) and stops it when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: u}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// LoseNextWriteAck makes the next write reach the server and then answers the client 500.
func (p *Proxy) LoseNextWriteAck() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes++
}

// ConflictNextWrite answers the next write 409 ConditionalRequestConflict without forwarding
// it: nothing is written.
func (p *Proxy) ConflictNextWrite() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conflicts++
}

// TruncateNextRead cuts the next GET response's body off halfway.
func (p *Proxy) TruncateNextRead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
}

// Fired returns how many faults were injected.
func (p *Proxy) Fired() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

func (p *Proxy) take(write bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := &p.reads
	if write {
		n = &p.writes
	}
	return p.takeLocked(n)
}

func (p *Proxy) takeLocked(n *int) bool {
	if *n == 0 {
		return false
	}
	*n--
	p.fired++
	return true
}

func (p *Proxy) takeConflict() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked(&p.conflicts)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	isWrite := r.Method == http.MethodPut || r.Method == http.MethodPost
	if isWrite && p.takeConflict() {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, "<Error><Code>ConditionalRequestConflict</Code><Message>injected: a conflicting conditional operation is in progress</Message></Error>")
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host // signatures (SigV4) cover the Host the client addressed
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if isWrite && resp.StatusCode < 300 && p.take(true) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "<Error><Code>InternalError</Code><Message>injected: response lost after the write was applied</Message></Error>")
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && len(respBody) > 1 && p.take(false) {
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(respBody[:len(respBody)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
			}
		}
		return
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}
