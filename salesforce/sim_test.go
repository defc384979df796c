package salesforce_test

// Tests of the client against the simulated org (internal/sim/salesforce):
// the acceptance items as seen from the client, and every client
// rule against the org's real error answers.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/csv"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
)

// otherKey is a private key (PEM) that the org's JWT app does not hold.
var otherKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

// TestSimJWT: a valid assertion gets a token; each invalid one gets
// Salesforce's invalid_grant (or sibling) answer, once, as an *AuthError.
func TestSimJWT(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(*simsf.Org)
		opts     simsf.Options
		mod      func(*salesforce.Options)
		wantCode string
		wantDesc string
	}{
		{name: "valid"},
		{
			name:     "wrong audience",
			opts:     simsf.Options{BaseURL: "https://acme.my.salesforce.com"},
			wantCode: "invalid_grant", wantDesc: simsf.DescAudienceInvalid,
		},
		{
			name:     "expired",
			mod:      func(o *salesforce.Options) { o.Now = func() time.Time { return time.Now().Add(-10 * time.Minute) } },
			wantCode: "invalid_grant", wantDesc: simsf.DescExpired,
		},
		{
			name:     "wrong key",
			mod:      func(o *salesforce.Options) { o.PrivateKeyPEM = otherKey() },
			wantCode: "invalid_grant", wantDesc: simsf.DescInvalidAssertion,
		},
		{
			name:     "unknown user",
			mod:      func(o *salesforce.Options) { o.Username = "nobody@example.com" },
			wantCode: "invalid_grant", wantDesc: simsf.DescNotApproved,
		},
		{
			name:     "user not pre-authorized",
			setup:    func(o *simsf.Org) { o.AddUser("other@example.com", simsf.AllPermissions()) },
			mod:      func(o *salesforce.Options) { o.Username = "other@example.com" },
			wantCode: "invalid_grant", wantDesc: simsf.DescNotApproved,
		},
		{
			name:     "inactive user",
			setup:    func(o *simsf.Org) { _ = o.SetUserActive(sftest.User, false) },
			wantCode: "invalid_grant", wantDesc: simsf.DescInactiveUser,
		},
		{
			name:     "unknown client id",
			mod:      func(o *salesforce.Options) { o.ClientID = "3MVG9-unknown" },
			wantCode: "invalid_client_id", wantDesc: simsf.DescClientIDInvalid,
		},
		{
			name: "app without refresh_token scope",
			setup: func(o *simsf.Org) {
				_ = o.AddConnectedApp(simsf.ConnectedApp{ClientID: sftest.ClientID, Certificate: sftest.Key().Certificate,
					PreAuthorized: []string{sftest.User}, Scopes: []string{"api"}})
			},
			wantCode: "invalid_request", wantDesc: simsf.DescRefreshScope,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := sftest.Start(t, tt.opts)
			if tt.setup != nil {
				tt.setup(env.Org)
			}
			var mods []func(*salesforce.Options)
			if tt.mod != nil {
				mods = append(mods, tt.mod)
			}
			c := env.Client(t, mods...)
			s, err := c.Session(context.Background())
			if tt.wantCode == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.AccessToken == "" || s.OrgID != env.OrgID() || s.InstanceURL != env.URL {
					t.Fatalf("session = %+v", s)
				}
				uid, _ := env.UserID(sftest.User)
				if s.UserID != uid {
					t.Errorf("UserID = %s, want %s", s.UserID, uid)
				}
				return
			}
			var ae *salesforce.AuthError
			if !errors.As(err, &ae) || !errors.Is(err, salesforce.ErrAuth) {
				t.Fatalf("err = %v, want *AuthError", err)
			}
			if ae.StatusCode != http.StatusBadRequest || ae.Code != tt.wantCode || ae.Description != tt.wantDesc {
				t.Fatalf("AuthError = %+v, want 400 %s %q", ae, tt.wantCode, tt.wantDesc)
			}
			if n := env.CallCount(simsf.KindToken); n != 1 {
				t.Fatalf("token requests = %d, want 1 (a refused grant is not retried)", n)
			}
		})
	}
}

