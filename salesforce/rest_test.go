package salesforce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const limitsPath = "/services/data/v60.0/limits"

func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		ctype       string
		body        string
		wantCalls   int64 // requests to the endpoint
		wantIs      []error
		wantNotIs   []error
		wantCode    string
		wantMessage string
	}{
		{
			name: "request limit exceeded is a sentinel, not retried", status: 403, ctype: "application/json",
			body:      `[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`,
			wantCalls: 1, wantIs: []error{ErrRequestLimit}, wantNotIs: []error{ErrUnavailable, ErrAuth},
			wantCode: CodeRequestLimitExceeded, wantMessage: "TotalRequests Limit exceeded.",
		},
		{
			name: "request limit in an odd body", status: 403, ctype: "text/plain",
			body:      `REQUEST_LIMIT_EXCEEDED: TotalRequests Limit exceeded.`,
			wantCalls: 1, wantIs: []error{ErrRequestLimit}, wantNotIs: []error{ErrUnavailable},
			wantCode: CodeRequestLimitExceeded,
		},
		{
			name: "concurrent request limit is retried, then unavailable", status: 403, ctype: "application/json",
			body:      `[{"message":"ConcurrentRequests (Concurrent API Requests) Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`,
			wantCalls: 4, wantIs: []error{ErrConcurrentLimit, ErrUnavailable}, wantNotIs: []error{ErrRequestLimit},
			wantCode: CodeRequestLimitExceeded, wantMessage: "ConcurrentRequests (Concurrent API Requests) Limit exceeded.",
		},
		{
			name: "concurrent long transaction limit is retried", status: 403, ctype: "application/json",
			body:      `[{"message":"ConcurrentPerOrgLongTxn Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`,
			wantCalls: 4, wantIs: []error{ErrConcurrentLimit, ErrUnavailable}, wantNotIs: []error{ErrRequestLimit},
			wantCode: CodeRequestLimitExceeded,
		},
		{
			name: "concurrent limit in an odd body", status: 403, ctype: "text/plain",
			body:      `REQUEST_LIMIT_EXCEEDED: ConcurrentRequests (Concurrent API Requests) Limit exceeded.`,
			wantCalls: 4, wantIs: []error{ErrConcurrentLimit}, wantNotIs: []error{ErrRequestLimit},
			wantCode: CodeRequestLimitExceeded,
		},
		{
			name: "a limit message naming no concurrent limit counts as the daily one", status: 403, ctype: "application/json",
			body:      `[{"message":"Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`,
			wantCalls: 1, wantIs: []error{ErrRequestLimit}, wantNotIs: []error{ErrConcurrentLimit, ErrUnavailable},
			wantCode: CodeRequestLimitExceeded,
		},
		{
			name: "missing permission is a plain error", status: 403, ctype: "application/json",
			body:      `[{"message":"Insufficient privileges","errorCode":"INSUFFICIENT_ACCESS"}]`,
			wantCalls: 1, wantNotIs: []error{ErrRequestLimit, ErrUnavailable, ErrAuth},
			wantCode: CodeInsufficientAccess, wantMessage: "Insufficient privileges",
		},
		{
			name: "malformed query is not retried", status: 400, ctype: "application/json",
			body:      `[{"message":"unexpected token: '+0000'","errorCode":"MALFORMED_QUERY"}]`,
			wantCalls: 1, wantNotIs: []error{ErrRequestLimit, ErrUnavailable},
			wantCode: CodeMalformedQuery, wantMessage: "unexpected token: '+0000'",
		},
		{
			name: "uri too long", status: 414, ctype: "text/html",
			body:      `<html><body>414 Request-URI Too Large</body></html>`,
			wantCalls: 1, wantIs: []error{ErrURITooLong}, wantNotIs: []error{ErrUnavailable},
		},
		{
			name: "request header fields too large", status: 431, ctype: "",
			wantCalls: 1, wantIs: []error{ErrURITooLong},
		},
		{
			name: "5xx retried then unavailable", status: 503, ctype: "application/json",
			body:      `[{"message":"Server unavailable","errorCode":"SERVER_UNAVAILABLE"}]`,
			wantCalls: 4, wantIs: []error{ErrUnavailable}, wantNotIs: []error{ErrRequestLimit},
			wantCode: "SERVER_UNAVAILABLE",
		},
		{
			name: "500 with html retried then unavailable", status: 500, ctype: "text/html",
			body:      `<html>oops</html>`,
			wantCalls: 4, wantIs: []error{ErrUnavailable}, wantMessage: "<html>oops</html>",
		},
		{
			name: "501 is not retried", status: 501, ctype: "text/plain", body: "no",
			wantCalls: 1, wantNotIs: []error{ErrUnavailable},
		},
		{
			name: "200 html is a bad response, retried", status: 200, ctype: "text/html; charset=utf-8",
			body:      `<!DOCTYPE html><html><head><title>Maintenance</title></head></html>`,
			wantCalls: 4, wantIs: []error{ErrBadResponse, ErrUnavailable},
		},
		{
			name: "200 json array is a bad response", status: 200, ctype: "application/json",
			body:      `[1,2,3]`,
			wantCalls: 4, wantIs: []error{ErrBadResponse, ErrUnavailable},
		},
		{
			name: "200 empty body is a bad response", status: 200, ctype: "application/json",
			wantCalls: 4, wantIs: []error{ErrBadResponse, ErrUnavailable},
		},
		{
			name: "200 truncated json is a bad response", status: 200, ctype: "application/json",
			body:      `{"totalSize":3,"done":true,"records":[{"Id":"a`,
			wantCalls: 4, wantIs: []error{ErrBadResponse, ErrUnavailable},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := newTestOrg(t)
			var calls atomic.Int64
			org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if tt.ctype != "" {
					w.Header().Set("Content-Type", tt.ctype)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			c := org.client(t)
			_, err := c.Query(context.Background(), "SELECT Id FROM Account")
			if err == nil {
				t.Fatal("Query succeeded")
			}
			t.Logf("error: %v", err)
			if calls.Load() != tt.wantCalls {
				t.Errorf("calls = %d, want %d (%v)", calls.Load(), tt.wantCalls, err)
			}
			if got := c.Stats().Calls[KindQuery]; got != tt.wantCalls {
				t.Errorf("Stats query calls = %d, want %d", got, tt.wantCalls)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v) = false for %v", target, err)
				}
			}
			for _, target := range tt.wantNotIs {
				if errors.Is(err, target) {
					t.Errorf("errors.Is(%v) = true for %v", target, err)
				}
			}
			var ae *APIError
			if tt.status != 200 {
				if !errors.As(err, &ae) {
					t.Fatalf("err = %v, want an *APIError", err)
				}
				if ae.StatusCode != tt.status || ae.ErrorCode != tt.wantCode || (tt.wantMessage != "" && ae.Message != tt.wantMessage) {
					t.Errorf("APIError = %+v", ae)
				}
				if ae.Path != "/services/data/v60.0/query" || strings.Contains(err.Error(), "SELECT") {
					t.Errorf("APIError path %q / message %q should name the path without the query", ae.Path, err.Error())
				}
			}
			if tt.status == 200 {
				var br *BadResponseError
				if !errors.As(err, &br) {
					t.Fatalf("err = %v, want *BadResponseError", err)
				}
				if br.ContentType != tt.ctype || br.Excerpt != excerpt([]byte(tt.body)) ||
					br.URL != org.srv.URL+"/services/data/v60.0/query" {
					t.Errorf("BadResponseError = %+v", br)
				}
				for _, want := range []string{br.URL, tt.ctype} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("message %q lacks %q", err.Error(), want)
					}
				}
			}
		})
	}
}

