package salesforce

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestJWTBearer(t *testing.T) {
	key, other := keys(t)
	e := newEnv(t, Options{})
	e.org.AddUser("stranger@example.com", AllPermissions())
	e.org.AddUser("inactive@example.com", AllPermissions())
	noErr(t, e.org.SetUserActive("inactive@example.com", false))
	noErr(t, e.org.AddJWTApp("app-with-inactive", &key.PublicKey, "inactive@example.com"))
	must[struct{}](t)(struct{}{}, e.org.AddConnectedApp(ConnectedApp{ClientID: "no-refresh-scope", PublicKey: &key.PublicKey,
		PreAuthorized: []string{testUser}, Scopes: []string{"api"}}))

	now := e.clock.Now()
	type mod func(c map[string]any)
	cases := []struct {
		name     string
		key      bool // sign with the wrong key
		alg      string
		mod      mod
		wantCode int
		wantErr  string
		wantDesc string
	}{
		{name: "valid", wantCode: 200},
		{name: "aud with trailing slash", mod: func(c map[string]any) { c["aud"] = e.srv.URL + "/" }, wantCode: 200},
		{name: "aud as array", mod: func(c map[string]any) { c["aud"] = []string{"https://other", e.srv.URL} }, wantCode: 200},
		{name: "wrong audience", mod: func(c map[string]any) { c["aud"] = "https://login.salesforce.com" }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescAudienceInvalid},
		{name: "expired", mod: func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescExpired},
		{name: "exp too far ahead", mod: func(c map[string]any) { c["exp"] = now.Add(time.Hour).Unix() }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescInvalidAssertion},
		{name: "missing exp", mod: func(c map[string]any) { delete(c, "exp") }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescInvalidAssertion},
		{name: "wrong key", key: true, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescInvalidAssertion},
		{name: "unsupported alg", alg: "HS256", wantCode: 400, wantErr: "invalid_grant", wantDesc: DescInvalidAssertion},
		{name: "unknown user", mod: func(c map[string]any) { c["sub"] = "nobody@example.com" }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescNotApproved},
		{name: "user not pre-authorized", mod: func(c map[string]any) { c["sub"] = "stranger@example.com" }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescNotApproved},
		{name: "inactive user", mod: func(c map[string]any) { c["sub"] = "inactive@example.com"; c["iss"] = "app-with-inactive" }, wantCode: 400, wantErr: "invalid_grant", wantDesc: DescInactiveUser},
		{name: "unknown client id", mod: func(c map[string]any) { c["iss"] = "nope" }, wantCode: 400, wantErr: "invalid_client_id", wantDesc: DescClientIDInvalid},
		{name: "app without refresh_token scope", mod: func(c map[string]any) { c["iss"] = "no-refresh-scope" }, wantCode: 400, wantErr: "invalid_request", wantDesc: DescRefreshScope},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.claims()
			if tc.mod != nil {
				tc.mod(c)
			}
			k := key
			if tc.key {
				k = other
			}
			assertion := signJWT(t, k, c)
			if tc.alg != "" {
				parts := strings.SplitN(assertion, ".", 2)
				assertion = b64url(`{"alg":"`+tc.alg+`"}`) + "." + parts[1]
			}
			code, m := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {assertion}})
			if code != tc.wantCode {
				t.Fatalf("status %d, want %d: %v", code, tc.wantCode, m)
			}
			if tc.wantCode == 200 {
				return
			}
			if m["error"] != tc.wantErr || m["error_description"] != tc.wantDesc || len(m) != 2 {
				t.Fatalf("body %v, want error=%s description=%q", m, tc.wantErr, tc.wantDesc)
			}
		})
	}

	t.Run("malformed requests", func(t *testing.T) {
		code, m := e.postToken(url.Values{"grant_type": {"password"}})
		if code != 400 || m["error"] != "unsupported_grant_type" {
			t.Errorf("password grant: %d %v", code, m)
		}
		code, m = e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {"not-a-jwt"}})
		if code != 400 || m["error"] != "invalid_grant" {
			t.Errorf("garbage assertion: %d %v", code, m)
		}
		resp, err := http.Get(e.srv.URL + "/services/oauth2/token")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET token: %d", resp.StatusCode)
		}
	})
}

