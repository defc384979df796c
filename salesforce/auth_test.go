package salesforce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestValidateAuth(t *testing.T) {
	key := testKeyPEM()
	jwtOK := Options{ClientID: "cid", Username: "u@example.com", PrivateKeyPEM: key}
	cc := func(login string) Options {
		return Options{AuthMode: AuthClientCredentials, LoginURL: login, ClientID: "cid", ClientSecret: "s3cr3t"}
	}
	tests := []struct {
		name      string
		opts      Options
		wantField string // "" = valid
	}{
		{"jwt on default login host", jwtOK, ""},
		{"jwt on sandbox host", with(jwtOK, func(o *Options) { o.LoginURL = SandboxLoginURL }), ""},
		{"jwt on my domain with trailing slash", with(jwtOK, func(o *Options) { o.LoginURL = "https://acme.my.salesforce.com/" }), ""},
		{"jwt on loopback http", with(jwtOK, func(o *Options) { o.LoginURL = "http://127.0.0.1:8080" }), ""},
		{"missing client id", with(jwtOK, func(o *Options) { o.ClientID = "" }), "ClientID"},
		{"jwt missing username", with(jwtOK, func(o *Options) { o.Username = "" }), "Username"},
		{"jwt missing key", with(jwtOK, func(o *Options) { o.PrivateKeyPEM = nil }), "PrivateKeyPEM"},
		{"jwt garbage key", with(jwtOK, func(o *Options) {
			o.PrivateKeyPEM = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}), "PrivateKeyPEM"},
		{"plain http to a remote host", with(jwtOK, func(o *Options) { o.LoginURL = "http://acme.my.salesforce.com" }), "LoginURL"},
		{"login url with a path", with(jwtOK, func(o *Options) { o.LoginURL = "https://acme.my.salesforce.com/services" }), "LoginURL"},
		{"bad instance url", with(jwtOK, func(o *Options) { o.InstanceURL = "ftp://x" }), "InstanceURL"},
		{"token lifetime below minimum", with(jwtOK, func(o *Options) { o.TokenLifetime = time.Minute }), "TokenLifetime"},
		{"token lifetime at minimum", with(jwtOK, func(o *Options) { o.TokenLifetime = MinTokenLifetime }), ""},
		{"bad org id", with(jwtOK, func(o *Options) { o.OrgID = "00D123" }), "OrgID"},
		{"unknown mode", with(jwtOK, func(o *Options) { o.AuthMode = "password" }), "AuthMode"},
		{"client credentials on my domain", cc("https://acme.my.salesforce.com"), ""},
		{"client credentials on login host", cc(ProductionLoginURL), "LoginURL"},
		{"client credentials on default host", cc(""), "LoginURL"},
		{"client credentials on test host", cc("https://TEST.salesforce.com"), "LoginURL"},
		{"client credentials without secret", with(cc("https://acme.my.salesforce.com"), func(o *Options) { o.ClientSecret = "" }), "ClientSecret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateAuth(tt.opts)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("ValidateAuth = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
				t.Fatalf("ValidateAuth = %v, want *ConfigError", err)
			}
			if ce.Field != tt.wantField {
				t.Fatalf("ConfigError.Field = %q, want %q (%v)", ce.Field, tt.wantField, err)
			}
		})
	}
}

func with(o Options, f func(*Options)) Options { f(&o); return o }

func TestNewValidatesOtherOptions(t *testing.T) {
	base := Options{ClientID: "cid", Username: "u@example.com", PrivateKeyPEM: testKeyPEM()}
	for field, o := range map[string]Options{
		"APIVersion":   with(base, func(o *Options) { o.APIVersion = "sixty" }),
		"BatchSize":    with(base, func(o *Options) { o.BatchSize = 100 }),
		"RetryWaitMax": with(base, func(o *Options) { o.RetryWaitMin = time.Second; o.RetryWaitMax = time.Millisecond }),
		"TLSCAFile":    with(base, func(o *Options) { o.TLSCAFile = "/nonexistent/ca.pem" }),
	} {
		_, err := New(o)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("New with bad %s = %v, want *ConfigError for it", field, err)
		}
	}
}