func TestBadResponseThenRecovery(t *testing.T) {
	org := newTestOrg(t)
	var calls atomic.Int64
	org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>proxy</html>")
			return
		}
		queryPage(w, 1, "", map[string]any{"Id": "001000000000001AAA"})
	})
	c := org.client(t)
	p, err := c.Query(context.Background(), "SELECT Id FROM Account")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || calls.Load() != 2 || c.Stats().Retries != 1 {
		t.Fatalf("records=%d calls=%d stats=%+v", len(p.Records), calls.Load(), c.Stats())
	}
}

// TestBackoffIsExponentialWithJitter runs in a synctest bubble: the waits
// between attempts are read off the fake clock.
func TestBackoffIsExponentialWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tokens atomic.Int64
		mux := tokenMux(&tokens)
		var mu sync.Mutex
		var at []time.Time
		mux.HandleFunc("GET "+limitsPath, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			at = append(at, time.Now())
			n := len(at)
			mu.Unlock()
			if n <= 5 {
				writeSFError(w, 503, "SERVER_UNAVAILABLE", "down")
				return
			}
			writeJSON(w, 200, map[string]any{})
		})
		c := inMemoryClient(t, mux, func(o *Options) {
			o.MaxAttempts = 6
			o.RetryWaitMin = time.Second
			o.RetryWaitMax = 8 * time.Second
		})
		if _, err := c.Limits(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(at) != 6 {
			t.Fatalf("attempts = %d, want 6", len(at))
		}
		for i := 1; i < len(at); i++ {
			ceil := min(time.Second<<(i-1), 8*time.Second)
			gap := at[i].Sub(at[i-1])
			if gap < ceil/2 || gap > ceil {
				t.Errorf("wait before retry %d = %s, want within [%s, %s]", i, gap, ceil/2, ceil)
			}
		}
		if st := c.Stats(); st.Retries != 5 {
			t.Errorf("Retries = %d, want 5", st.Retries)
		}
	})
}

func TestContextCanceledIsNeverRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tokens, calls atomic.Int64
		mux := tokenMux(&tokens)
		ctx, cancel := context.WithCancel(context.Background())
		mux.HandleFunc("GET "+limitsPath, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			cancel() // the caller gives up while the server fails
			writeSFError(w, 503, "SERVER_UNAVAILABLE", "down")
		})
		c := inMemoryClient(t, mux)
		_, err := c.Limits(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if errors.Is(err, ErrUnavailable) {
			t.Errorf("a cancellation reported as unavailable: %v", err)
		}
		if calls.Load() != 1 {
			t.Fatalf("calls = %d, want 1", calls.Load())
		}
	})
}

func TestTransportCanceledErrorIsNotRetried(t *testing.T) {
	var tokens atomic.Int64
	mux := tokenMux(&tokens)
	var calls atomic.Int64
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/token") {
			return handlerTransport{mux}.RoundTrip(r)
		}
		calls.Add(1)
		return nil, &url.Error{Op: "Get", URL: r.URL.String(), Err: context.Canceled}
	})
	c := inMemoryClient(t, nil, func(o *Options) { o.HTTPClient = &http.Client{Transport: rt} })
	_, err := c.Limits(context.Background())
	if !errors.Is(err, context.Canceled) || calls.Load() != 1 {
		t.Fatalf("err = %v after %d calls, want context.Canceled after 1", err, calls.Load())
	}
}

func TestBackoffBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tokens, calls atomic.Int64
		mux := tokenMux(&tokens)
		mux.HandleFunc("GET "+limitsPath, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			writeSFError(w, 503, "SERVER_UNAVAILABLE", "down")
		})
		c := inMemoryClient(t, mux, func(o *Options) {
			o.MaxAttempts = 11
			o.RetryWaitMin = 10 * time.Second
			o.RetryWaitMax = time.Minute
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Limits(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want the deadline (not ErrUnavailable)", err)
		}
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("returned %s after start, past the 30s deadline", elapsed)
		}
		if calls.Load() >= 11 {
			t.Errorf("calls = %d: the deadline did not cut the retries", calls.Load())
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransportErrorsRetriedThenUnavailable(t *testing.T) {
	org := newTestOrg(t)
	var calls atomic.Int64
	// The API host refuses connections; the token endpoint works.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	_ = ln.Close()
	org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
		writeJSON(w, 200, map[string]any{"access_token": "tok", "instance_url": dead, "id": ""})
		return true
	}
	c := org.client(t, func(o *Options) {
		base := http.DefaultTransport
		o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host != org.srv.Listener.Addr().String() {
				calls.Add(1)
			}
			return base.RoundTrip(r)
		})}
	})
	_, err = c.Limits(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if calls.Load() != 4 {
		t.Fatalf("attempts = %d, want 4", calls.Load())
	}
}

