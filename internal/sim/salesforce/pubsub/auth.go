package pubsub

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// Credentials are the auth metadata of a call.
type Credentials struct {
	AccessToken string
	InstanceURL string
	TenantID    string
}

// Principal is who a valid call acts for.
type Principal struct {
	// OrgID is the session's 18-character org id (the call's tenantid must equal it).
	OrgID string
	// Topics are the topics the session may subscribe to; nil or a "*" entry means all.
	Topics []string
}

func (p Principal) canSubscribe(topic string) bool {
	if p.Topics == nil {
		return true
	}
	for _, t := range p.Topics {
		if t == "*" || t == topic {
			return true
		}
	}
	return false
}

// Authenticator validates a call's credentials; ok false answers UNAUTHENTICATED.
type Authenticator func(ctx context.Context, c Credentials) (p Principal, ok bool)

// HandlerAuthenticator validates access tokens against a simulated org's HTTP API, in process:
// the token must be a live session of the org (its /services/oauth2/userinfo does not answer
// 401 or Bad_OAuth_Token) and the tenantid must be orgID. Each check counts as one userinfo
// call of the org and slides the session's expiry, as any API use does on Salesforce.
//
// The simulated org does not (yet) export a session lookup; an Org method such as
// PubSubSession(token) (orgID string, perms Permissions, ok bool) would make this direct and
// carry the user's topic permissions.
func HandlerAuthenticator(h http.Handler, orgID string) Authenticator {
	return func(ctx context.Context, c Credentials) (Principal, bool) {
		if c.AccessToken == "" || c.TenantID != orgID {
			return Principal{}, false
		}
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://org.sim.invalid/services/oauth2/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+c.AccessToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusOK:
			var ui struct {
				OrganizationID string `json:"organization_id"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &ui) != nil || ui.OrganizationID != orgID {
				return Principal{}, false
			}
		case rec.Code == http.StatusForbidden && !strings.Contains(rec.Body.String(), "Bad_OAuth_Token"):
			// A live session without the openid scope: valid for the API.
		default:
			return Principal{}, false
		}
		return Principal{OrgID: orgID}, true
	}
}

// authenticate checks the call's metadata.
func (s *Server) authenticate(ctx context.Context) (Principal, error) {
	p, ok := s.check(ctx, credentialsOf(ctx))
	if !ok {
		s.stat(func(st *Stats) { st.Unauthenticated++ })
		return Principal{}, fail(ctx, codes.Unauthenticated, CodeAuthError, "Unauthenticated: the session is invalid or has expired")
	}
	return p, nil
}

func (s *Server) check(ctx context.Context, c Credentials) (Principal, bool) {
	if s.opts.Authenticate != nil {
		return s.opts.Authenticate(ctx, c)
	}
	if c.AccessToken == "" || (s.opts.OrgID != "" && c.TenantID != s.opts.OrgID) {
		return Principal{}, false
	}
	return Principal{OrgID: c.TenantID}, true
}

// incoming returns a lookup of the call's metadata.
func incoming(ctx context.Context) func(string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}
