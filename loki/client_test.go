package loki

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang/snappy"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// captureTransport records every request body (decompressed) before passing
// it on.
type captureTransport struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies [][]byte
}

func (c *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	raw := b
	if req.Header.Get("Content-Type") == "application/x-protobuf" {
		if raw, err = snappy.Decode(nil, b); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.bodies = append(c.bodies, raw)
	c.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(b))
	return c.next.RoundTrip(req)
}

func TestInvalidDynamicLabelNeverReachesTheWire(t *testing.T) {
	for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
		t.Run(enc.String(), func(t *testing.T) {
			srv := simloki.New(simloki.Options{})
			capt := &captureTransport{next: srv.Transport()}
			c := newClient(t, srv, func(o *Options) { o.Transport = capt; o.Encoding = enc })
			es := batch(6)
			es[1].Labels = es[1].Labels.With(Label{Name: "user_id", Value: "MARKER-not-allowed"})
			es[2].Labels = es[2].Labels.With(Label{Name: "event_type", Value: "MARKER" + strings.Repeat("x", 3000)})
			es[3].Labels = es[3].Labels.With(Label{Name: "source", Value: "MARKER\xff-not-utf8"})
			es[4].Labels = NewLabels()
			res := c.Push(context.Background(), es)
			if len(res.Rejected) != 4 {
				t.Fatalf("rejected %v, want entries 1-4", res.Rejected)
			}
			// Loki's reason names where Loki has one.
			reasons := []Reason{ReasonInvalidLabels, ReasonLabelValueTooLong, ReasonInvalidLabels, ReasonMissingLabels}
			for k, r := range res.Rejected {
				if r.Index != k+1 || r.Reason != reasons[k] || r.Status != 0 || r.Detail == "" {
					t.Errorf("rejection %+v, want index %d reason %s status 0 with detail", r, k+1, reasons[k])
				}
			}
			if !strings.Contains(res.Rejected[0].Detail, `"user_id"`) {
				t.Errorf("detail %q does not name the label", res.Rejected[0].Detail)
			}
			wantAcceptedExcept(t, res, srv, es, 1, 2, 3, 4)
			if len(capt.bodies) == 0 {
				t.Fatal("nothing captured")
			}
			for _, b := range capt.bodies {
				if bytes.Contains(b, []byte("MARKER")) || bytes.Contains(b, []byte("user_id")) {
					t.Fatalf("a rejected label reached the wire: %q", b)
				}
			}
			if n := srv.RejectedCount(""); n != 0 {
				t.Fatalf("receiver rejected %d entries; the client should have kept them", n)
			}
		})
	}
}

func TestOutOfOrderEntriesArriveSortedPerStream(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, func(o *Options) { o.MaxEntriesPerRequest = 7 })
	now := time.Now()
	// Newest first over two hours: unsorted, Loki's one-hour window would
	// reject the older half as too_far_behind.
	var es []Entry
	for i := range 60 {
		es = append(es, Entry{
			Timestamp: now.Add(-time.Duration(i) * 2 * time.Minute),
			Labels:    lbl("job", "ooo", "source", []string{"a", "b", "c"}[i%3]),
			Line:      fmt.Sprint("line ", i),
			Ref:       uint64(i),
		})
	}
	res := c.Push(context.Background(), es)
	wantAllAccepted(t, res, srv, es)
	if n := srv.RejectedCount("too_far_behind"); n != 0 {
		t.Fatalf("%d entries too far behind", n)
	}
	assertSortedPerStream(t, srv)
}

func TestEqualTimestampsKeepInputOrder(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, nil)
	ts := time.Now()
	var es []Entry
	for i := range 5 {
		es = append(es, Entry{Timestamp: ts, Labels: lbl("job", "same"), Line: fmt.Sprint(i), Ref: uint64(i)})
	}
	wantAllAccepted(t, c.Push(context.Background(), es), srv, es)
	for i, e := range srv.Entries() {
		if e.Line != fmt.Sprint(i) {
			t.Fatalf("entry %d is %q: equal timestamps reordered", i, e.Line)
		}
	}
}

