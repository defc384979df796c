package loki

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// authGateway stands in front of the receiver like an auth proxy: it answers a push with a
// redirect to its login page (with a state token in the query) and serves that page with 200.
type authGateway struct {
	status      int
	posts, gets atomic.Int32
}

func (g *authGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil { // nil in a followed GET handed to a transport
		_, _ = io.Copy(io.Discard, r.Body)
	}
	if r.URL.Path == simloki.PushPath {
		g.posts.Add(1)
		http.Redirect(w, r, "/oauth2/login?state=s3cr3t", g.status)
		return
	}
	g.gets.Add(1)
	w.Header().Set("Content-Type", "text/html")
	_, _ = io.WriteString(w, "<html>please sign in</html>")
}

// handlerTransport serves requests with a handler in-process, as a caller's Transport.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// TestRedirectHoldsTheEntries: a redirect is not a receipt. Followed, a 302 turns the push into
// a GET of the login page, whose 200 read as "accepted" and let the job commit checkpoints past
// entries that were never stored. The client must not follow it, with its own transport or a
// caller's, even a 307/308 that would send the body again: the entries are held as
// ErrUnexpectedStatus with an error that says where the push was sent and what to change.
func TestRedirectHoldsTheEntries(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusSeeOther, http.StatusPermanentRedirect} {
		for _, own := range []bool{true, false} {
			name := http.StatusText(status) + map[bool]string{true: ", own transport", false: ", caller's transport"}[own]
			t.Run(name, func(t *testing.T) {
				gw := &authGateway{status: status}
				o := Options{Logger: quietLogger}
				if own {
					ts := httptest.NewServer(gw)
					defer ts.Close()
					o.URL = ts.URL + simloki.PushPath
				} else {
					o.URL, o.Transport = "http://loki.invalid"+simloki.PushPath, handlerTransport{gw}
				}
				c, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				es := batch(10)
				res := c.Push(context.Background(), es)
				if len(res.Accepted) != 0 || len(res.NotDelivered) != len(es) {
					t.Fatalf("accepted %d, not delivered %d; want all %d held", len(res.Accepted), len(res.NotDelivered), len(es))
				}
				if gw.posts.Load() != 1 || gw.gets.Load() != 0 || res.Requests != 1 {
					t.Fatalf("gateway saw %d pushes and %d page loads, client counts %d requests; want the one push, not followed",
						gw.posts.Load(), gw.gets.Load(), res.Requests)
				}
				var se *StatusError
				if !errors.Is(res.Err, ErrUnexpectedStatus) || !errors.As(res.Err, &se) || se.StatusCode != status {
					t.Fatalf("err %v; want ErrUnexpectedStatus with HTTP %d", res.Err, status)
				}
				msg := res.Err.Error()
				if !strings.Contains(msg, "/oauth2/login") || !strings.Contains(msg, "sink.loki.url") || strings.Contains(msg, "s3cr3t") {
					t.Fatalf("err %q; want it to name the redirect's target (without its query) and sink.loki.url", msg)
				}
				checkResultConsistent(t, res, es)
			})
		}
	}
}
