package salesforce

import (
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OAuth grant types accepted by the token endpoint.
const (
	GrantJWTBearer         = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	GrantClientCredentials = "client_credentials"
)

// JWT bearer error descriptions (error "invalid_grant" unless noted).
const (
	DescAudienceInvalid  = "audience is invalid"
	DescExpired          = "expired authorization code"
	DescInvalidAssertion = "invalid assertion"
	DescNotApproved      = "user hasn't approved this consumer"
	DescInactiveUser     = "inactive user"
	DescClientIDInvalid  = "client identifier invalid"  // error invalid_client_id
	DescClientCreds      = "invalid client credentials" // error invalid_client
	DescWrongDomain      = "request not supported on this domain"
	DescNoRunAs          = "no client credentials user enabled"
	DescRefreshScope     = "refresh_token scope is required and the connected app should be installed and preauthorized." // error invalid_request
	DescGrantUnsupported = "grant type not supported"                                                                     // error unsupported_grant_type
)

type session struct {
	token    string
	user     *user
	app      *ConnectedApp
	lastUsed time.Time
	expired  bool
}

// ExpireSessions invalidates every access token issued so far: the next
// request with one answers 401 INVALID_SESSION_ID.
func (o *Org) ExpireSessions() {
	o.authMu.Lock()
	defer o.authMu.Unlock()
	for _, s := range o.sessions {
		s.expired = true
	}
}

// ExpireSession invalidates one access token; it reports whether it existed.
func (o *Org) ExpireSession(token string) bool {
	o.authMu.Lock()
	defer o.authMu.Unlock()
	s, ok := o.sessions[token]
	if ok {
		s.expired = true
	}
	return ok
}

// ActiveSessions returns the number of sessions still valid at now.
func (o *Org) ActiveSessions() int {
	now := o.now()
	o.authMu.Lock()
	defer o.authMu.Unlock()
	n := 0
	for _, s := range o.sessions {
		if o.sessionValid(s, now) {
			n++
		}
	}
	return n
}

func (o *Org) sessionValid(s *session, now time.Time) bool {
	return !s.expired && now.Before(s.lastUsed.Add(o.opts.SessionLifetime))
}

// baseURL is the org's own URL as seen by this request.
func (o *Org) baseURL(r *http.Request) string {
	if o.opts.BaseURL != "" {
		return o.opts.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "OAuth "} {
		if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
			return strings.TrimSpace(h[len(p):])
		}
	}
	return ""
}

// authenticate resolves the request's session, sliding its expiry.
func (o *Org) authenticate(r *http.Request, now time.Time) (*session, bool) {
	tok := bearerToken(r)
	o.authMu.Lock()
	defer o.authMu.Unlock()
	s, ok := o.sessions[tok]
	if !ok || !o.sessionValid(s, now) || !s.user.active {
		return nil, false
	}
	s.lastUsed = now
	return s, true
}

func (o *Org) expireRequestSession(r *http.Request) {
	o.ExpireSession(bearerToken(r))
}

func (o *Org) handleToken(w http.ResponseWriter, r *http.Request, now time.Time) {
	if r.Method != http.MethodPost {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "must use HTTP POST")
		return
	}
	_ = r.ParseForm()
	switch r.PostForm.Get("grant_type") {
	case GrantJWTBearer:
		o.jwtBearer(w, r, now)
	case GrantClientCredentials:
		o.clientCredentials(w, r, now)
	default:
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", DescGrantUnsupported)
	}
}

type jwtClaims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Exp *json.Number    `json:"exp"`
}

func (o *Org) jwtBearer(w http.ResponseWriter, r *http.Request, now time.Time) {
	grantErr := func(desc string) { writeOAuthError(w, http.StatusBadRequest, "invalid_grant", desc) }
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		grantErr(DescInvalidAssertion)
		return
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims jwtClaims
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &hdr) != nil || json.Unmarshal(cb, &claims) != nil {
		grantErr(DescInvalidAssertion)
		return
	}
	o.authMu.Lock()
	app := o.apps[claims.Iss]
	o.authMu.Unlock()
	if app == nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_client_id", DescClientIDInvalid)
		return
	}
	pub, _ := app.PublicKey.(*rsa.PublicKey)
	if hdr.Alg != "RS256" || pub == nil {
		grantErr(DescInvalidAssertion)
		return
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) != nil {
		grantErr(DescInvalidAssertion)
		return
	}
	if !o.audienceOK(claims.Aud, r) {
		grantErr(DescAudienceInvalid)
		return
	}
	if claims.Exp == nil {
		grantErr(DescInvalidAssertion)
		return
	}
	expF, err := claims.Exp.Float64()
	if err != nil {
		grantErr(DescInvalidAssertion)
		return
	}
	exp := time.Unix(int64(expF), 0)
	if !exp.After(now.Add(-o.opts.JWTClockSkew)) {
		grantErr(DescExpired)
		return
	}
	if exp.After(now.Add(o.opts.JWTMaxLifetime + o.opts.JWTClockSkew)) {
		grantErr(DescInvalidAssertion)
		return
	}
	o.authMu.Lock()
	u := o.users[strings.ToLower(claims.Sub)]
	approved := u != nil && slices.ContainsFunc(app.PreAuthorized, func(s string) bool { return strings.EqualFold(s, claims.Sub) })
	o.authMu.Unlock()
	if !approved {
		grantErr(DescNotApproved)
		return
	}
	if !u.active {
		grantErr(DescInactiveUser)
		return
	}
	if !slices.Contains(app.Scopes, "refresh_token") && !slices.Contains(app.Scopes, "offline_access") {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", DescRefreshScope)
		return
	}
	o.issueToken(w, r, now, u, app)
}

