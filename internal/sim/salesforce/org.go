package salesforce

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BigObjectMode selects how strictly the unverified Big Object SOQL rules
// are enforced.
type BigObjectMode int

const (
	// BigObjectStrict enforces the documented rules: filters only on
	// EventDate / EventIdentifier with = < <= > >=, EventIdentifier only
	// after an EventDate equality, ORDER BY EventDate DESC only.
	BigObjectStrict BigObjectMode = iota
	// BigObjectPermissive reproduces what the Python original assumed: any
	// filter (including Id NOT IN and !=) and extra ORDER BY keys after
	// EventDate DESC. ASC order and aggregates stay rejected (verified live).
	BigObjectPermissive
)

// Defaults used when the corresponding Options field is zero.
const (
	DefaultAPIVersion         = "62.0"
	DefaultSessionLifetime    = 2 * time.Hour
	DefaultMaxURLLength       = 16384
	DefaultBatchSize          = 2000
	MinBatchSize              = 200
	MaxBatchSize              = 2000
	DefaultBigObjectMaxRows   = 200
	DefaultLocatorIdleTimeout = 15 * time.Minute
	DefaultMaxOpenLocators    = 10
	DefaultDailyAPILimit      = 100000
	DefaultJWTMaxLifetime     = 3 * time.Minute
	DefaultJWTClockSkew       = 30 * time.Second
	// FieldsFunctionMaxLimit is the largest LIMIT allowed with FIELDS(ALL) / FIELDS(CUSTOM).
	FieldsFunctionMaxLimit = 200
)