func TestJWTAssertionClaims(t *testing.T) {
	org := newTestOrg(t)
	now := time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
	var got jwt.MapClaims
	var alg, grant string
	org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
		if err := r.ParseForm(); err != nil {
			t.Errorf("token request form: %v", err)
		}
		grant = r.PostForm.Get("grant_type")
		tok, err := jwt.Parse(r.PostForm.Get("assertion"), func(tk *jwt.Token) (any, error) {
			alg, _ = tk.Header["alg"].(string)
			return &testKey().PublicKey, nil
		}, jwt.WithTimeFunc(func() time.Time { return now }), jwt.WithValidMethods([]string{"RS256"}))
		if err != nil {
			t.Errorf("assertion does not verify with the public key: %v", err)
			return false
		}
		got = tok.Claims.(jwt.MapClaims)
		return false
	}
	c := org.client(t, func(o *Options) { o.Now = func() time.Time { return now } })
	if _, err := c.Session(context.Background()); err != nil {
		t.Fatal(err)
	}
	if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer" || alg != "RS256" {
		t.Fatalf("grant_type=%q alg=%q", grant, alg)
	}
	if got["iss"] != "3MVG9-test-client" || got["sub"] != "integration@example.com" {
		t.Errorf("iss/sub = %v/%v", got["iss"], got["sub"])
	}
	// aud must be a plain string equal to the login URL POSTed to.
	if aud, ok := got["aud"].(string); !ok || aud != org.srv.URL {
		t.Errorf("aud = %#v, want the string %q", got["aud"], org.srv.URL)
	}
	if exp, _ := got["exp"].(float64); int64(exp) != now.Add(180*time.Second).Unix() {
		t.Errorf("exp = %v, want now+180s", got["exp"])
	}
}

func TestClientCredentialsForm(t *testing.T) {
	org := newTestOrg(t)
	var form map[string]string
	org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
		_ = r.ParseForm()
		form = map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		return false
	}
	// The loopback test host stands in for a My Domain.
	c := org.client(t, func(o *Options) {
		o.AuthMode, o.ClientSecret, o.PrivateKeyPEM, o.Username = AuthClientCredentials, "s3cr3t", nil, ""
	})
	if _, err := c.Session(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"grant_type": "client_credentials", "client_id": "3MVG9-test-client", "client_secret": "s3cr3t"}
	if len(form) != len(want) {
		t.Fatalf("form = %v, want %v", form, want)
	}
	for k, v := range want {
		if form[k] != v {
			t.Errorf("form[%s] = %q, want %q", k, form[k], v)
		}
	}
}

func TestTokenEndpointErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		wantCalls   int64
		wantCode    string
		wantUnavail bool
	}{
		{"invalid grant fails fast", 400, `{"error":"invalid_grant","error_description":"audience is invalid"}`, 1, "invalid_grant", false},
		{"unknown user fails fast", 400, `{"error":"invalid_grant","error_description":"user hasn't approved this consumer"}`, 1, "invalid_grant", false},
		{"missing scope hint", 400, `{"error":"invalid_request","error_description":"refresh_token scope is required and the connected app should be installed and preauthorized."}`, 1, "invalid_request", false},
		{"5xx is retried then unavailable", 503, `<html>down</html>`, 4, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := newTestOrg(t)
			var calls atomic.Int64
			org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
				return true
			}
			c := org.client(t)
			_, err := c.Session(context.Background())
			if err == nil {
				t.Fatal("Session succeeded")
			}
			if calls.Load() != tt.wantCalls {
				t.Errorf("token requests = %d, want %d", calls.Load(), tt.wantCalls)
			}
			if got := errors.Is(err, ErrUnavailable); got != tt.wantUnavail {
				t.Errorf("errors.Is(ErrUnavailable) = %v, want %v (%v)", got, tt.wantUnavail, err)
			}
			if tt.wantCode != "" {
				var ae *AuthError
				if !errors.As(err, &ae) || ae.Code != tt.wantCode || !errors.Is(err, ErrAuth) {
					t.Fatalf("err = %v, want *AuthError %s", err, tt.wantCode)
				}
				// A refused grant is remembered: a second caller gets the
				// error without another token request.
				if _, err2 := c.Session(context.Background()); !errors.Is(err2, ErrAuth) || calls.Load() != tt.wantCalls {
					t.Errorf("second Session = %v after %d calls, want cached refusal", err2, calls.Load())
				}
			}
		})
	}
}