func TestSimClientCredentials(t *testing.T) {
	t.Run("my domain", func(t *testing.T) {
		env := sftest.Start(t, simsf.Options{})
		if err := env.AddClientCredentialsApp("cc-app", "s3cr3t", sftest.User); err != nil {
			t.Fatal(err)
		}
		c := env.Client(t, func(o *salesforce.Options) {
			o.AuthMode, o.ClientID, o.ClientSecret, o.PrivateKeyPEM, o.Username = salesforce.AuthClientCredentials, "cc-app", "s3cr3t", nil, ""
		})
		id, err := c.OrgID(context.Background())
		if err != nil || id != env.OrgID() {
			t.Fatalf("OrgID = %q, %v", id, err)
		}
	})
	t.Run("generic host refused by the org", func(t *testing.T) {
		// The org treats its loopback name as a generic login host; the
		// client's own config check only knows the real generic hosts.
		env := sftest.Start(t, simsf.Options{GenericLoginHosts: []string{"127.0.0.1"}})
		_ = env.AddClientCredentialsApp("cc-app", "s3cr3t", sftest.User)
		c := env.Client(t, func(o *salesforce.Options) {
			o.AuthMode, o.ClientID, o.ClientSecret, o.PrivateKeyPEM, o.Username = salesforce.AuthClientCredentials, "cc-app", "s3cr3t", nil, ""
		})
		_, err := c.Session(context.Background())
		var ae *salesforce.AuthError
		if !errors.As(err, &ae) || ae.Code != "invalid_grant" || ae.Description != simsf.DescWrongDomain {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		env := sftest.Start(t, simsf.Options{})
		_ = env.AddClientCredentialsApp("cc-app", "s3cr3t", sftest.User)
		c := env.Client(t, func(o *salesforce.Options) {
			o.AuthMode, o.ClientID, o.ClientSecret, o.PrivateKeyPEM, o.Username = salesforce.AuthClientCredentials, "cc-app", "wrong", nil, ""
		})
		_, err := c.Session(context.Background())
		var ae *salesforce.AuthError
		if !errors.As(err, &ae) || ae.Code != "invalid_client" {
			t.Fatalf("err = %v", err)
		}
	})
}

// insertLoginHistory adds n LoginHistory rows, one second apart.
func insertLoginHistory(t *testing.T, org *simsf.Org, n int) {
	t.Helper()
	uid, _ := org.UserID(sftest.User)
	start := time.Now().Add(-time.Duration(n+60) * time.Second).UTC()
	recs := make([]simsf.Record, n)
	for i := range recs {
		recs[i] = simsf.Record{
			"UserId": uid, "LoginTime": start.Add(time.Duration(i) * time.Second), "LoginType": "Remote Access 2.0",
			"SourceIp": fmt.Sprintf("10.0.%d.%d", i/250, i%250), "Status": "Success", "Application": "sf2loki",
			"Browser": "Unknown", "Platform": "Unknown", "LoginUrl": "login.salesforce.com",
		}
	}
	if _, err := org.Insert("LoginHistory", recs...); err != nil {
		t.Fatal(err)
	}
}

// explicitSelect builds the describe-driven query sources use.
func explicitSelect(t *testing.T, c *salesforce.Client, object, orderBy string) string {
	t.Helper()
	d, err := c.Describe(context.Background(), object)
	if err != nil {
		t.Fatal(err)
	}
	fields := d.SelectableFields()
	for _, f := range fields {
		if err := salesforce.ValidateFieldPath(f); err != nil {
			t.Fatal(err)
		}
	}
	return "SELECT " + strings.Join(fields, ", ") + " FROM " + object + " ORDER BY " + orderBy
}

// TestSimTenThousandRowsCostFiveQueriesAndOneDescribe is the API budget
// acceptance item: an explicit field list gets 2000-row pages.
func TestSimTenThousandRowsCostFiveQueriesAndOneDescribe(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	insertLoginHistory(t, env.Org, 10000)
	c := env.Client(t)
	soql := explicitSelect(t, c, "LoginHistory", "LoginTime ASC, Id ASC")
	_ = explicitSelect(t, c, "LoginHistory", "LoginTime ASC, Id ASC") // cached: no second describe
	env.ResetCalls()
	_ = explicitSelect(t, c, "LoginHistory", "LoginTime ASC, Id ASC")
	if n := env.CallCount(simsf.KindDescribe); n != 0 {
		t.Fatalf("describe re-fetched %d times", n)
	}

	seen := map[string]bool{}
	var last time.Time
	for r, err := range c.Records(context.Background(), soql) {
		if err != nil {
			t.Fatal(err)
		}
		id, _ := r.String("Id")
		ts, ok := r.Time("LoginTime")
		if !ok || ts.Before(last) {
			t.Fatalf("row %s: LoginTime %v out of order", id, r["LoginTime"])
		}
		last = ts
		seen[id] = true
	}
	if len(seen) != 10000 {
		t.Fatalf("got %d distinct rows, want 10000", len(seen))
	}
	calls := env.Calls()
	if q := calls[simsf.KindQuery] + calls[simsf.KindQueryMore]; q != 5 || calls[simsf.KindQuery] != 1 {
		t.Fatalf("query calls = %v, want 1 query + 4 query_more", calls)
	}
	st := c.Stats()
	if st.Calls[salesforce.KindQuery] != 5 || st.Calls[salesforce.KindDescribe] != 1 {
		t.Fatalf("client stats = %v, want 5 query and 1 describe", st.Calls)
	}
}

func TestSimFieldsAllNeedsLimit200(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	insertLoginHistory(t, env.Org, 300)
	c := env.Client(t)
	for _, limit := range []int{201, 0} {
		q := "SELECT FIELDS(ALL) FROM LoginHistory ORDER BY LoginTime"
		if limit > 0 {
			q += fmt.Sprintf(" LIMIT %d", limit)
		}
		_, err := c.Query(context.Background(), q)
		var ae *salesforce.APIError
		if !errors.As(err, &ae) || ae.ErrorCode != salesforce.CodeMalformedQuery || errors.Is(err, salesforce.ErrUnavailable) {
			t.Fatalf("LIMIT %d: err = %v, want MALFORMED_QUERY", limit, err)
		}
	}
	p, err := c.Query(context.Background(), "SELECT FIELDS(ALL) FROM LoginHistory ORDER BY LoginTime LIMIT 200")
	if err != nil || len(p.Records) != 200 || !p.Done {
		t.Fatalf("LIMIT 200: %v records, done=%v, %v", len(p.Records), p != nil && p.Done, err)
	}
}

// TestSimSessionExpiresMidPagination: the session dies between pages; the
// client renews it with exactly one extra token request and loses no row.
func TestSimSessionExpiresMidPagination(t *testing.T) {
	for _, how := range []string{"fault before query_more", "org-wide expiry between pages"} {
		t.Run(how, func(t *testing.T) {
			env := sftest.Start(t, simsf.Options{})
			insertLoginHistory(t, env.Org, 5000)
			c := env.Client(t)
			soql := explicitSelect(t, c, "LoginHistory", "LoginTime ASC, Id ASC")
			tokensBefore := env.CallCount(simsf.KindToken)
			if how == "fault before query_more" {
				env.ExpireSessionBefore(simsf.KindQueryMore, 1)
			}
			rows, pages := 0, 0
			for p, err := range c.Pages(context.Background(), soql) {
				if err != nil {
					t.Fatal(err)
				}
				pages++
				rows += len(p.Records)
				if pages == 1 && how == "org-wide expiry between pages" {
					env.ExpireSessions()
				}
			}
			if rows != 5000 || pages != 3 {
				t.Fatalf("rows = %d in %d pages, want 5000 in 3", rows, pages)
			}
			if extra := env.CallCount(simsf.KindToken) - tokensBefore; extra != 1 {
				t.Fatalf("token requests during pagination = %d, want exactly 1", extra)
			}
			if n := env.CallCount(simsf.KindQueryMore); n != 3 {
				t.Fatalf("query_more calls = %d, want 3 (2 pages + 1 rejected)", n)
			}
			if st := c.Stats(); st.Reauths != 1 {
				t.Fatalf("Reauths = %d, want 1", st.Reauths)
			}
		})
	}
}

// TestSimEventLogFileStreamsWithFlatMemory lists a 200 MiB EventLogFile and
// downloads it, sampling the Go heap during the transfer.
func TestSimEventLogFileStreamsWithFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("200 MiB transfer")
	}
	env := sftest.Start(t, simsf.Options{DisableGzip: true})
	id, err := env.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", TargetBytes: 200 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(t)
	soql := "SELECT Id, EventType, LogFileLength FROM EventLogFile WHERE EventType = " + salesforce.QuoteString("API") +
		" AND Interval = 'Daily' ORDER BY CreatedDate, Id LIMIT 10"
	p, err := c.Query(context.Background(), soql)
	if err != nil || len(p.Records) != 1 {
		t.Fatalf("listing: %v, %v", p, err)
	}
	length, ok := p.Records[0].Int64("LogFileLength")
	if gotID, _ := p.Records[0].String("Id"); !ok || gotID != id || length < 190<<20 {
		t.Fatalf("listed %v", p.Records[0])
	}
	var n int64
	peak := heapPeak(func() {
		d, err := c.DownloadEventLogFile(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = d.Close() }()
		n, err = io.Copy(io.Discard, d)
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("downloaded %d MiB, peak heap growth %.1f MiB", n>>20, float64(peak)/(1<<20))
	if n != length {
		t.Fatalf("downloaded %d bytes, LogFileLength %d", n, length)
	}
	if peak > 32<<20 {
		t.Fatalf("heap grew by %d MiB while streaming %d MiB: not streamed", peak>>20, n>>20)
	}
	if got := env.CallCount(simsf.KindDownload); got != 1 {
		t.Fatalf("downloads = %d, want 1", got)
	}
}

func heapPeak(f func()) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak.Load()
}