// Options configures an Org. The zero value of every field means its default.
type Options struct {
	// Now is the org's clock (nil = time.Now). Sessions, visibility delays,
	// the Date header and generated data are all anchored to it.
	Now func() time.Time
	// Seed makes ids, tokens and generated data deterministic.
	Seed int64
	// APIVersion is the newest REST version served (default "62.0"; a
	// leading "v" is accepted). Paths with versions 20.0 up to it are served.
	APIVersion string
	// BaseURL is the org's URL (instance_url, JWT audience, identity URLs).
	// Empty: derived from each request's scheme and Host header.
	BaseURL string
	// OrgID is the 18-character org id (empty: derived from Seed).
	OrgID string
	// GenericLoginHosts are host names (without port) standing for
	// login.salesforce.com / test.salesforce.com, where the client
	// credentials flow is refused. Nil: those two names.
	GenericLoginHosts []string
	// AcceptedAudiences are JWT aud values accepted besides the org's URL.
	AcceptedAudiences []string
	// JWTMaxLifetime bounds how far in the future a JWT exp may be (default 3m).
	JWTMaxLifetime time.Duration
	// JWTClockSkew is the tolerance on exp in both directions (default 30s).
	JWTClockSkew time.Duration
	// SessionLifetime is the sliding inactivity timeout of access tokens
	// (default 2h, Salesforce's default session timeout).
	SessionLifetime time.Duration
	// MaxURLLength is the longest request URI (path + query) answered;
	// longer ones get 414 (default 16384).
	MaxURLLength int
	// DefaultBatchSize is the page size when no Sforce-Query-Options
	// batchSize is sent (default 2000).
	DefaultBatchSize int
	// BigObjectMode selects strict (default) or permissive Big Object rules.
	BigObjectMode BigObjectMode
	// BigObjectRealIDs gives Big Object rows (LoginEvent, ApiEvent) their own
	// Id in query results. By default they carry the empty id
	// 000000000000000AAA, and attributes.url is built from it, as real orgs
	// answer: a Big Object row is identified by its index fields
	// (EventDate, EventIdentifier), not by Id.
	BigObjectRealIDs bool
	// BigObjectMaxRows caps the rows one Big Object query returns (default 200).
	BigObjectMaxRows int
	// BigObjectEmptyIDs makes Big Object rows report Id 000000000000000AAA
	// (documented for custom big objects) instead of a real id.
	BigObjectEmptyIDs bool
	// LocatorIdleTimeout expires query locators not used for this long
	// (default 15m) with INVALID_QUERY_LOCATOR.
	LocatorIdleTimeout time.Duration
	// MaxOpenLocators is the number of open query cursors per user; opening
	// one more releases the oldest (default 10; negative = unlimited).
	MaxOpenLocators int
	// DailyAPILimit is DailyApiRequests.Max (default 100000).
	DailyAPILimit int
	// DisableGzip ignores Accept-Encoding: gzip on downloads.
	DisableGzip bool
	// GzipLevel is the compress/gzip level of gzip-encoded downloads. The
	// default 0 (gzip.NoCompression) still sends a real gzip stream (stored
	// blocks, so clients exercise their gzip path) at memory speed; set
	// gzip.BestSpeed (1) for realistic sizes — stdlib compression runs at
	// only tens of MB/s, which would dominate benchmarks.
	GzipLevel int
	// Logger receives debug logs of requests (nil = slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.APIVersion = strings.TrimPrefix(o.APIVersion, "v")
	if o.APIVersion == "" {
		o.APIVersion = DefaultAPIVersion
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	if o.GenericLoginHosts == nil {
		o.GenericLoginHosts = []string{"login.salesforce.com", "test.salesforce.com"}
	}
	if o.JWTMaxLifetime <= 0 {
		o.JWTMaxLifetime = DefaultJWTMaxLifetime
	}
	if o.JWTClockSkew <= 0 {
		o.JWTClockSkew = DefaultJWTClockSkew
	}
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = DefaultSessionLifetime
	}
	if o.MaxURLLength <= 0 {
		o.MaxURLLength = DefaultMaxURLLength
	}
	if o.DefaultBatchSize <= 0 {
		o.DefaultBatchSize = DefaultBatchSize
	}
	if o.BigObjectMaxRows <= 0 {
		o.BigObjectMaxRows = DefaultBigObjectMaxRows
	}
	if o.LocatorIdleTimeout <= 0 {
		o.LocatorIdleTimeout = DefaultLocatorIdleTimeout
	}
	if o.MaxOpenLocators == 0 {
		o.MaxOpenLocators = DefaultMaxOpenLocators
	}
	if o.DailyAPILimit <= 0 {
		o.DailyAPILimit = DefaultDailyAPILimit
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Errors returned by the Org's Go API (not by its HTTP API).
var (
	ErrUnknownObject = errors.New("simsf: unknown object")
	ErrUnknownField  = errors.New("simsf: unknown field")
	ErrUnknownUser   = errors.New("simsf: unknown user")
	ErrNotFound      = errors.New("simsf: record not found")
	ErrInvalidValue  = errors.New("simsf: invalid value")
)

// Org is a simulated Salesforce org. All methods are safe for concurrent use,
// including while it serves requests.
type Org struct {
	opts   Options
	orgID  string
	secret []byte
	apiVer float64

	mu          sync.RWMutex // data: objects, records, locators, schedules
	objects     map[string]*object
	objectOrder []*object
	byID        map[string]*record // key: 15-character id
	scheduled   []scheduledChange  // sorted by at
	locators    map[string]*locator
	locSeq      uint64

	authMu   sync.Mutex
	users    map[string]*user // key: lower-case username
	apps     map[string]*ConnectedApp
	sessions map[string]*session
	tokenSeq uint64

	statMu        sync.Mutex
	calls         map[CallKind]int
	apiUsed       int
	apiMax        int
	limitExceeded bool
	latency       time.Duration
	latencyMax    time.Duration // latency is the least, latencyMax the most (uniform)
	latencyRand   *rand.Rand
	faults        []*Fault

	inflight    int // REST requests being answered
	inflightMax int // the most seen at once
	concLimit   int // more at once answer REQUEST_LIMIT_EXCEEDED (0 = no limit)
}

// New returns an empty org (schema only, no users, no records).
func New(opts Options) *Org {
	opts = opts.withDefaults()
	o := &Org{
		opts:     opts,
		objects:  map[string]*object{},
		byID:     map[string]*record{},
		locators: map[string]*locator{},
		users:    map[string]*user{},
		apps:     map[string]*ConnectedApp{},
		sessions: map[string]*session{},
		calls:    map[CallKind]int{},
		apiMax:   opts.DailyAPILimit,
	}
	o.apiVer, _ = strconv.ParseFloat(opts.APIVersion, 64)
	if o.apiVer == 0 {
		o.apiVer = 62
	}
	o.orgID = opts.OrgID
	if id, ok := normalizeID(o.orgID); ok {
		o.orgID = id
	} else {
		o.orgID = makeID("00D", splitmix64(uint64(opts.Seed))%839299365868340224)
	}
	o.secret = []byte(fmt.Sprintf("simsf-%d-%s", opts.Seed, o.orgID))
	for i := range standardObjects {
		obj := newObject(&standardObjects[i])
		o.objects[strings.ToLower(obj.name)] = obj
		o.objectOrder = append(o.objectOrder, obj)
	}
	return o
}

// OrgID returns the org's 18-character id.
func (o *Org) OrgID() string { return o.orgID }

// APIVersion returns the newest API version served, e.g. "62.0".
func (o *Org) APIVersion() string { return o.opts.APIVersion }

func (o *Org) now() time.Time { return o.opts.Now() }

// Handler returns the org's HTTP API.
func (o *Org) Handler() http.Handler { return http.HandlerFunc(o.serveHTTP) }

// Server is a running org listener (see Org.Start).
type Server struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234" (the org's login and
	// instance URL).
	URL string
	srv *http.Server
}

// Close stops the listener and closes open connections.
func (s *Server) Close() error { return s.srv.Close() }

// Start serves the org on a random loopback port until Close. It works
// outside tests (sf2loki demo runs the org in process this way).
func (o *Org) Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simsf: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: o.Handler(), ReadHeaderTimeout: time.Minute}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// ListenAndServe serves the org on addr until ctx is done.
func (o *Org) ListenAndServe(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: o.Handler(), ReadHeaderTimeout: time.Minute}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	err := srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Permissions is a user's access model.
type Permissions struct {
	// APIEnabled: without it every REST call answers 403 API_DISABLED_FOR_ORG.
	APIEnabled bool
	// ViewAllData grants read on every object except the Real-Time Event
	// Monitoring ones.
	ViewAllData bool
	// ViewEventLogFiles grants EventLogFile (listing and downloads).
	ViewEventLogFiles bool
	// ViewRealTimeEventMonitoring grants LoginEvent, ApiEvent, the *EventStore
	// objects and the RTEM streams.
	ViewRealTimeEventMonitoring bool
	// ViewSetup grants SetupAuditTrail.
	ViewSetup bool
	// Objects grants read access on individual objects (e.g. "LoginHistory",
	// "Audit_Event__c", "ApexLog") for users without ViewAllData.
	Objects []string
	// Topics grants Pub/Sub subscribe access to these topic names
	// (e.g. "/event/LoginEventStream"); used by the Pub/Sub API.
	Topics []string
	// HiddenFields are fields the user's field-level security hides, as
	// "Object.Field" (e.g. "Audit_Event__c.Source_Ip__c"; case-insensitive).
	// Salesforce leaves them out of describe and of FIELDS(), and a query
	// naming one answers INVALID_FIELD "No such column", as for a field that
	// does not exist. Id cannot be hidden.
	HiddenFields []string
}