func TestTokenCachedUntilLifetimeMinusSkew(t *testing.T) {
	org := newTestOrg(t)
	now := time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := org.client(t, func(o *Options) { o.Now = clock; o.TokenLifetime = 10 * time.Minute })
	ctx := context.Background()
	s1, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	advance(9*time.Minute - time.Second) // skew = min(60s, 10m/4) = 60s
	if s, _ := c.Session(ctx); s.AccessToken != s1.AccessToken {
		t.Fatalf("token renewed before lifetime-skew: %s", s.AccessToken)
	}
	advance(time.Second)
	s2, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s2.AccessToken == s1.AccessToken || org.tokens.Load() != 2 {
		t.Fatalf("token not renewed at lifetime-skew: %s, %d mints", s2.AccessToken, org.tokens.Load())
	}
	if s2.OrgID != testOrgID || s2.UserID != testUserID || s2.InstanceURL != org.srv.URL {
		t.Errorf("session = %+v", s2)
	}
}

func TestTokenMintIsSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int64
		release := make(chan struct{})
		inner := tokenMux(&mints)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release // hold the first mint until every caller waits
			inner.ServeHTTP(w, r)
		})
		c := inMemoryClient(t, h)
		const n = 16
		var wg sync.WaitGroup
		toks := make([]string, n)
		for i := range n {
			wg.Go(func() {
				s, err := c.Session(context.Background())
				if err != nil {
					t.Error(err)
				}
				toks[i] = s.AccessToken
			})
		}
		synctest.Wait() // every caller is now minting or waiting for the mint
		close(release)
		wg.Wait()
		if mints.Load() != 1 {
			t.Fatalf("%d token requests for %d concurrent callers, want 1", mints.Load(), n)
		}
		for _, tk := range toks {
			if tk != "tok-1" {
				t.Fatalf("caller got %q, want tok-1", tk)
			}
		}
	})
}

// TestWaitingForMintHonorsContext: a caller waiting behind another's mint
// gives up when its own context ends.
func TestWaitingForMintHonorsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mints atomic.Int64
		release := make(chan struct{})
		inner := tokenMux(&mints)
		c := inMemoryClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			inner.ServeHTTP(w, r)
		}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := c.Session(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Session(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiting caller = %v, want its deadline", err)
		}
		close(release)
		<-done
	})
}

func TestInvalidateIsCompareAndClear(t *testing.T) {
	org := newTestOrg(t)
	c := org.client(t)
	ctx := context.Background()
	s1, _ := c.Session(ctx)
	if !c.InvalidateSession(s1.AccessToken) {
		t.Fatal("invalidating the cached token did not clear it")
	}
	s2, _ := c.Session(ctx)
	if s2.AccessToken == s1.AccessToken {
		t.Fatal("no new token after invalidation")
	}
	// A late rejection of the old token must not discard the new one.
	if c.InvalidateSession(s1.AccessToken) {
		t.Fatal("a stale token cleared the fresher one")
	}
	if s3, _ := c.Session(ctx); s3.AccessToken != s2.AccessToken || org.tokens.Load() != 2 {
		t.Fatalf("after stale invalidate: token %s, %d mints; want %s, 2", s3.AccessToken, org.tokens.Load(), s2.AccessToken)
	}
}