// TestSimEventLogFileGzipMatchesContent: the gzip download decompresses to
// exactly the org's CSV, which parses with embedded newlines intact.
func TestSimEventLogFileGzipMatchesContent(t *testing.T) {
	for _, gz := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			env := sftest.Start(t, simsf.Options{DisableGzip: !gz})
			id, err := env.AddEventLogFile(simsf.EventLogFileSpec{EventType: "Report", Rows: 5000})
			if err != nil {
				t.Fatal(err)
			}
			want := sha256.New()
			if err := env.EventLogFileContent(id, want); err != nil {
				t.Fatal(err)
			}
			c := env.Client(t)
			d, err := c.DownloadEventLogFile(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Close() }()
			if d.Compressed != gz {
				t.Errorf("Compressed = %v, want %v", d.Compressed, gz)
			}
			got := sha256.New()
			rows := 0
			r := csv.NewReader(io.TeeReader(d, got))
			r.FieldsPerRecord = -1
			for {
				_, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				rows++
			}
			if string(got.Sum(nil)) != string(want.Sum(nil)) {
				t.Fatal("downloaded bytes differ from the org's content")
			}
			if rows != 5001 {
				t.Fatalf("rows = %d, want 5000 + header", rows)
			}
			if off, ok := c.ServerClockOffset(); !ok || off > time.Minute || off < -time.Minute {
				t.Errorf("ServerClockOffset = %s, %v", off, ok)
			}
		})
	}
}