// AllPermissions returns a permission set that can read everything.
func AllPermissions() Permissions {
	return Permissions{APIEnabled: true, ViewAllData: true, ViewEventLogFiles: true,
		ViewRealTimeEventMonitoring: true, ViewSetup: true, Topics: []string{"*"}}
}

func (p Permissions) canRead(obj *object) bool {
	switch obj.def.Gate {
	case gateAlways:
		return true
	case gateELF:
		return p.ViewEventLogFiles || p.ViewAllData
	case gateRTEM:
		return p.ViewRealTimeEventMonitoring
	case gateSetup:
		return p.ViewSetup || p.ViewAllData
	}
	if p.ViewAllData {
		return true
	}
	for _, n := range p.Objects {
		if strings.EqualFold(n, obj.name) {
			return true
		}
	}
	return false
}

// canSee reports whether field-level security lets the user read f of obj.
func (p Permissions) canSee(obj *object, f *fieldDef) bool {
	if f.Name == "Id" {
		return true
	}
	for _, h := range p.HiddenFields {
		o, name, ok := strings.Cut(h, ".")
		if ok && strings.EqualFold(o, obj.name) && strings.EqualFold(name, f.Name) {
			return false
		}
	}
	return true
}

// CanSubscribe reports whether the permissions grant a Pub/Sub topic.
func (p Permissions) CanSubscribe(topic string) bool {
	for _, t := range p.Topics {
		if t == "*" || t == topic {
			return true
		}
	}
	return false
}

type user struct {
	id       string
	username string
	perms    Permissions
	active   bool
}

