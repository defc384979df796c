package salesforce

import (
	"crypto/rsa"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// AuthMode selects the OAuth flow.
type AuthMode string

// The supported OAuth flows.
const (
	// AuthJWTBearer is the JWT bearer flow (RS256 assertion signed with the
	// connected app's private key; no secret). The default.
	AuthJWTBearer AuthMode = "jwt_bearer"
	// AuthClientCredentials is the client credentials flow (client id and
	// secret; identity is the app's Run-As user). It only works on a My Domain
	// login URL.
	AuthClientCredentials AuthMode = "client_credentials"
)

// Login hosts.
const (
	// ProductionLoginURL is the generic production login host, the default LoginURL.
	ProductionLoginURL = "https://login.salesforce.com"
	// SandboxLoginURL is the generic sandbox login host.
	SandboxLoginURL = "https://test.salesforce.com"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultAPIVersion    = "60.0"
	DefaultTokenLifetime = time.Hour
	DefaultHTTPTimeout   = 30 * time.Second
	DefaultMaxAttempts   = 4
	DefaultRetryWaitMin  = 500 * time.Millisecond
	DefaultRetryWaitMax  = 10 * time.Second
	DefaultBatchSize     = 2000

	// MinTokenLifetime is the shortest accepted TokenLifetime: with less, the
	// refresh skew would make every call mint a new token.
	MinTokenLifetime = 2 * time.Minute
	// MinBatchSize and MaxBatchSize bound BatchSize as Salesforce does.
	MinBatchSize = 200
	MaxBatchSize = 2000
)

// Options configures a Client. The zero value of every field means its
// default, as documented per field; New validates the result.
type Options struct {
	// LoginURL is the OAuth host: ProductionLoginURL (default), SandboxLoginURL
	// or the org's My Domain (https://acme.my.salesforce.com). It is also the
	// JWT audience, exactly as given (a trailing slash is removed). Plain http
	// is accepted only for loopback hosts (tests, the simulated org).
	LoginURL string
	// InstanceURL, when set, replaces the instance_url of the token response as
	// the base of every REST call.
	InstanceURL string
	// APIVersion is the REST API version, "60.0" by default.
	APIVersion string

	// AuthMode is the OAuth flow, AuthJWTBearer by default.
	AuthMode AuthMode
	// ClientID is the connected app's consumer key (both flows).
	ClientID string
	// Username is the integration user (JWT bearer only).
	Username string
	// PrivateKeyPEM is the PEM-encoded RSA private key (PKCS#1 or PKCS#8)
	// whose certificate is uploaded to the connected app (JWT bearer only).
	PrivateKeyPEM []byte
	// ClientSecret is the consumer secret (client credentials only).
	ClientSecret string
	// OrgID, when set, is returned by OrgID without looking at the token
	// response.
	OrgID string
	// TokenLifetime is how long a token is assumed valid (Salesforce does not
	// say); 1h by default, at least MinTokenLifetime. A token is refreshed
	// min(60s, TokenLifetime/4) before that; a session that dies earlier is
	// renewed when the API answers 401.
	TokenLifetime time.Duration

	// HTTPTimeout bounds connecting, waiting for response headers, and each
	// wait for more response body bytes (an idle timeout, so long downloads
	// are not cut). 30s by default.
	HTTPTimeout time.Duration
	// MaxAttempts is how many times a request is sent while it meets transient
	// failures (5xx, transport error, unparseable 2xx body): 1 sends it once
	// and never retries; 0 means DefaultMaxAttempts. Counting attempts rather
	// than retries keeps "no retry" distinct from "unset".
	MaxAttempts int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// retries (full jitter); 500ms and 10s by default.
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
	// BatchSize is sent as Sforce-Query-Options: batchSize=N on queries;
	// 2000 by default, between MinBatchSize and MaxBatchSize.
	BatchSize int

	// TLSCAFile is a PEM bundle of extra root certificates to trust.
	TLSCAFile string
	// TLSInsecureSkipVerify disables certificate verification. Only for tests
	// against self-signed endpoints; never a default.
	TLSInsecureSkipVerify bool
	// Proxy selects the proxy of each request (as http.Transport.Proxy); nil
	// means http.ProxyFromEnvironment. Ignored with HTTPClient.
	Proxy func(*http.Request) (*url.URL, error)
	// HTTPClient, when set, is used instead of a client built from the TLS
	// and timeout options (its Transport is wrapped for counting). For tests.
	HTTPClient *http.Client

	// Logger receives retries and re-authentications at debug/warn level;
	// nil means slog.Default(). Tokens and secrets are never logged.
	Logger *slog.Logger
	// Now is the wall clock; nil means time.Now.
	Now func() time.Time
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.LoginURL == "" {
		o.LoginURL = ProductionLoginURL
	}
	o.LoginURL = strings.TrimRight(o.LoginURL, "/")
	o.InstanceURL = strings.TrimRight(o.InstanceURL, "/")
	if o.APIVersion == "" {
		o.APIVersion = DefaultAPIVersion
	}
	o.APIVersion = strings.TrimPrefix(o.APIVersion, "v")
	if o.AuthMode == "" {
		o.AuthMode = AuthJWTBearer
	}
	if o.TokenLifetime == 0 {
		o.TokenLifetime = DefaultTokenLifetime
	}
	if o.HTTPTimeout == 0 {
		o.HTTPTimeout = DefaultHTTPTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryWaitMin == 0 {
		o.RetryWaitMin = DefaultRetryWaitMin
	}
	if o.RetryWaitMax == 0 {
		o.RetryWaitMax = DefaultRetryWaitMax
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// genericLoginHosts are the shared login hosts that refuse the client
// credentials flow (it needs the org's My Domain).
var genericLoginHosts = map[string]bool{
	"login.salesforce.com": true,
	"test.salesforce.com":  true,
}

var apiVersionRE = regexp.MustCompile(`^[1-9][0-9]\.[0-9]$`)

// ValidateAuth checks the authentication options without any network call,
// so the config layer can refuse a bad configuration at load time. Errors are
// *ConfigError naming the Options field. Zero fields take their defaults
// first, as in New.
func ValidateAuth(opts Options) error {
	_, err := validateAuth(opts.withDefaults())
	return err
}

// validateAuth is ValidateAuth on defaulted o; it returns the private key of jwt_bearer, parsed
// once (a 2048-bit key takes about half a millisecond to parse and check).
func validateAuth(o Options) (*rsa.PrivateKey, error) {
	if err := validateBaseURL("LoginURL", o.LoginURL); err != nil {
		return nil, err
	}
	if o.InstanceURL != "" {
		if err := validateBaseURL("InstanceURL", o.InstanceURL); err != nil {
			return nil, err
		}
	}
	if o.ClientID == "" {
		return nil, &ConfigError{Field: "ClientID", Msg: "the connected app's consumer key is required"}
	}
	if o.TokenLifetime < MinTokenLifetime {
		return nil, &ConfigError{Field: "TokenLifetime", Msg: fmt.Sprintf("%s is below the minimum of %s", o.TokenLifetime, MinTokenLifetime)}
	}
	if o.OrgID != "" && !orgIDRE.MatchString(o.OrgID) {
		return nil, &ConfigError{Field: "OrgID", Msg: "must be the 18-character org id (starts with 00D)"}
	}
	switch o.AuthMode {
	case AuthJWTBearer:
		if o.Username == "" {
			return nil, &ConfigError{Field: "Username", Msg: "the integration username is required for jwt_bearer"}
		}
		if len(o.PrivateKeyPEM) == 0 {
			return nil, &ConfigError{Field: "PrivateKeyPEM", Msg: "an RSA private key (PEM) is required for jwt_bearer"}
		}
		key, err := jwt.ParseRSAPrivateKeyFromPEM(o.PrivateKeyPEM)
		if err != nil {
			// The parse error never contains key material.
			return nil, &ConfigError{Field: "PrivateKeyPEM", Msg: "not a PEM-encoded RSA private key (PKCS#1 or PKCS#8): " + err.Error()}
		}
		return key, nil
	case AuthClientCredentials:
		if o.ClientSecret == "" {
			return nil, &ConfigError{Field: "ClientSecret", Msg: "the consumer secret is required for client_credentials"}
		}
		u, _ := url.Parse(o.LoginURL) // validated above
		if genericLoginHosts[strings.ToLower(u.Hostname())] {
			return nil, &ConfigError{Field: "LoginURL", Msg: fmt.Sprintf(
				"client_credentials does not work on the generic login host %s; set it to the org's My Domain (https://<domain>.my.salesforce.com)", u.Hostname())}
		}
	default:
		return nil, &ConfigError{Field: "AuthMode", Msg: fmt.Sprintf("unknown mode %q (want %q or %q)", o.AuthMode, AuthJWTBearer, AuthClientCredentials)}
	}
	return nil, nil
}

// validate checks every option (ValidateAuth plus the rest) on defaulted o, and returns the
// private key of jwt_bearer.
func (o Options) validate() (*rsa.PrivateKey, error) {
	key, err := validateAuth(o)
	if err != nil {
		return nil, err
	}
	if !apiVersionRE.MatchString(o.APIVersion) {
		return nil, &ConfigError{Field: "APIVersion", Msg: fmt.Sprintf("%q is not a version like 60.0", o.APIVersion)}
	}
	if o.BatchSize < MinBatchSize || o.BatchSize > MaxBatchSize {
		return nil, &ConfigError{Field: "BatchSize", Msg: fmt.Sprintf("%d is outside %d..%d", o.BatchSize, MinBatchSize, MaxBatchSize)}
	}
	if o.HTTPTimeout < 0 {
		return nil, &ConfigError{Field: "HTTPTimeout", Msg: "must not be negative"}
	}
	if o.RetryWaitMin < 0 || o.RetryWaitMax < o.RetryWaitMin {
		return nil, &ConfigError{Field: "RetryWaitMax", Msg: fmt.Sprintf("backoff bounds %s..%s are not a valid range", o.RetryWaitMin, o.RetryWaitMax)}
	}
	return key, nil
}

func validateBaseURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return &ConfigError{Field: field, Msg: fmt.Sprintf("%q is not a base URL like https://acme.my.salesforce.com", raw)}
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return &ConfigError{Field: field, Msg: fmt.Sprintf("%q uses plain http; only https is allowed (http only for loopback test servers)", raw)}
		}
	default:
		return &ConfigError{Field: field, Msg: fmt.Sprintf("%q: scheme must be https", raw)}
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