// TestConcurrent401sMintOnce: many requests in flight with one token all get
// 401; thanks to compare-and-clear and single-flight minting exactly one new
// token is requested, and every request succeeds on its single retry.
func TestConcurrent401sMintOnce(t *testing.T) {
	org := newTestOrg(t)
	const n = 8
	var arrived atomic.Int64
	allIn := make(chan struct{})
	org.handle("GET /services/data/v60.0/limits", func(w http.ResponseWriter, r *http.Request) {
		if bearer(r) == "tok-1" {
			if arrived.Add(1) == n {
				close(allIn)
			}
			<-allIn
			writeSFError(w, 401, CodeInvalidSession, "Session expired or invalid")
			return
		}
		writeJSON(w, 200, map[string]any{"DailyApiRequests": map[string]any{"Max": 15000, "Remaining": 14000}})
	})
	c := org.client(t)
	if _, err := c.Session(context.Background()); err != nil { // tok-1
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := c.Limits(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := org.tokens.Load(); got != 2 {
		t.Fatalf("token requests = %d, want 2 (one initial, one renewal)", got)
	}
	if st := c.Stats(); st.Reauths != n || st.Calls[KindLimits] != 2*n {
		t.Fatalf("stats = %+v, want %d reauths and %d limits calls", st, n, 2*n)
	}
}

func TestReauthOnceThenErrAuth(t *testing.T) {
	org := newTestOrg(t)
	var calls atomic.Int64
	org.handle("GET /services/data/v60.0/limits", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeSFError(w, 401, CodeInvalidSession, "Session expired or invalid")
	})
	c := org.client(t)
	_, err := c.Limits(context.Background())
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.ErrorCode != CodeInvalidSession {
		t.Fatalf("err = %v, want the INVALID_SESSION_ID APIError inside", err)
	}
	if calls.Load() != 2 || org.tokens.Load() != 2 {
		t.Fatalf("%d calls and %d token requests, want 2 and 2", calls.Load(), org.tokens.Load())
	}
}

func TestReauthOn403InvalidSession(t *testing.T) {
	org := newTestOrg(t)
	org.handle("GET /services/data/v60.0/limits", func(w http.ResponseWriter, r *http.Request) {
		if bearer(r) == "tok-1" {
			writeSFError(w, 403, CodeBadOAuthToken, "Bad_OAuth_Token")
			return
		}
		writeJSON(w, 200, map[string]any{})
	})
	c := org.client(t)
	if _, err := c.Limits(context.Background()); err != nil {
		t.Fatal(err)
	}
	if org.tokens.Load() != 2 {
		t.Fatalf("token requests = %d, want 2", org.tokens.Load())
	}
}

func TestOrgID(t *testing.T) {
	t.Run("from identity url without a call", func(t *testing.T) {
		org := newTestOrg(t)
		c := org.client(t)
		id, err := c.OrgID(context.Background())
		if err != nil || id != testOrgID {
			t.Fatalf("OrgID = %q, %v", id, err)
		}
		if st := c.Stats(); st.Calls[KindUserinfo] != 0 {
			t.Fatalf("userinfo called: %+v", st.Calls)
		}
	})
	t.Run("configured wins without any call", func(t *testing.T) {
		org := newTestOrg(t)
		c := org.client(t, func(o *Options) { o.OrgID = "00D000000000001AAA" })
		if id, _ := c.OrgID(context.Background()); id != "00D000000000001AAA" || org.tokens.Load() != 0 {
			t.Fatalf("OrgID = %q after %d token requests", id, org.tokens.Load())
		}
	})
	t.Run("userinfo fallback, once", func(t *testing.T) {
		org := newTestOrg(t)
		org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
			writeJSON(w, 200, map[string]any{"access_token": "tok-x", "instance_url": "http://" + r.Host, "id": "weird"})
			return true
		}
		org.handle("GET /services/oauth2/userinfo", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, map[string]any{"organization_id": testOrgID, "user_id": testUserID})
		})
		c := org.client(t)
		for range 2 {
			if id, err := c.OrgID(context.Background()); err != nil || id != testOrgID {
				t.Fatalf("OrgID = %q, %v", id, err)
			}
		}
		if n := c.Stats().Calls[KindUserinfo]; n != 1 {
			t.Fatalf("userinfo calls = %d, want 1", n)
		}
	})
}