func TestSimDownloadResetIsUnavailable(t *testing.T) {
	env := sftest.Start(t, simsf.Options{DisableGzip: true})
	id, err := env.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Rows: 20000})
	if err != nil {
		t.Fatal(err)
	}
	env.ResetDownloadsAfter(10000, 1)
	c := env.Client(t)
	d, err := c.DownloadEventLogFile(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, d)
	_ = d.Close()
	if !errors.Is(err, salesforce.ErrUnavailable) || n < 10000 {
		t.Fatalf("read %d bytes, err = %v; want ErrUnavailable after >= 10000", n, err)
	}
	// The caller downloads again (one more API call) and gets it whole.
	d, err = c.DownloadEventLogFile(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	if _, err := io.Copy(io.Discard, d); err != nil {
		t.Fatal(err)
	}
	if got := env.CallCount(simsf.KindDownload); got != 2 {
		t.Fatalf("downloads = %d, want 2", got)
	}
}

// TestSimPolicy drives each retry rule through the org's fault switches and
// checks the outcome and the number of requests the org saw.
func TestSimPolicy(t *testing.T) {
	tests := []struct {
		name      string
		fault     func(*simsf.Org)
		wantErr   error // nil = success
		wantCalls int   // query requests the org answered
	}{
		{"503 twice then ok", func(o *simsf.Org) { o.FailNext(simsf.KindQuery, 2, 503) }, nil, 3},
		{"502 html always", func(o *simsf.Org) { o.FailNext(simsf.KindQuery, -1, 502) }, salesforce.ErrUnavailable, 4},
		{"html on 200 once", func(o *simsf.Org) { o.HTMLNext(simsf.KindQuery, 1) }, nil, 2},
		{"html on 200 always", func(o *simsf.Org) { o.HTMLNext(simsf.KindQuery, -1) }, salesforce.ErrBadResponse, 4},
		{"request limit", func(o *simsf.Org) { o.SetRequestLimitExceeded(true) }, salesforce.ErrRequestLimit, 1},
		{"daily limit used up", func(o *simsf.Org) { o.SetDailyAPILimit(10); o.SetAPIUsage(10) }, salesforce.ErrRequestLimit, 1},
		{"daily limit fault", func(o *simsf.Org) { o.RequestLimitNext(simsf.KindQuery, 1, simsf.LimitTotalRequests) }, salesforce.ErrRequestLimit, 1},
		{"concurrent limit twice then ok", func(o *simsf.Org) { o.RequestLimitNext(simsf.KindQuery, 2, simsf.LimitConcurrentRequests) }, nil, 3},
		{"concurrent limit always", func(o *simsf.Org) { o.RequestLimitNext(simsf.KindQuery, -1, simsf.LimitConcurrentLongTxn) }, salesforce.ErrConcurrentLimit, 4},
		{"401 once", func(o *simsf.Org) { o.FailNext(simsf.KindQuery, 1, 401) }, nil, 2},
		{"session expired", func(o *simsf.Org) { o.ExpireSessionBefore(simsf.KindQuery, 1) }, nil, 2},
		{"401 always", func(o *simsf.Org) { o.FailNext(simsf.KindQuery, -1, 401) }, salesforce.ErrAuth, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := sftest.Start(t, simsf.Options{})
			insertLoginHistory(t, env.Org, 3)
			c := env.Client(t)
			if _, err := c.Session(context.Background()); err != nil {
				t.Fatal(err)
			}
			tt.fault(env.Org)
			p, err := c.Query(context.Background(), "SELECT Id FROM LoginHistory")
			if tt.wantErr == nil {
				if err != nil || len(p.Records) != 3 {
					t.Fatalf("Query = %v, %v", p, err)
				}
			} else if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if n := env.CallCount(simsf.KindQuery); n != tt.wantCalls {
				t.Fatalf("org saw %d queries, want %d", n, tt.wantCalls)
			}
		})
	}
}