func TestLineCapTruncatesOnRuneBoundaryAndMarks(t *testing.T) {
	for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
		t.Run(enc.String(), func(t *testing.T) {
			srv := simloki.New(simloki.Options{})
			c := newClient(t, srv, func(o *Options) { o.Encoding = enc })
			long := strings.Repeat("a", DefaultMaxLineBytes-1) + "日本語" // "日" straddles the cap
			es := []Entry{
				{Timestamp: time.Now(), Labels: lbl("job", "cap"), Line: long, Metadata: []Label{{"k", "v"}}, Ref: 1},
				{Timestamp: time.Now(), Labels: lbl("job", "cap"), Line: "short", Ref: 2},
			}
			res := c.Push(context.Background(), es)
			if !res.OK() || res.Truncated != 1 {
				t.Fatalf("ok %v truncated %d, want ok and 1", res.OK(), res.Truncated)
			}
			got := srv.Entries()
			slices.SortFunc(got, func(a, b simloki.Entry) int { return len(b.Line) - len(a.Line) })
			if got[0].Line != long[:DefaultMaxLineBytes-1] || !utf8.ValidString(got[0].Line) {
				t.Fatalf("truncated line has %d bytes, want %d on a rune boundary", len(got[0].Line), DefaultMaxLineBytes-1)
			}
			if v := got[0].MetadataValue(TruncatedMetadataName); v != fmt.Sprint(len(long)) {
				t.Fatalf("%s = %q, want %d", TruncatedMetadataName, v, len(long))
			}
			if got[0].MetadataValue("k") != "v" || got[1].MetadataValue(TruncatedMetadataName) != "" {
				t.Fatalf("metadata wrong: %+v / %+v", got[0].Metadata, got[1].Metadata)
			}
			if es[0].Line != long || len(es[0].Metadata) != 1 {
				t.Fatal("Push modified the caller's entry")
			}
		})
	}
}

func TestCapLine(t *testing.T) {
	cases := []struct {
		line string
		max  int
		want string
		cut  bool
	}{
		{"hello", 10, "hello", false},
		{"hello", 5, "hello", false},
		{"hello", 4, "hell", true},
		{"hello", 0, "hello", false},
		{"hello", -1, "hello", false},
		{"aé", 2, "a", true},                              // é is 2 bytes
		{"a日", 3, "a", true},                              // 日 is 3 bytes
		{"a🦆", 4, "a", true},                              // 4-byte rune
		{"ab🦆c", 6, "ab🦆", true},                          // cut right after the rune
		{"\x80\x80\x80\x80\x80", 3, "\x80\x80\x80", true}, // invalid UTF-8: hard cut
	}
	for _, tc := range cases {
		got, cut := CapLine(tc.line, tc.max)
		if got != tc.want || cut != tc.cut {
			t.Errorf("CapLine(%q, %d) = %q, %v; want %q, %v", tc.line, tc.max, got, cut, tc.want, tc.cut)
		}
	}
}

func TestZeroTimestampRejectedClientSide(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, nil)
	es := batch(3)
	es[1].Timestamp = time.Time{}
	res := c.Push(context.Background(), es)
	wantRejected(t, res, es, []int{1}, ReasonInvalidTimestamp, 0, "outside")
	wantAcceptedExcept(t, res, srv, es, 1)
}

func TestRequestsRespectSizeAndCountCaps(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	const maxBytes = 3000
	c := newClient(t, srv, func(o *Options) {
		o.Encoding = EncodingJSON
		o.MaxRequestBytes = maxBytes
		o.MaxEntriesPerRequest = 25
	})
	es := batch(500)
	wantAllAccepted(t, c.Push(context.Background(), es), srv, es)
	reqs := srv.Requests()
	if len(reqs) < 500/25 {
		t.Fatalf("%d requests, want at least %d", len(reqs), 500/25)
	}
	for i, r := range reqs {
		if r.RawBytes > maxBytes || r.Entries > 25 {
			t.Fatalf("request %d: %d bytes, %d entries; caps %d, 25", i, r.RawBytes, r.Entries, maxBytes)
		}
	}
}