func TestParseIdentityURL(t *testing.T) {
	tests := []struct{ in, org, user string }{
		{"https://login.salesforce.com/id/00D5g000000AbCdEAA/0055g000000XyZwAAA", "00D5g000000AbCdEAA", "0055g000000XyZwAAA"},
		{"https://test.salesforce.com/id/00D5g000000AbCdEAA/0055g000000XyZwAAA/", "00D5g000000AbCdEAA", "0055g000000XyZwAAA"},
		{"https://login.salesforce.com/id/00D5g000000AbCd/0055g000000XyZw", "", ""}, // 15-char org id
		{"https://login.salesforce.com/id/005xx/00D5g000000AbCdEAA", "", ""},
		{"", "", ""},
		{"::bad", "", ""},
	}
	for _, tt := range tests {
		org, user := parseIdentityURL(tt.in)
		if org != tt.org || user != tt.user {
			t.Errorf("parseIdentityURL(%q) = %q,%q want %q,%q", tt.in, org, user, tt.org, tt.user)
		}
	}
}

// TestFirstAssertionSignedAhead checks that the assertion signed when the client is made is the
// one the first mint sends when it is at most presignMaxAge old by the clock, and that a mint
// signs anew when it is older, when the clock went back, and for every later mint.
func TestFirstAssertionSignedAhead(t *testing.T) {
	t0 := time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		advance time.Duration // the clock between New and the first mint
		signed  time.Duration // when the sent assertion must have been signed, from t0
	}{
		{"a few seconds later", 5 * time.Second, 0},
		{"at the limit", presignMaxAge, 0},
		{"past the limit", presignMaxAge + time.Second, presignMaxAge + time.Second},
		{"the clock went back", -2 * time.Second, -2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org := newTestOrg(t)
			var mu sync.Mutex
			now := t0
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			var exps []int64
			org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
				if err := r.ParseForm(); err != nil {
					t.Errorf("token request form: %v", err)
				}
				var claims jwt.MapClaims
				if _, _, err := jwt.NewParser().ParseUnverified(r.PostForm.Get("assertion"), &claims); err != nil {
					t.Errorf("assertion: %v", err)
				}
				exp, _ := claims["exp"].(float64)
				mu.Lock()
				exps = append(exps, int64(exp))
				mu.Unlock()
				return false
			}
			c := org.client(t, func(o *Options) { o.Now = clock })
			mu.Lock()
			now = now.Add(tc.advance)
			mu.Unlock()
			s, err := c.Session(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c.InvalidateSession(s.AccessToken)
			mu.Lock()
			now = now.Add(time.Second)
			mu.Unlock()
			if _, err := c.Session(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []int64{
				t0.Add(tc.signed + jwtLifetime).Unix(),
				t0.Add(tc.advance + time.Second + jwtLifetime).Unix(),
			}
			if !slices.Equal(exps, want) {
				t.Fatalf("exp of the assertions sent = %v, want %v (the first signed at t0%+v, the second at the second mint)", exps, want, tc.signed)
			}
		})
	}
}