// TestSimConcurrentLimitIsBoundedByTheDeadline: under a context deadline a concurrent-request
// limit is retried past MaxAttempts for as long as the deadline leaves time for the next wait, and
// given up at once when it does not; the daily limit is never retried.
func TestSimConcurrentLimitIsBoundedByTheDeadline(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	insertLoginHistory(t, env.Org, 3)
	c := env.Client(t, func(o *salesforce.Options) {
		o.MaxAttempts, o.RetryWaitMin, o.RetryWaitMax = 4, time.Millisecond, time.Millisecond
	})
	if _, err := c.Session(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env.RequestLimitNext(simsf.KindQuery, 10, simsf.LimitConcurrentRequests)
	if p, err := c.Query(ctx, "SELECT Id FROM LoginHistory"); err != nil || len(p.Records) != 3 {
		t.Fatalf("after 10 concurrent-limit answers within the deadline: %v, %v", p, err)
	}
	if n := env.CallCount(simsf.KindQuery); n != 11 {
		t.Fatalf("org saw %d queries, want 11", n)
	}

	slow := env.Client(t, func(o *salesforce.Options) { o.RetryWaitMin, o.RetryWaitMax = time.Hour, time.Hour })
	env.ResetCalls()
	env.RequestLimitNext(simsf.KindQuery, -1, simsf.LimitConcurrentRequests)
	_, err := slow.Query(ctx, "SELECT Id FROM LoginHistory")
	if !errors.Is(err, salesforce.ErrConcurrentLimit) || !errors.Is(err, salesforce.ErrUnavailable) || errors.Is(err, salesforce.ErrRequestLimit) {
		t.Fatalf("a wait past the deadline: %v, want ErrConcurrentLimit and ErrUnavailable", err)
	}
	if n := env.CallCount(simsf.KindQuery); n != 1 {
		t.Fatalf("org saw %d queries, want 1: the next wait does not fit before the deadline", n)
	}
}

func TestSimSlowResponsesHitTheTimeout(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	c := env.Client(t, func(o *salesforce.Options) { o.HTTPTimeout = 50 * time.Millisecond; o.MaxAttempts = 2 })
	if _, err := c.Session(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.SetLatency(2 * time.Second)
	_, err := c.Limits(context.Background())
	if !errors.Is(err, salesforce.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := env.CallCount(simsf.KindLimits); n != 2 {
		t.Fatalf("limits calls = %d, want 2", n)
	}
}

// TestSimQueryErrors: the org's SOQL error answers reach callers as typed
// errors that are never retried.
func TestSimQueryErrors(t *testing.T) {
	tests := []struct {
		name    string
		soql    string
		tooling bool
		code    string
		is      error
	}{
		{"+0000 literal", "SELECT Id FROM LoginHistory WHERE LoginTime > 2026-06-30T01:00:00.000+0000", false, salesforce.CodeMalformedQuery, nil},
		{"unknown field", "SELECT Id, Nope__c FROM LoginHistory", false, salesforce.CodeInvalidField, nil},
		{"unknown object", "SELECT Id FROM Nope__c", false, salesforce.CodeInvalidType, nil},
		{"big object ascending", "SELECT EventIdentifier FROM LoginEvent ORDER BY EventDate ASC LIMIT 10", false, salesforce.CodeBigObjectUnsupported, nil},
		{"tooling object on data api", "SELECT Id FROM TraceFlag", false, salesforce.CodeInvalidType, nil},
		{"url too long", "SELECT Id FROM LoginHistory WHERE Id NOT IN " + salesforce.QuoteStrings(manyIDs(1200)), false, "", salesforce.ErrURITooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := sftest.Start(t, simsf.Options{})
			c := env.Client(t)
			var err error
			if tt.tooling {
				_, err = c.ToolingQuery(context.Background(), tt.soql)
			} else {
				_, err = c.Query(context.Background(), tt.soql)
			}
			var ae *salesforce.APIError
			if !errors.As(err, &ae) || ae.ErrorCode != tt.code || errors.Is(err, salesforce.ErrUnavailable) {
				t.Fatalf("err = %v, want APIError %q", err, tt.code)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
			if n := c.Stats().Calls[salesforce.KindQuery]; n != 1 {
				t.Fatalf("query attempts = %d, want 1", n)
			}
		})
	}
}

func manyIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("0Ya%015d", i)
	}
	return out
}

func TestSimPermissions(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	env.AddUser("limited@example.com", simsf.Permissions{APIEnabled: true})
	_ = env.AddJWTApp(sftest.ClientID, sftest.Key().Certificate, sftest.User, "limited@example.com")
	c := env.Client(t, func(o *salesforce.Options) { o.Username = "limited@example.com" })
	_, err := c.Query(context.Background(), "SELECT Id FROM EventLogFile LIMIT 1")
	var ae *salesforce.APIError
	if !errors.As(err, &ae) || errors.Is(err, salesforce.ErrRequestLimit) || errors.Is(err, salesforce.ErrUnavailable) {
		t.Fatalf("err = %v, want a plain permission APIError", err)
	}
	if ae.StatusCode != http.StatusBadRequest && ae.StatusCode != http.StatusForbidden {
		t.Fatalf("status = %d", ae.StatusCode)
	}
	t.Logf("missing permission: %v", err)
}

func TestSimDescribeGlobalLimitsAndUsage(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	env.SetDailyAPILimit(15000)
	env.SetAPIUsage(1000)
	c := env.Client(t)
	g, err := c.DescribeGlobal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]salesforce.SObjectInfo{}
	for _, s := range g.SObjects {
		names[s.Name] = s
	}
	for _, want := range []string{"EventLogFile", "LoginHistory", "LoginEvent", "Audit_Event__c"} {
		if !names[want].Queryable {
			t.Errorf("describeGlobal: %s missing or not queryable", want)
		}
	}
	lim, err := c.Limits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	used, limit := env.APIUsage()
	if l := lim["DailyApiRequests"]; l.Max != int64(limit) || l.Remaining != int64(limit-used) {
		t.Errorf("DailyApiRequests = %+v, org says used %d of %d", l, used, limit)
	}
	u, ok := c.APIUsage()
	if !ok || u.Limit != 15000 || u.Used != int64(used) {
		t.Errorf("APIUsage = %+v, %v; org says %d/%d", u, ok, used, limit)
	}
	d, err := c.Describe(context.Background(), "EventLogFile")
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := d.Field("LogFile"); !ok || f.Type != "base64" {
		t.Errorf("LogFile field = %+v", f)
	}
	for _, f := range d.SelectableFields() {
		if f == "LogFile" {
			t.Error("SelectableFields includes the LogFile blob")
		}
	}
}