func TestRequestSizeEstimateIsExact(t *testing.T) {
	// The packer's per-entry sizes must add up to the real encoding, or the
	// hard cap could be overshot.
	for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
		srv := simloki.New(simloki.Options{})
		c := newClient(t, srv, func(o *Options) { o.Encoding = enc })
		es := randomEntries(newRand(3), time.Now(), 300)
		es[0].Line = strings.Repeat("é", DefaultMaxLineBytes) // truncated
		p := &push{c: c, entries: es, res: &Result{Outcomes: make([]Outcome, len(es))}, s: c.getScratch()}
		p.prepare()
		want, prev := 0, int32(-1)
		for _, it := range p.s.items {
			want += it.size
			if it.stream != prev {
				want += streamOverhead(enc, p.labels(it.stream))
				prev = it.stream
			}
		}
		var got []byte
		if enc == EncodingJSON {
			got = p.appendJSON(nil, p.s.items)
			// The estimate counts a separator after every value and stream;
			// the body has none after the last of each.
			want += len(`{"streams":[]}`) - 1 - len(p.s.streams)
		} else {
			got = p.appendProto(nil, p.s.items)
		}
		if len(got) > want || (enc == EncodingJSON && len(got) != want) {
			t.Errorf("%s: encoded %d bytes, estimate %d", enc, len(got), want)
		}
		c.putScratch(p.s)
	}
}

func TestAuthAndTenantHeaders(t *testing.T) {
	cases := []struct {
		name   string
		server simloki.Options
		client func(*Options)
		err    error
	}{
		{"basic auth", simloki.Options{Username: "123", Password: "tok"}, func(o *Options) { o.Username, o.Password = "123", "tok" }, nil},
		{"basic auth from URL userinfo", simloki.Options{Username: "123", Password: "tok"}, func(o *Options) { o.URL = "http://123:tok@loki.invalid/loki/api/v1/push" }, nil},
		{"wrong password", simloki.Options{Username: "123", Password: "tok"}, func(o *Options) { o.Username, o.Password = "123", "nope" }, ErrAuth},
		{"bearer", simloki.Options{BearerToken: "s3cret"}, func(o *Options) { o.BearerToken = "s3cret" }, nil},
		{"missing bearer", simloki.Options{BearerToken: "s3cret"}, nil, ErrAuth},
		{"tenant required and sent", simloki.Options{RequireTenant: true}, func(o *Options) { o.TenantID = "team-a" }, nil},
		{"tenant required, none sent", simloki.Options{RequireTenant: true}, nil, ErrAuth},
		{"tenant with basic auth", simloki.Options{RequireTenant: true, Username: "u", Password: "p"}, func(o *Options) { o.TenantID, o.Username, o.Password = "t1", "u", "p" }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := simloki.New(tc.server)
			c := newClient(t, srv, tc.client)
			es := batch(2)
			res := c.Push(context.Background(), es)
			if tc.err == nil {
				wantAllAccepted(t, res, srv, es)
			} else {
				wantNoneDelivered(t, res, srv, es, tc.err)
			}
			if strings.Contains(c.url, "tok") {
				t.Fatalf("credentials left in the client URL %q", c.url)
			}
		})
	}
}

