// Package sftest starts a simulated Salesforce org (package internal/sim/salesforce) for tests
// and builds clients of it (package salesforce): the org, an integration user with every
// permission pre-authorized on a JWT app, a loopback server, and a settable clock — the setup
// shared by the tests of the client and of the sources. The simulator does not import the
// client; this package joins the two for tests only.
package sftest

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
)

const (
	// User is the org's integration user: every permission, pre-authorized on the JWT app.
	User = "integration@example.com"
	// ClientID is the consumer key of the org's JWT app.
	ClientID = "3MVG9-sftest-client"
)

// Key returns the key pair of the JWT app, generated once per test binary.
func Key() *simsf.KeyPair { return key() }

var key = sync.OnceValue(func() *simsf.KeyPair {
	kp, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		panic(err)
	}
	return kp
})

// Org is a simulated org served on a loopback port.
type Org struct {
	*simsf.Org
	// URL is the org's login and instance URL, e.g. "http://127.0.0.1:41234".
	URL string

	now func() time.Time
}

// Start creates an org with opts, adds User with every permission, registers the JWT app
// ClientID for Key() with User pre-authorized, and serves the org until the test ends. A zero
// opts.Seed becomes 7; a nil opts.Logger discards the org's log.
func Start(t testing.TB, opts simsf.Options) *Org {
	t.Helper()
	if opts.Seed == 0 {
		opts.Seed = 7
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	org := simsf.New(opts)
	org.AddUser(User, simsf.AllPermissions())
	if err := org.AddJWTApp(ClientID, Key().Certificate, User); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &Org{Org: org, URL: srv.URL, now: opts.Now}
}

// Client returns a new client of the org logging in as User with Key(). It reads the org's
// clock (opts.Now of Start), waits 1 to 5 ms between retries and discards its log; mods adjust
// the options before the client is built.
func (o *Org) Client(t testing.TB, mods ...func(*salesforce.Options)) *salesforce.Client {
	t.Helper()
	opts := salesforce.Options{
		LoginURL:      o.URL,
		ClientID:      ClientID,
		Username:      User,
		PrivateKeyPEM: Key().KeyPEM,
		RetryWaitMin:  time.Millisecond,
		RetryWaitMax:  5 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
		Now:           o.now,
	}
	for _, m := range mods {
		m(&opts)
	}
	c, err := salesforce.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Clock is a settable wall clock to share between the org, its clients and the code under test.
// It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