func b64url(s string) string {
	return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(stdB64(s)), "=")
}

func TestTokenResponseAndCertificate(t *testing.T) {
	key, _ := keys(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sf2loki"},
		NotBefore: epoch.Add(-time.Hour), NotAfter: epoch.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := must[*x509.Certificate](t)(x509.ParseCertificate(der))
	e := newEnv(t, Options{})
	noErr(t, e.org.AddJWTApp("cert-app", cert, testUser))
	c := e.claims()
	c["iss"] = "cert-app"
	code, m := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(t, key, c)}})
	if code != 200 {
		t.Fatalf("%d %v", code, m)
	}
	uid := e.org.mustUser(t, testUser)
	if m["instance_url"] != e.srv.URL || m["token_type"] != "Bearer" ||
		m["id"] != e.srv.URL+"/id/"+e.org.OrgID()+"/"+uid || m["issued_at"] != strconv.FormatInt(epoch.UnixMilli(), 10) ||
		m["scope"] != "api refresh_token openid" || m["signature"] == "" {
		t.Errorf("token response %v", m)
	}
	if _, has := m["expires_in"]; has {
		t.Error("Salesforce token responses carry no expires_in")
	}
	if len(e.org.OrgID()) != 18 || !strings.HasPrefix(m["access_token"].(string), e.org.OrgID()[:15]+"!") {
		t.Errorf("org id %s, token %s", e.org.OrgID(), m["access_token"])
	}
}

func TestClientCredentials(t *testing.T) {
	e := newEnv(t, Options{})
	noErr(t, e.org.AddClientCredentialsApp("cc-app", "s3cret", testUser))
	post := func(host string, form url.Values, basic bool) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/services/oauth2/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if host != "" {
			req.Host = host
		}
		if basic {
			req.SetBasicAuth(form.Get("client_id"), form.Get("client_secret"))
			form.Del("client_id")
			form.Del("client_secret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	form := func(id, secret string) url.Values {
		return url.Values{"grant_type": {GrantClientCredentials}, "client_id": {id}, "client_secret": {secret}}
	}
	if code, m := post("", form("cc-app", "s3cret"), false); code != 200 || m["access_token"] == "" {
		t.Errorf("valid: %d %v", code, m)
	}
	if code, m := post("", form("cc-app", "s3cret"), true); code != 200 {
		t.Errorf("valid with basic auth: %d %v", code, m)
	}
	if code, m := post("", form("cc-app", "wrong"), false); code != 400 || m["error"] != "invalid_client" {
		t.Errorf("wrong secret: %d %v", code, m)
	}
	if code, m := post("", form("nope", "s3cret"), false); code != 400 || m["error"] != "invalid_client_id" {
		t.Errorf("unknown client: %d %v", code, m)
	}
	if code, m := post("login.salesforce.com", form("cc-app", "s3cret"), false); code != 400 || m["error"] != "invalid_grant" || m["error_description"] != DescWrongDomain {
		t.Errorf("generic host: %d %v", code, m)
	}
	// A JWT-only app cannot use client credentials.
	if code, m := post("", form(testClientID, ""), false); code != 400 || m["error"] != "invalid_client" {
		t.Errorf("jwt app: %d %v", code, m)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, Options{SessionLifetime: 15 * time.Minute})
	e.login()
	ok := func(want int) {
		t.Helper()
		resp, b := e.get(ver + "/limits")
		if resp.StatusCode != want {
			t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
		}
		if want == 401 && !strings.Contains(string(b), `"errorCode":"INVALID_SESSION_ID"`) {
			t.Fatalf("401 body: %s", b)
		}
	}
	ok(200)
	e.clock.Advance(14 * time.Minute)
	ok(200) // sliding: the call extends the session
	e.clock.Advance(14 * time.Minute)
	ok(200)
	e.clock.Advance(16 * time.Minute)
	ok(401)

	e.login()
	ok(200)
	e.org.ExpireSessions()
	ok(401)
	e.login()
	e.org.ExpireSessionBefore(KindLimits, 1)
	ok(401)
	e.login()
	ok(200)

	e.token = "00Dbogus!token"
	ok(401)
	e.token = ""
	ok(401)
}

func TestUserInfoAndIdentity(t *testing.T) {
	key, _ := keys(t)
	e := newEnv(t, Options{})
	e.login()
	resp, b := e.get("/services/oauth2/userinfo")
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if resp.StatusCode != http.StatusOK || m["organization_id"] != e.org.OrgID() || m["preferred_username"] != testUser ||
		m["user_id"] != e.org.mustUser(t, testUser) || !strings.HasSuffix(m["sub"].(string), "/id/"+e.org.OrgID()+"/"+m["user_id"].(string)) {
		t.Errorf("userinfo %d %v", resp.StatusCode, m)
	}
	resp, _ = e.get("/id/" + e.org.OrgID() + "/" + e.org.mustUser(t, testUser))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("identity URL: %d", resp.StatusCode)
	}
	e.org.ExpireSessions()
	resp, b = e.get("/services/oauth2/userinfo")
	if resp.StatusCode != http.StatusForbidden || string(b) != "Bad_OAuth_Token" {
		t.Errorf("dead token: %d %s", resp.StatusCode, b)
	}
	// An app without the openid scope: a bare 403.
	must[struct{}](t)(struct{}{}, e.org.AddConnectedApp(ConnectedApp{ClientID: "api-only", PublicKey: &key.PublicKey,
		PreAuthorized: []string{testUser}, Scopes: []string{"api", "refresh_token"}}))
	c := e.claims()
	c["iss"] = "api-only"
	_, tm := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(t, key, c)}})
	e.token = tm["access_token"].(string)
	resp, b = e.get("/services/oauth2/userinfo")
	if resp.StatusCode != http.StatusForbidden || string(b) == "Bad_OAuth_Token" {
		t.Errorf("no openid scope: %d %s", resp.StatusCode, b)
	}
	if resp, _ := e.get(ver + "/limits"); resp.StatusCode != http.StatusOK {
		t.Errorf("api scope token cannot call REST: %d", resp.StatusCode)
	}
}