func TestExtraHeadersAndUserAgentAreSent(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, func(o *Options) {
		o.Headers = map[string]string{"X-Extra": "yes"}
		o.TenantID = "t"
	})
	es := batch(1)
	wantAllAccepted(t, c.Push(context.Background(), es), srv, es)
	h := srv.Requests()[0].Header
	if h.Get("X-Extra") != "yes" || h.Get("User-Agent") != DefaultUserAgent || h.Get("X-Scope-OrgID") != "t" ||
		h.Get("Content-Type") != "application/x-protobuf" || h.Get("Content-Encoding") != "snappy" {
		t.Fatalf("headers %v", h)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := map[string]Options{
		"no URL":               {},
		"bad scheme":           {URL: "ftp://x/loki/api/v1/push"},
		"gzip with protobuf":   {URL: "http://x/p", Gzip: true},
		"basic and bearer":     {URL: "http://x/p", Username: "u", BearerToken: "t"},
		"two tenants":          {URL: "http://x/p", TenantID: "a|b"},
		"client header clash":  {URL: "http://x/p", Headers: map[string]string{"content-type": "text/plain"}},
		"bad extra label name": {URL: "http://x/p", Labels: LabelOptions{ExtraAllowed: []string{"bad-name"}}},
		"cert without key":     {URL: "http://x/p", TLS: TLSOptions{CertFile: "c.pem"}},
		"missing CA file":      {URL: "http://x/p", TLS: TLSOptions{CAFile: "/nonexistent/ca.pem"}},
		"backoff inverted":     {URL: "http://x/p", MinBackoff: time.Minute, MaxBackoff: time.Second},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestNewErrorDoesNotLeakURLCredentials(t *testing.T) {
	_, err := New(Options{URL: "ftp://user:hunter2@x/p"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v leaks the password", err)
	}
}

// TestLostResponseOverRealHTTP uses a real listener: the receiver stores the
// request, then hijacks and closes the connection.
func TestLostResponseOverRealHTTP(t *testing.T) {
	run := simloki.Start(t, simloki.Options{})
	run.DropResponses(1)
	c := newClient(t, run.Server, func(o *Options) { o.URL = run.PushURL(); o.Transport = nil })
	es := batch(25)
	res := c.Push(context.Background(), es)
	wantAllAccepted(t, res, run.Server, es)
	if res.Retries != 1 || len(run.Duplicates()) != len(es) {
		t.Fatalf("retries %d duplicates %d, want 1 and %d", res.Retries, len(run.Duplicates()), len(es))
	}
}

func TestTLSWithCAFile(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted handshake below is expected
	ts.StartTLS()
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	cert := ts.Certificate()
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	url := ts.URL + simloki.PushPath

	c := newClient(t, srv, func(o *Options) { o.URL, o.Transport, o.TLS.CAFile = url, nil, ca })
	es := batch(3)
	wantAllAccepted(t, c.Push(context.Background(), es), srv, es)

	// Without the CA the certificate is untrusted: not retried, not delivered.
	c = newClient(t, srv, func(o *Options) { o.URL, o.Transport = url, nil })
	res := c.Push(context.Background(), batch(3))
	var unknown x509.UnknownAuthorityError
	if len(res.NotDelivered) != 3 || res.Requests != 1 || !errors.As(res.Err, &unknown) {
		t.Fatalf("without CA: not delivered %d, requests %d, err %v; want 3, 1, unknown authority", len(res.NotDelivered), res.Requests, res.Err)
	}

	// InsecureSkipVerify only when asked.
	c = newClient(t, srv, func(o *Options) { o.URL, o.Transport, o.TLS.InsecureSkipVerify = url, nil, true })
	if res := c.Push(context.Background(), batch(1)); !res.OK() {
		t.Fatalf("insecure: %v", res.Err)
	}
}

func TestConcurrentPushes(t *testing.T) {
	run := simloki.Start(t, simloki.Options{})
	c := newClient(t, run.Server, func(o *Options) { o.URL = run.PushURL(); o.Transport = nil; o.MaxEntriesPerRequest = 13 })
	var wg sync.WaitGroup
	var all []Entry
	var mu sync.Mutex
	for g := range 6 {
		es := batch(100)
		for i := range es {
			es[i].Labels = es[i].Labels.With(Label{Name: "org", Value: fmt.Sprint("g", g)})
		}
		mu.Lock()
		all = append(all, es...)
		mu.Unlock()
		wg.Go(func() {
			if res := c.Push(context.Background(), es); !res.OK() {
				t.Errorf("goroutine %d: %v", g, res.Err)
			}
		})
	}
	wg.Wait()
	assertStored(t, run.Server, all)
}

func TestEmptyPushSendsNothing(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, nil)
	res := c.Push(context.Background(), nil)
	if res.Err != nil || res.Requests != 0 || len(srv.Requests()) != 0 || !res.OK() {
		t.Fatalf("empty push: %+v", res)
	}
}