func TestParseLimitInfo(t *testing.T) {
	tests := []struct {
		in   string
		want APIUsage
		ok   bool
	}{
		{"api-usage=25/15000", APIUsage{Used: 25, Limit: 15000}, true},
		{"api-usage=18/5000, per-app-api-usage=17/250(appName=sample-connected-app)", APIUsage{Used: 18, Limit: 5000}, true},
		{"per-app-api-usage=17/250(appName=x),api-usage=7/100", APIUsage{Used: 7, Limit: 100}, true},
		{"API-Usage= 3 / 9", APIUsage{Used: 3, Limit: 9}, true},
		{"", APIUsage{}, false},
		{"api-usage=abc/100", APIUsage{}, false},
		{"api-usage=5", APIUsage{}, false},
		{"per-app-api-usage=1/2(appName=x)", APIUsage{}, false},
	}
	for _, tt := range tests {
		got, ok := parseLimitInfo(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseLimitInfo(%q) = %+v,%v want %+v,%v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLimitInfoAndServerClockExposed(t *testing.T) {
	org := newTestOrg(t)
	serverNow := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	org.handle("GET "+limitsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sforce-Limit-Info", "api-usage=1234/15000")
		w.Header().Set("Date", serverNow.Format(http.TimeFormat))
		writeJSON(w, 200, map[string]any{
			"DailyApiRequests":         map[string]any{"Max": 15000, "Remaining": 13766},
			"DailyAsyncApexExecutions": map[string]any{"Max": 250000, "Remaining": 250000, "SomeApp": map[string]any{"Max": 1}},
			"Broken":                   map[string]any{"Max": "lots"},
			"NoRemaining":              map[string]any{"Max": 5},
			"NotAnObject":              7,
		})
	})
	c := org.client(t)
	if _, ok := c.APIUsage(); ok {
		t.Fatal("APIUsage reported before any response")
	}
	lim, err := c.Limits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(lim) != 2 || lim["DailyApiRequests"] != (Limit{Max: 15000, Remaining: 13766}) || lim["DailyAsyncApexExecutions"].Max != 250000 {
		t.Fatalf("Limits = %+v", lim)
	}
	u, ok := c.APIUsage()
	if !ok || u.Used != 1234 || u.Limit != 15000 {
		t.Fatalf("APIUsage = %+v, %v", u, ok)
	}
	if st := c.Stats(); st.APIUsage.Used != 1234 {
		t.Fatalf("Stats.APIUsage = %+v", st.APIUsage)
	}
	off, ok := c.ServerClockOffset()
	if !ok || off < 2*time.Hour-time.Minute || off > 2*time.Hour+time.Minute {
		t.Fatalf("ServerClockOffset = %s, %v; want about 2h", off, ok)
	}
}

func TestClassifyTable(t *testing.T) {
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	api := func(code int, ec string) error { return &APIError{StatusCode: code, ErrorCode: ec} }
	tests := []struct {
		name   string
		ctx    context.Context
		status int // 0 = no response (transport error)
		err    error
		want   action
	}{
		{"200", ctx, 200, nil, actReturn},
		{"401", ctx, 401, nil, actReauth},
		{"401 decoded", ctx, 401, api(401, CodeInvalidSession), actReauth},
		{"403 undecoded waits for the body", ctx, 403, nil, actReturn},
		{"403 invalid session", ctx, 403, api(403, CodeInvalidSession), actReauth},
		{"403 limit", ctx, 403, api(403, CodeRequestLimitExceeded), actReturn},
		{"403 daily limit", ctx, 403, &APIError{StatusCode: 403, ErrorCode: CodeRequestLimitExceeded, Message: "TotalRequests Limit exceeded."}, actReturn},
		{"403 concurrent limit", ctx, 403, &APIError{StatusCode: 403, ErrorCode: CodeRequestLimitExceeded, Message: "ConcurrentRequests (Concurrent API Requests) Limit exceeded."}, actWaitLimit},
		{"403 concurrent limit, context over", canceled, 403, &APIError{StatusCode: 403, ErrorCode: CodeRequestLimitExceeded, Message: "ConcurrentRequests (Concurrent API Requests) Limit exceeded."}, actReturn},
		{"403 access", ctx, 403, api(403, CodeInsufficientAccess), actReturn},
		{"404", ctx, 404, nil, actReturn},
		{"408", ctx, 408, nil, actBackoff},
		{"414", ctx, 414, nil, actReturn},
		{"429", ctx, 429, nil, actBackoff},
		{"500", ctx, 500, nil, actBackoff},
		{"501", ctx, 501, nil, actReturn},
		{"503", ctx, 503, nil, actBackoff},
		{"bad body", ctx, 200, &BadResponseError{Err: errors.New("x")}, actBackoff},
		{"transport", ctx, 0, &url.Error{Op: "Get", Err: errors.New("connection reset by peer")}, actBackoff},
		{"url parse", ctx, 0, &url.Error{Op: "parse", Err: errors.New("bad")}, actReturn},
		{"canceled error", ctx, 0, fmt.Errorf("x: %w", context.Canceled), actReturn},
		{"transport timeout with live ctx", ctx, 0, &url.Error{Op: "Get", Err: timeoutErr{}}, actBackoff},
		{"caller deadline passed", expired, 0, &url.Error{Op: "Get", Err: timeoutErr{}}, actReturn},
		{"canceled ctx", canceled, 503, nil, actReturn},
		{"auth refused", ctx, 400, &AuthError{StatusCode: 400, Code: "invalid_grant"}, actReturn},
		{"auth 5xx", ctx, 502, &AuthError{StatusCode: 502, Code: "x"}, actBackoff},
	}
	for _, tt := range tests {
		var resp *http.Response
		if tt.status != 0 {
			resp = &http.Response{StatusCode: tt.status}
		}
		if got := classify(tt.ctx, resp, tt.err); got != tt.want {
			t.Errorf("%s: classify = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	for attempt := range 12 {
		ceil := min(500*time.Millisecond<<attempt, 10*time.Second)
		for range 50 {
			d := backoff(500*time.Millisecond, 10*time.Second, attempt, nil)
			if d < ceil/2 || d > ceil {
				t.Fatalf("backoff(attempt %d) = %s, want within [%s, %s]", attempt, d, ceil/2, ceil)
			}
		}
	}
}

// TestSecretsNeverLogged drives re-authentication, retries and errors with a
// debug logger and checks no token, secret or assertion reaches the log.
func TestSecretsNeverLogged(t *testing.T) {
	for _, mode := range []AuthMode{AuthJWTBearer, AuthClientCredentials} {
		t.Run(string(mode), func(t *testing.T) {
			org := newTestOrg(t)
			var assertions []string
			var mu sync.Mutex
			org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
				_ = r.ParseForm()
				mu.Lock()
				assertions = append(assertions, r.PostForm.Get("assertion"))
				mu.Unlock()
				return false
			}
			var n atomic.Int64
			org.handle("GET "+limitsPath, func(w http.ResponseWriter, r *http.Request) {
				switch n.Add(1) {
				case 1:
					writeSFError(w, 401, CodeInvalidSession, "Session expired or invalid")
				case 2:
					writeSFError(w, 503, "SERVER_UNAVAILABLE", "down")
				default:
					writeJSON(w, 200, map[string]any{})
				}
			})
			var buf bytes.Buffer
			var bufMu sync.Mutex
			logger := slog.New(slog.NewTextHandler(lockedWriter{&bufMu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := org.client(t, func(o *Options) {
				o.Logger = logger
				if mode == AuthClientCredentials {
					o.AuthMode, o.ClientSecret, o.PrivateKeyPEM, o.Username = mode, "super-s3cr3t-value", nil, ""
				}
			})
			if _, err := c.Limits(context.Background()); err != nil {
				t.Fatal(err)
			}
			bufMu.Lock()
			logged := buf.String()
			bufMu.Unlock()
			if !strings.Contains(logged, "session") {
				t.Fatalf("expected debug lines about the session, got %q", logged)
			}
			secrets := []string{"tok-1", "tok-2", "super-s3cr3t-value", "PRIVATE KEY"}
			for _, a := range assertions {
				if a != "" {
					secrets = append(secrets, a[:40])
				}
			}
			for _, s := range secrets {
				if strings.Contains(logged, s) {
					t.Errorf("log contains secret %q:\n%s", s, logged)
				}
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestErrorFromPlainBody(t *testing.T) {
	tests := []struct {
		status int
		body   string
		code   string
		reauth bool
	}{
		{403, "Bad_OAuth_Token", CodeBadOAuthToken, true},
		{401, "INVALID_SESSION_ID", CodeInvalidSession, true},
		{403, "Forbidden", "", false},
		{403, "<html>REQUEST_LIMIT_EXCEEDED</html>", CodeRequestLimitExceeded, false},
		{404, "Bad_OAuth_Token", "", false},
	}
	for _, tt := range tests {
		err := errorFromBody("GET", "/x", tt.status, []byte(tt.body), true)
		var ae *APIError
		if !errors.As(err, &ae) || ae.ErrorCode != tt.code || needsReauth(err) != tt.reauth {
			t.Errorf("errorFromBody(%d, %q) = %+v, reauth %v", tt.status, tt.body, err, needsReauth(err))
		}
	}
}

// timeoutErr is a transport timeout that, like net/http's, matches
// context.DeadlineExceeded.
type timeoutErr struct{}

func (timeoutErr) Error() string        { return "timeout awaiting response headers" }
func (timeoutErr) Timeout() bool        { return true }
func (timeoutErr) Is(target error) bool { return target == context.DeadlineExceeded }