// TestTokenAnswerNeverQuoted: an error about a token answer (and the debug log of its retries)
// says what is wrong with it, its Content-Type and its size, and quotes none of it: the answer
// carries the access token first, and may carry a refresh or id token.
func TestTokenAnswerNeverQuoted(t *testing.T) {
	const secret = "00D5g000000AbCd!AR8AQSECRETSESSIONTOKENabcdefghijklmnop"
	const digits = "4815162342481516234248151623"
	id := `"id":"https://login.salesforce.com/id/` + testOrgID + `/` + testUserID + `"`
	tests := []struct {
		name    string
		status  int
		body    string
		secret  string
		wantMsg string
	}{
		{"truncated by a proxy", 200,
			`{"access_token":"` + secret + `","signature":"c2ln","scope":"api","instance_url":"https://acme.my.sales`,
			secret, "truncated"},
		{"no instance_url", 200,
			`{"access_token":"` + secret + `","signature":"c2ln","scope":"api",` + id + `,"token_type":"Bearer"}`,
			secret, "lacks instance_url"},
		{"other tokens but no access_token", 200,
			`{"refresh_token":"` + secret + `","id_token":"` + secret + `","instance_url":"https://acme.my.salesforce.com"}`,
			secret, "lacks access_token"},
		{"a token of the wrong type", 200,
			`{"access_token":` + digits + `,"instance_url":"https://acme.my.salesforce.com"}`,
			digits, "access_token is not a JSON string"},
		{"a proxy page echoing the grant", 502,
			`<html><body>upstream failed for client_secret=` + secret + `</body></html>`,
			secret, "not quoted"},
		{"a refusal that is not OAuth JSON", 400,
			`grant refused: assertion ` + secret,
			secret, "not quoted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := newTestOrg(t)
			org.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", "application/json;charset=UTF-8")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
				return true
			}
			var mu sync.Mutex
			var logged bytes.Buffer
			logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := org.client(t, func(o *Options) { o.Logger = logger; o.MaxAttempts = 2 })
			_, err := c.Limits(context.Background())
			if err == nil {
				t.Fatal("Limits succeeded with a broken token answer")
			}
			t.Logf("error: %v", err)
			if strings.Contains(err.Error(), tt.secret[:16]) {
				t.Errorf("the error quotes the token answer:\n%v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(logged.String(), tt.secret[:16]) {
				t.Errorf("the log quotes the token answer:\n%s", logged.String())
			}
			for _, want := range []string{tt.wantMsg, fmt.Sprintf("%d bytes", len(tt.body))} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if tt.status == 200 {
				var br *BadResponseError
				if !errors.As(err, &br) || !br.Withheld || br.Excerpt != "" || br.Size != len(tt.body) ||
					!strings.Contains(err.Error(), "application/json;charset=UTF-8") || !errors.Is(err, ErrUnavailable) {
					t.Errorf("err = %#v (%v), want an unavailable *BadResponseError of %d bytes, withheld, naming its Content-Type",
						br, err, len(tt.body))
				}
			}
		})
	}
}

// TestTokenAnswerDecodeErrors: each way a token answer can be broken gets its own description.
func TestTokenAnswerDecodeErrors(t *testing.T) {
	const ok = `{"access_token":"tok","instance_url":"https://acme.my.salesforce.com"}`
	tests := []struct{ body, want string }{
		{ok, ""},
		{"", "is empty"},
		{" \r\n", "is empty"},
		{ok[:20], "JSON is truncated"},
		{ok[:len(ok)-1], "JSON is truncated"},
		{ok + " x", fmt.Sprintf("not valid JSON (at byte %d)", len(ok)+2)},
		{"<html>", "not valid JSON (at byte 1)"},
		{`["tok"]`, "not a JSON object"},
		{`"tok"`, "not a JSON object"},
		{`{"access_token":"tok","instance_url":42}`, "instance_url is not a JSON string"},
		{`null`, "lacks access_token"},
		{`{"instance_url":"https://acme.my.salesforce.com"}`, "lacks access_token"},
		{`{"access_token":"tok"}`, "lacks instance_url"},
	}
	for _, tt := range tests {
		var tr tokenResponse
		err := tr.decode([]byte(tt.body))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("decode(%q) = %v, want nil", tt.body, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("decode(%q) = %v, want an error saying %q", tt.body, err, tt.want)
		}
	}
}
