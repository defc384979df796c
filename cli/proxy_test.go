package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/salesforce"
)

// countingProxy is a forward HTTP proxy that counts the requests it carries per target host
// (host:port) and checks Proxy-Authorization when auth is set. CONNECT (https targets) is
// counted and refused: the tests' servers speak plain http on loopback.
type countingProxy struct {
	auth string // "user:password", or "" for none

	mu     sync.Mutex
	hosts  map[string]int
	denied int
}

func (p *countingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.auth != "" && r.Header.Get("Proxy-Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte(p.auth)) {
		p.mu.Lock()
		p.denied++
		p.mu.Unlock()
		http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	host := r.URL.Host
	if r.Method == http.MethodConnect {
		host = r.Host
	}
	p.mu.Lock()
	p.hosts[host]++
	p.mu.Unlock()
	if r.Method == http.MethodConnect {
		http.Error(w, "no tunnels here", http.StatusForbidden)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	resp, err := (&http.Transport{}).RoundTrip(out) // direct: no proxy of its own
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *countingProxy) count(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hosts[host]
}

func startProxy(t *testing.T, auth string) (*countingProxy, *url.URL) {
	t.Helper()
	p := &countingProxy{auth: auth, hosts: map[string]int{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return p, u
}

func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestProxyCarriesSalesforceAndLokiTraffic: with http.proxy set (credentials included), every
// Salesforce and Loki request of a run goes through the proxy, authenticated, and the proxy's
// password never reaches the process log; with the Loki host in no_proxy, Loki is reached
// directly while Salesforce still goes through the proxy.
func TestProxyCarriesSalesforceAndLokiTraffic(t *testing.T) {
	w := newSimWorld(t, 21)
	now := time.Now().UTC()
	if _, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Interval: simsf.IntervalHourly,
		LogDate: now.Add(-2 * time.Hour).Truncate(time.Hour), CreatedDate: now.Add(-30 * time.Minute), Rows: 40}); err != nil {
		t.Fatal(err)
	}
	const password = "pr0xy-pa55word-not-for-logs"
	proxy, pu := startProxy(t, "sf2loki:"+password)
	sources := "  eventlogfile:\n    enabled: true\n    interval: Hourly\n    event_types: [API]\n    lookback: 6h\n"
	proxyURL := "http://sf2loki:" + password + "@" + pu.Host
	sfHost, lokiHost := hostOf(t, w.sfURL), hostOf(t, w.receiver.URL)

	w.logLevel = "debug" // the most lines that could leak the password
	cfgPath := w.config(t, "", sources, "http:\n  proxy: "+proxyURL+"\n")
	rep, stderr := runOnce(t, cfgPath)
	if rep.Outcome != job.OutcomeOK || rep.Records != 40 || w.receiver.Count() != 40 {
		t.Fatalf("run through the proxy: outcome %s, %d records, receiver %d: %s", rep.Outcome, rep.Records, w.receiver.Count(), rep.Error)
	}
	sfCalls := w.org.TotalCalls()
	if got := proxy.count(sfHost); got != sfCalls || got == 0 {
		t.Errorf("proxy carried %d Salesforce requests, the org answered %d: every one must go through the proxy", got, sfCalls)
	}
	if got, pushes := proxy.count(lokiHost), len(w.receiver.Requests()); got != pushes || got == 0 {
		t.Errorf("proxy carried %d Loki requests, the receiver got %d: every one must go through the proxy", got, pushes)
	}
	if proxy.denied != 0 {
		t.Errorf("%d requests reached the proxy without its credentials", proxy.denied)
	}
	if strings.Contains(stderr, password) {
		t.Errorf("the proxy password leaked into the log:\n%s", stderr)
	}

	// no_proxy: the receiver's host:port is reached directly.
	w.receiver.Reset()
	w.org.ResetCalls()
	before := proxy.count(lokiHost)
	if _, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Interval: simsf.IntervalHourly,
		LogDate: now.Add(-time.Hour).Truncate(time.Hour), CreatedDate: now.Add(-20 * time.Minute), Rows: 10}); err != nil {
		t.Fatal(err)
	}
	cfgPath = w.config(t, "", sources, "http:\n  proxy: "+proxyURL+"\n  no_proxy: ["+lokiHost+"]\n")
	rep, _ = runOnce(t, cfgPath)
	if rep.Outcome != job.OutcomeOK || rep.Records != 10 {
		t.Fatalf("second run: outcome %s, %d records: %s", rep.Outcome, rep.Records, rep.Error)
	}
	if got := proxy.count(lokiHost) - before; got != 0 {
		t.Errorf("%d Loki requests went through the proxy although no_proxy lists %s", got, lokiHost)
	}
	if len(w.receiver.Requests()) == 0 {
		t.Error("the receiver got no push")
	}
	if w.org.TotalCalls() == 0 || proxy.count(sfHost) < sfCalls+w.org.TotalCalls() {
		t.Errorf("Salesforce requests of the second run bypassed the proxy: %d through it in total, %d + %d answered", proxy.count(sfHost), sfCalls, w.org.TotalCalls())
	}
}

