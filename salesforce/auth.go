package salesforce

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Session is an authenticated Salesforce session, as minted by the token
// endpoint. The Pub/Sub client uses it for its gRPC metadata.
type Session struct {
	// AccessToken is the bearer token. Never log it.
	AccessToken string
	// InstanceURL is the base of every REST call (and the Pub/Sub
	// "instanceurl" header); Options.InstanceURL replaces it when set.
	InstanceURL string
	// OrgID and UserID are the 18-character ids read from the identity URL of
	// the token response; empty when that URL did not carry them.
	OrgID  string
	UserID string
	// IssuedAt is the local time the token was received.
	IssuedAt time.Time
}

const (
	jwtGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	// jwtLifetime is the assertion's exp offset; Salesforce accepts at most a
	// few minutes.
	jwtLifetime = 180 * time.Second
	// maxRefreshSkew is how long before the assumed expiry a token is renewed
	// (less for short lifetimes: min(60s, lifetime/4)).
	maxRefreshSkew = 60 * time.Second
	// authFailureTTL is how long a refused grant is remembered, so that many
	// concurrent callers do not each hammer the token endpoint with a grant
	// that cannot succeed.
	authFailureTTL = time.Minute
	// presignMaxAge is how old an assertion signed ahead of the first mint may be and still be
	// sent: it then has at least jwtLifetime-presignMaxAge left.
	presignMaxAge = 30 * time.Second
)

var (
	orgIDRE = regexp.MustCompile(`^00D[A-Za-z0-9]{15}$`)
	idRE    = regexp.MustCompile(`^[A-Za-z0-9]{18}$`)
)

// tokenSource caches one session per Client, mints it single-flight and
// clears it only when the token that failed is still the cached one.
type tokenSource struct {
	c   *Client
	key *rsa.PrivateKey // JWT bearer only

	// mintSlot is a one-slot semaphore: whoever holds it mints; others wait
	// (or give up when their context ends) and then reuse the result.
	mintSlot chan struct{}
	// presigned receives the assertion signed in the background when the
	// source was made (JWT bearer only); the first mint takes it, under
	// mintSlot, and sets it to nil.
	presigned chan presigned

	mu        sync.Mutex
	cur       *Session
	lastErr   error // a refused grant, remembered for authFailureTTL
	lastErrAt time.Time
}

// presigned is an assertion signed ahead of the first mint.
type presigned struct {
	assertion string
	err       error
	at        time.Time // the clock when it was signed (its exp is at+jwtLifetime)
}

// newTokenSource returns the token source of c. With a key (JWT bearer) it
// signs the first assertion in the background at once: an RS256 signature
// with a 2048-bit key costs 1.5-3 ms of CPU, which a run would otherwise spend
// waiting after its lease claim, and signing needs nothing from the network.
func newTokenSource(c *Client, key *rsa.PrivateKey) *tokenSource {
	t := &tokenSource{c: c, key: key, mintSlot: make(chan struct{}, 1)}
	if key != nil {
		t.presigned = make(chan presigned, 1)
		at := c.opts.Now()
		go func() {
			a, err := t.sign(at)
			t.presigned <- presigned{assertion: a, err: err, at: at}
		}()
	}
	return t
}

// cached returns the cached session if it is still considered valid, or the
// remembered grant refusal.
func (t *tokenSource) cached() (*Session, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.c.opts.Now()
	if t.cur != nil {
		ttl := t.c.opts.TokenLifetime
		skew := min(maxRefreshSkew, ttl/4)
		if now.Before(t.cur.IssuedAt.Add(ttl - skew)) {
			return t.cur, nil
		}
		t.cur = nil
	}
	if t.lastErr != nil && now.Sub(t.lastErrAt) < authFailureTTL {
		return nil, t.lastErr
	}
	return nil, nil
}

// session returns a valid session, minting one if needed. Concurrent callers
// share one mint.
func (t *tokenSource) session(ctx context.Context) (*Session, error) {
	if s, err := t.cached(); s != nil || err != nil {
		return s, err
	}
	select {
	case t.mintSlot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-t.mintSlot }()
	if s, err := t.cached(); s != nil || err != nil {
		return s, err // minted (or refused) while we waited
	}
	s, err := t.mint(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		var authErr *AuthError
		if errors.As(err, &authErr) && authErr.StatusCode < 500 {
			t.lastErr, t.lastErrAt = err, t.c.opts.Now()
		}
		return nil, err
	}
	t.cur, t.lastErr = s, nil
	return s, nil
}

// invalidate drops the cached session only if it still holds accessToken: a
// 401 seen by a request that used an older token must not discard a newer one.
func (t *tokenSource) invalidate(accessToken string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != nil && t.cur.AccessToken == accessToken {
		t.cur = nil
		return true
	}
	return false
}

func (t *tokenSource) mint(ctx context.Context) (*Session, error) {
	o := t.c.opts
	form := url.Values{}
	switch o.AuthMode {
	case AuthJWTBearer:
		assertion, err := t.assertion()
		if err != nil {
			return nil, err
		}
		form.Set("grant_type", jwtGrantType)
		form.Set("assertion", assertion)
	case AuthClientCredentials:
		form.Set("grant_type", "client_credentials")
		form.Set("client_id", o.ClientID)
		form.Set("client_secret", o.ClientSecret)
	}
	var tr tokenResponse
	hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"application/json"}}
	err := t.c.callJSON(ctx, request{
		kind: KindToken, method: http.MethodPost, url: o.LoginURL + "/services/oauth2/token",
		header: hdr, body: []byte(form.Encode()),
	}, func(b []byte) error {
		tr = tokenResponse{}
		return tr.decode(b)
	})
	if err != nil {
		return nil, fmt.Errorf("salesforce: token request to %s (%s): %w", o.LoginURL, o.AuthMode, err)
	}
	s := &Session{AccessToken: tr.AccessToken, InstanceURL: strings.TrimRight(tr.InstanceURL, "/"), IssuedAt: o.Now()}
	if o.InstanceURL != "" {
		s.InstanceURL = o.InstanceURL
	}
	s.OrgID, s.UserID = parseIdentityURL(tr.ID)
	t.c.log.Debug("salesforce: new session", "auth_mode", string(o.AuthMode), "instance_url", s.InstanceURL, "org_id", s.OrgID)
	return s, nil
}