// AddUser adds a user (or replaces the permissions of an existing one) and
// returns its 18-character id. The user is also a queryable User record.
func (o *Org) AddUser(username string, perms Permissions) string {
	o.authMu.Lock()
	if u, ok := o.users[strings.ToLower(username)]; ok {
		u.perms = perms
		o.authMu.Unlock()
		return u.id
	}
	o.authMu.Unlock()
	now := o.now()
	local, _, _ := strings.Cut(username, "@")
	ids, err := o.Insert("User", Record{
		"Username": username, "Name": local, "LastName": local, "Email": username, "IsActive": true,
		"UserType": "Standard", "TimeZoneSidKey": "GMT", "CreatedDate": now,
	})
	if err != nil {
		panic(err) // the User schema is static: cannot fail
	}
	o.authMu.Lock()
	defer o.authMu.Unlock()
	o.users[strings.ToLower(username)] = &user{id: ids[0], username: username, perms: perms, active: true}
	return ids[0]
}

// SetPermissions replaces a user's permissions (takes effect on the next request).
func (o *Org) SetPermissions(username string, perms Permissions) error {
	o.authMu.Lock()
	defer o.authMu.Unlock()
	u, ok := o.users[strings.ToLower(username)]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownUser, username)
	}
	u.perms = perms
	return nil
}

// SetUserActive activates or deactivates a user; an inactive user cannot mint tokens.
func (o *Org) SetUserActive(username string, active bool) error {
	o.authMu.Lock()
	defer o.authMu.Unlock()
	u, ok := o.users[strings.ToLower(username)]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownUser, username)
	}
	u.active = active
	return nil
}

// UserID returns the id of a user added with AddUser.
func (o *Org) UserID(username string) (string, bool) {
	o.authMu.Lock()
	defer o.authMu.Unlock()
	u, ok := o.users[strings.ToLower(username)]
	if !ok {
		return "", false
	}
	return u.id, true
}

// ConnectedApp is an OAuth client of the org.
type ConnectedApp struct {
	// ClientID is the consumer key (JWT iss, client_credentials client_id).
	ClientID string
	// Certificate or PublicKey (an *rsa.PublicKey) verifies JWT assertions.
	Certificate *x509.Certificate
	PublicKey   any
	// PreAuthorized lists usernames allowed to use the JWT bearer flow.
	PreAuthorized []string
	// ClientSecret and RunAs enable the client credentials flow.
	ClientSecret string
	RunAs        string
	// Scopes granted to tokens; nil = "api refresh_token openid". JWT bearer
	// requires refresh_token (or offline_access) among them.
	Scopes []string
}

// AddConnectedApp registers (or replaces) a connected app.
func (o *Org) AddConnectedApp(app ConnectedApp) error {
	if app.ClientID == "" {
		return fmt.Errorf("%w: empty client id", ErrInvalidValue)
	}
	if app.PublicKey == nil && app.Certificate != nil {
		app.PublicKey = app.Certificate.PublicKey
	}
	if app.Scopes == nil {
		app.Scopes = []string{"api", "refresh_token", "openid"}
	}
	o.authMu.Lock()
	defer o.authMu.Unlock()
	if app.RunAs != "" {
		if _, ok := o.users[strings.ToLower(app.RunAs)]; !ok {
			return fmt.Errorf("%w: run-as %s", ErrUnknownUser, app.RunAs)
		}
	}
	a := app
	o.apps[app.ClientID] = &a
	return nil
}

// AddJWTApp registers a JWT bearer app. key is an *x509.Certificate or an
// *rsa.PublicKey.
func (o *Org) AddJWTApp(clientID string, key any, preAuthorized ...string) error {
	app := ConnectedApp{ClientID: clientID, PreAuthorized: preAuthorized}
	if c, ok := key.(*x509.Certificate); ok {
		app.Certificate = c
	} else {
		app.PublicKey = key
	}
	return o.AddConnectedApp(app)
}

// AddClientCredentialsApp registers a client credentials app running as runAs.
func (o *Org) AddClientCredentialsApp(clientID, secret, runAs string) error {
	return o.AddConnectedApp(ConnectedApp{ClientID: clientID, ClientSecret: secret, RunAs: runAs})
}

// objectByName finds an object case-insensitively. Callers hold o.mu.
func (o *Org) objectByName(name string) *object { return o.objects[strings.ToLower(name)] }

// ObjectNames lists every object of the schema.
func (o *Org) ObjectNames() []string {
	names := make([]string, 0, len(o.objectOrder))
	for _, obj := range o.objectOrder {
		names = append(names, obj.name)
	}
	sort.Strings(names)
	return names
}