// TestSandboxEnvironmentUsesTheSandboxLoginHost: environment sandbox without login_url makes
// the client authenticate at test.salesforce.com (the proxy sees the tunnel asked for it), and
// production at login.salesforce.com.
func TestSandboxEnvironmentUsesTheSandboxLoginHost(t *testing.T) {
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[config.Environment]string{
		config.EnvironmentSandbox: "test.salesforce.com:443", config.EnvironmentProduction: "login.salesforce.com:443", "": "login.salesforce.com:443",
	} {
		proxy, pu := startProxy(t, "")
		sf := config.Salesforce{Environment: env, ClientID: "cid", Username: "u@example.com", PrivateKey: config.Secret(keys.KeyPEM)}
		config.ApplyDefaults(&sf)
		sf.Environment = env
		opts := salesforceOptions(sf, config.HTTP{Proxy: config.Secret(pu.String())}, slog.New(slog.DiscardHandler))
		opts.MaxAttempts = 1
		client, err := salesforce.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = client.OrgID(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%q: authenticated through a proxy that refuses every tunnel", env)
		}
		if proxy.count(want) == 0 {
			t.Errorf("environment %q: no request to %s; the proxy saw %v", env, want, proxy.hosts)
		}
	}
}

// TestProxyCarriesStoreTraffic: with http.proxy set, the S3 store's requests (a real S3 server,
// versitygw) and the GCS store's go through the proxy too.
func TestProxyCarriesStoreTraffic(t *testing.T) {
	w := newSimWorld(t, 22)
	proxy, pu := startProxy(t, "")
	s3 := testenv.StartVersitygw(t)
	bucket := s3.NewBucket(t)
	sources := "  soql:\n    enabled: true\n    objects:\n      - name: SetupAuditTrail\n"
	if _, err := w.org.Insert("SetupAuditTrail", simsf.Record{"CreatedDate": time.Now().Add(-time.Minute), "Action": "PermSetAssign"}); err != nil {
		t.Fatal(err)
	}
	cfgPath := w.config(t, "", sources, fmt.Sprintf(`http:
  proxy: %s
`, pu.String()))
	// The fixture's state section is the file store; this run's is S3, by environment override.
	t.Setenv("SF2LOKI_STATE__STORE", "s3")
	t.Setenv("SF2LOKI_STATE__S3__BUCKET", bucket)
	t.Setenv("SF2LOKI_STATE__S3__ENDPOINT", s3.Endpoint)
	t.Setenv("SF2LOKI_STATE__S3__PATH_STYLE", "true")
	t.Setenv("SF2LOKI_STATE__S3__REGION", s3.Region)
	t.Setenv("SF2LOKI_STATE__S3__ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("SF2LOKI_STATE__S3__SECRET_ACCESS_KEY", s3.SecretKey)
	rep, stderr := runOnce(t, cfgPath)
	if rep.Outcome != job.OutcomeOK || rep.Records != 1 {
		t.Fatalf("run with the S3 store through the proxy: %s, %d records: %s\n%s", rep.Outcome, rep.Records, rep.Error, stderr)
	}
	if got := proxy.count(hostOf(t, s3.Endpoint)); got == 0 {
		t.Errorf("no S3 request went through the proxy; it saw %v", proxy.hosts)
	}

	const gcsHost = "gcs.sf2loki.invalid:4443"
	t.Setenv("SF2LOKI_STATE__STORE", "gcs")
	t.Setenv("SF2LOKI_STATE__GCS__BUCKET", "b")
	t.Setenv("SF2LOKI_STATE__GCS__ENDPOINT", "http://"+gcsHost)
	rep, _ = runOnce(t, cfgPath)
	if rep.Outcome == job.OutcomeOK {
		t.Fatalf("a GCS endpoint that does not exist answered")
	}
	if got := proxy.count(gcsHost); got == 0 {
		t.Errorf("the GCS store's request did not go through the proxy; it saw %v", proxy.hosts)
	}
}