func TestSimApexLog(t *testing.T) {
	env := sftest.Start(t, simsf.Options{})
	uid, _ := env.UserID(sftest.User)
	for i := range 3 {
		_, err := env.AddApexLog(simsf.ApexLogSpec{LogUser: uid, StartTime: time.Now().Add(-time.Duration(10-i) * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
	}
	c := env.Client(t)
	soql := "SELECT Id, LogUser.Username, LogLength, StartTime FROM ApexLog WHERE LogUser.Username IN " +
		salesforce.QuoteStrings([]string{sftest.User}) + " ORDER BY StartTime ASC, Id ASC LIMIT 200"
	var got []salesforce.Record
	for r, err := range c.ToolingRecords(context.Background(), soql) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 3 {
		t.Fatalf("rows = %d", len(got))
	}
	if u, _ := got[0].String("LogUser.Username"); u != sftest.User {
		t.Errorf("LogUser.Username = %q; record %v", u, got[0])
	}
	if flat := got[0].Flatten(); flat["LogUser.Username"] != sftest.User {
		t.Errorf("Flatten = %v", flat)
	}
	length, _ := got[0].Int64("LogLength")
	id, _ := got[0].String("Id")
	d, err := c.DownloadApexLog(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(d)
	_ = d.Close()
	if err != nil || int64(len(body)) != length {
		t.Fatalf("body %d bytes (LogLength %d), %v", len(body), length, err)
	}
	if length > 10 {
		d, err := c.DownloadApexLog(context.Background(), id, 10)
		if err == nil {
			_, err = io.ReadAll(d)
			_ = d.Close()
		}
		if !errors.Is(err, salesforce.ErrBodyTooLarge) {
			t.Fatalf("capped download: %v, want ErrBodyTooLarge", err)
		}
	}
	if st := c.Stats(); st.Calls[salesforce.KindToolingQuery] != 1 || st.Calls[salesforce.KindApexLogBody] < 1 {
		t.Errorf("stats = %v", st.Calls)
	}
}