func TestAPIDisabledAndVersions(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	if resp, _ := e.get("/services/data/v99.0/limits"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("future version: %d", resp.StatusCode)
	}
	if resp, _ := e.get("/services/data/v60.0/limits"); resp.StatusCode != http.StatusOK {
		t.Errorf("older version: %d", resp.StatusCode)
	}
	if resp, _ := e.get("/services/data/vlatest/limits"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bad version: %d", resp.StatusCode)
	}
	resp, b := e.get("/services/data/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"version":"62.0"`) {
		t.Errorf("versions: %d %s", resp.StatusCode, b)
	}
	noErr(t, e.org.SetPermissions(testUser, Permissions{ViewAllData: true}))
	code, _, ec := e.query("SELECT Id FROM User")
	if code != 403 || ec != CodeAPIDisabledForOrg {
		t.Errorf("API disabled: %d %s", code, ec)
	}
}

func TestSessionLookup(t *testing.T) {
	e := newEnv(t, Options{SessionLifetime: 10 * time.Minute})
	tok := e.login()
	perms := AllPermissions()
	perms.Topics = []string{"/event/LoginEventStream"}
	noErr(t, e.org.SetPermissions(testUser, perms))
	e.org.ResetCalls()
	s, ok := e.org.Session(tok)
	if !ok || s.OrgID != e.org.OrgID() || s.Username != testUser || s.UserID != e.org.mustUser(t, testUser) ||
		!s.Permissions.CanSubscribe("/event/LoginEventStream") || s.Permissions.CanSubscribe("/event/ApiEventStream") {
		t.Fatalf("Session: %+v %v", s, ok)
	}
	if e.org.TotalCalls() != 0 {
		t.Error("Session lookups are not requests")
	}
	e.clock.Advance(9 * time.Minute)
	if _, ok := e.org.Session(tok); !ok {
		t.Fatal("session expired early")
	}
	e.clock.Advance(9 * time.Minute) // slid by the previous lookup
	if _, ok := e.org.Session(tok); !ok {
		t.Fatal("lookup did not slide the session")
	}
	e.org.ExpireSessions()
	if _, ok := e.org.Session(tok); ok {
		t.Fatal("expired session still valid")
	}
	if _, ok := e.org.Session("nope"); ok {
		t.Fatal("unknown token valid")
	}
}