// assertion returns the RS256 JWT for the bearer flow: the one signed ahead
// when this is the first mint and it was signed at most presignMaxAge ago by
// the clock (not in its future), a new one otherwise. Called under mintSlot.
func (t *tokenSource) assertion() (string, error) {
	now := t.c.opts.Now()
	if t.presigned != nil {
		p := <-t.presigned
		t.presigned = nil
		if age := now.Sub(p.at); p.err == nil && age >= 0 && age <= presignMaxAge {
			return p.assertion, nil
		}
	}
	return t.sign(now)
}

// sign builds and signs the assertion: iss = consumer key, sub = username,
// aud = the login URL exactly as POSTed to, exp = now+180s.
func (t *tokenSource) sign(now time.Time) (string, error) {
	o := t.c.opts
	claims := jwt.MapClaims{
		"iss": o.ClientID,
		"sub": o.Username,
		"aud": o.LoginURL, // a plain string: Salesforce does not take an array
		"exp": now.Add(jwtLifetime).Unix(),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(t.key)
	if err != nil {
		return "", fmt.Errorf("salesforce: signing the JWT assertion: %w", err)
	}
	return s, nil
}

type tokenResponse struct {
	AccessToken string `json:"access_token"`
	InstanceURL string `json:"instance_url"`
	ID          string `json:"id"`
}

// decode reads a token answer into tr. Its errors say what is wrong with the answer without
// quoting any of it, not even a value's JSON error: the answer carries the access token.
func (tr *tokenResponse) decode(b []byte) error {
	err := json.Unmarshal(b, tr)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
	case len(bytes.TrimSpace(b)) == 0:
		return errors.New("the token answer is empty")
	case errors.As(err, &syntax):
		// A JSON value cut short reads as io.ErrUnexpectedEOF from a Decoder (Unmarshal gives
		// only a message for it): a proxy or a dropped connection ended the answer early.
		if errors.Is(json.NewDecoder(bytes.NewReader(b)).Decode(new(json.RawMessage)), io.ErrUnexpectedEOF) {
			return errors.New("the token answer's JSON is truncated")
		}
		return fmt.Errorf("the token answer is not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		// typ.Value may hold the value itself ("number 123"): only its place is named.
		return fmt.Errorf("the token answer's %s is not a JSON %s", typ.Field, typ.Type)
	default: // an array, a string or a number
		return errors.New("the token answer is not a JSON object")
	}
	switch {
	case tr.AccessToken == "":
		return errors.New("the token answer lacks access_token")
	case tr.InstanceURL == "":
		return errors.New("the token answer lacks instance_url")
	}
	return nil
}

// parseIdentityURL reads the org and user ids out of an identity URL
// (https://login.salesforce.com/id/<orgId18>/<userId18>).
func parseIdentityURL(raw string) (orgID, userID string) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", ""
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 3 || parts[len(parts)-3] != "id" {
		return "", ""
	}
	org, user := parts[len(parts)-2], parts[len(parts)-1]
	if !orgIDRE.MatchString(org) {
		return "", ""
	}
	if !idRE.MatchString(user) {
		user = ""
	}
	return org, user
}

// Session returns the current session, minting a token if none is cached or
// the cached one is past its assumed lifetime. Concurrent callers share one
// token request.
func (c *Client) Session(ctx context.Context) (Session, error) {
	s, err := c.auth.session(ctx)
	if err != nil {
		return Session{}, err
	}
	return *s, nil
}

// InvalidateSession reports that accessToken was rejected (for example a gRPC
// UNAUTHENTICATED). The cached session is dropped only if it still holds that
// token, so a stale rejection never discards a newer token. It reports
// whether the cache was cleared.
func (c *Client) InvalidateSession(accessToken string) bool {
	return c.auth.invalidate(accessToken)
}

// OrgID returns the org's 18-character id: Options.OrgID when set, else the
// id from the token response's identity URL (no extra call), else the
// organization_id of /services/oauth2/userinfo (one call, cached).
func (c *Client) OrgID(ctx context.Context) (string, error) {
	if c.opts.OrgID != "" {
		return c.opts.OrgID, nil
	}
	s, err := c.auth.session(ctx)
	if err != nil {
		return "", err
	}
	if s.OrgID != "" {
		return s.OrgID, nil
	}
	c.orgMu.Lock()
	defer c.orgMu.Unlock()
	if c.orgID != "" {
		return c.orgID, nil
	}
	var ui struct {
		OrganizationID string `json:"organization_id"`
	}
	err = c.authorizedJSON(ctx, KindUserinfo, "/services/oauth2/userinfo", nil, func(b []byte) error {
		return json.Unmarshal(b, &ui)
	})
	if err != nil {
		return "", fmt.Errorf("salesforce: reading the org id from userinfo: %w", err)
	}
	if !orgIDRE.MatchString(ui.OrganizationID) {
		return "", fmt.Errorf("%w: userinfo organization_id %q is not an 18-character org id", ErrBadResponse, ui.OrganizationID)
	}
	c.orgID = ui.OrganizationID
	return c.orgID, nil
}
