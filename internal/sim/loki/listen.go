package loki

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Running is a Server listening on a TCP address.
type Running struct {
	*Server
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	srv *http.Server
	ln  net.Listener
	end chan error
}

// Listen serves s on addr ("" means a free loopback port) until Close. It is
// what `sf2loki demo` uses to run the receiver in-process.
func Listen(addr string, s *Server) (*Running, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("simulated loki: listen on %s: %w", addr, err)
	}
	r := &Running{Server: s, URL: "http://" + ln.Addr().String(), ln: ln, end: make(chan error, 1),
		srv: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}}
	go func() { r.end <- r.srv.Serve(ln) }()
	return r, nil
}

// PushURL returns the push endpoint URL.
func (r *Running) PushURL() string { return r.URL + PushPath }

// Close stops the listener and closes open connections.
func (r *Running) Close() error {
	err := r.srv.Close()
	if serr := <-r.end; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return errors.Join(err, serr)
	}
	return err
}

// Start runs a new receiver for opts on a free loopback port and stops it
// when the test ends.
func Start(t testing.TB, opts Options) *Running {
	t.Helper()
	r, err := Listen("", New(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("stopping simulated loki: %v", err)
		}
	})
	return r
}

// ErrLostResponse is the error the in-process transport returns for a request
// whose answer DropResponses discarded (the request was processed).
var ErrLostResponse = errors.New("simulated loki: connection closed before the response (request was processed)")

// Transport returns an http.RoundTripper that hands requests to s in-process,
// without a network: handy inside testing/synctest bubbles, where latency and
// Retry-After waits run on the fake clock. URLs' hosts are ignored.
func (s *Server) Transport() http.RoundTripper { return transport{s} }

type transport struct{ s *Server }

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	resp := t.s.handle(req) // closes req.Body
	if resp.dropAnswer {
		return nil, ErrLostResponse
	}
	h := resp.header
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.body)))
	return &http.Response{
		Status:        strconv.Itoa(resp.status) + " " + http.StatusText(resp.status),
		StatusCode:    resp.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(resp.body))),
		ContentLength: int64(len(resp.body)),
		Request:       req,
	}, nil
}