func (o *Org) audienceOK(raw json.RawMessage, r *http.Request) bool {
	var auds []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		auds = []string{one}
	} else if json.Unmarshal(raw, &auds) != nil {
		return false
	}
	want := append([]string{o.baseURL(r)}, o.opts.AcceptedAudiences...)
	for _, a := range auds {
		for _, w := range want {
			if strings.TrimSuffix(a, "/") == strings.TrimSuffix(w, "/") {
				return true
			}
		}
	}
	return false
}

func (o *Org) clientCredentials(w http.ResponseWriter, r *http.Request, now time.Time) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, g := range o.opts.GenericLoginHosts {
		if strings.EqualFold(host, g) {
			writeOAuthError(w, http.StatusBadRequest, "invalid_grant", DescWrongDomain)
			return
		}
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	o.authMu.Lock()
	app := o.apps[id]
	var u *user
	if app != nil {
		u = o.users[strings.ToLower(app.RunAs)]
	}
	o.authMu.Unlock()
	switch {
	case app == nil:
		writeOAuthError(w, http.StatusBadRequest, "invalid_client_id", DescClientIDInvalid)
	case app.ClientSecret == "" || !hmac.Equal([]byte(app.ClientSecret), []byte(secret)):
		writeOAuthError(w, http.StatusBadRequest, "invalid_client", DescClientCreds)
	case u == nil:
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", DescNoRunAs)
	case !u.active:
		writeOAuthError(w, http.StatusBadRequest, "invalid_grant", DescInactiveUser)
	default:
		o.issueToken(w, r, now, u, app)
	}
}

func (o *Org) issueToken(w http.ResponseWriter, r *http.Request, now time.Time, u *user, app *ConnectedApp) {
	o.authMu.Lock()
	o.tokenSeq++
	h := splitmix64(uint64(o.opts.Seed) ^ hashString(u.id) ^ o.tokenSeq*0x9e3779b97f4a7c15)
	var b strings.Builder
	b.WriteString(o.orgID[:15])
	b.WriteString("!AR")
	for i := 0; i < 93; i++ {
		if i%10 == 0 {
			h = splitmix64(h + uint64(i))
		}
		b.WriteByte(base62[h%62])
		h /= 62
	}
	tok := b.String()
	o.sessions[tok] = &session{token: tok, user: u, app: app, lastUsed: now}
	o.authMu.Unlock()

	base := o.baseURL(r)
	idURL := base + "/id/" + o.orgID + "/" + u.id
	issued := strconv.FormatInt(now.UnixMilli(), 10)
	mac := hmac.New(sha256.New, o.secret)
	_, _ = mac.Write([]byte(idURL + issued))
	writeJSON(w, http.StatusOK, map[string]string{
		"access_token": tok,
		"signature":    base64.StdEncoding.EncodeToString(mac.Sum(nil)),
		"scope":        strings.Join(app.Scopes, " "),
		"instance_url": base,
		"id":           idURL,
		"token_type":   "Bearer",
		"issued_at":    issued,
	})
}

// handleUserInfo serves /services/oauth2/userinfo and the identity URL.
func (o *Org) handleUserInfo(w http.ResponseWriter, r *http.Request, now time.Time) {
	s, ok := o.authenticate(r, now)
	if !ok {
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("Bad_OAuth_Token"))
		return
	}
	if !slices.Contains(s.app.Scopes, "openid") && !slices.Contains(s.app.Scopes, "id") && !slices.Contains(s.app.Scopes, "full") {
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("Forbidden"))
		return
	}
	base := o.baseURL(r)
	idURL := base + "/id/" + o.orgID + "/" + s.user.id
	local, _, _ := strings.Cut(s.user.username, "@")
	writeJSON(w, http.StatusOK, map[string]any{
		"sub":                idURL,
		"user_id":            s.user.id,
		"organization_id":    o.orgID,
		"preferred_username": s.user.username,
		"nickname":           local,
		"name":               local,
		"email":              s.user.username,
		"email_verified":     true,
		"zoneinfo":           "GMT",
		"active":             s.user.active,
		"user_type":          "STANDARD",
		"language":           "en_US",
		"locale":             "en_US",
		"utcOffset":          0,
		"updated_at":         now.UTC().Format("2006-01-02T15:04:05Z"),
		"urls": map[string]string{
			"rest":     base + "/services/data/v{version}/",
			"sobjects": base + "/services/data/v{version}/sobjects/",
			"query":    base + "/services/data/v{version}/query/",
			"limits":   base + "/services/data/v{version}/limits/",
		},
	})
}

// SessionInfo describes the user behind a live access token.
type SessionInfo struct {
	OrgID       string
	UserID      string
	Username    string
	Permissions Permissions
	Scopes      []string
}

// Session reports who a live access token acts for, sliding its expiry like
// any API use. ok is false for unknown, expired or inactive sessions. It is
// how the Pub/Sub API (internal/sim/salesforce/pubsub) authenticates calls
// without a REST round trip; it is not counted as a request.
func (o *Org) Session(token string) (SessionInfo, bool) {
	now := o.now()
	o.authMu.Lock()
	defer o.authMu.Unlock()
	s, ok := o.sessions[token]
	if !ok || !o.sessionValid(s, now) || !s.user.active {
		return SessionInfo{}, false
	}
	s.lastUsed = now
	return SessionInfo{OrgID: o.orgID, UserID: s.user.id, Username: s.user.username,
		Permissions: s.user.perms, Scopes: append([]string(nil), s.app.Scopes...)}, true
}
