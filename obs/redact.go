package obs

import (
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Redacted replaces a secret wherever one is scrubbed.
const Redacted = "[REDACTED]"

// Redactor scrubs registered secret values and the credentials embedded in URLs (userinfo and
// token-like query parameters) from strings. It is safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first, so a secret containing another is replaced whole
}

// NewRedactor returns a Redactor that knows the given secrets (empty values are ignored).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers more secret values. Values shorter than 4 bytes are ignored: scrubbing them would
// mangle ordinary text without protecting anything.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		r.secrets = append(r.secrets, s)
		// A multi-line secret (a PEM key) may be logged one line at a time.
		for _, line := range strings.Split(s, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				r.secrets = append(r.secrets, line)
			}
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

var (
	urlRE        = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	sensitiveKey = regexp.MustCompile(`(?i)^(access_token|token|password|passwd|secret|client_secret|assertion|sig|signature|api_key|apikey|key|x-amz-signature|x-amz-credential|x-amz-security-token)$`)
	bearerRE     = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/!=-]{8,}`)
)

// Scrub returns s with every registered secret, URL credential and bearer token replaced.
func (r *Redactor) Scrub(s string) string {
	if s == "" {
		return s
	}
	r.mu.RLock()
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	r.mu.RUnlock()
	if strings.Contains(s, "://") {
		s = urlRE.ReplaceAllStringFunc(s, RedactURL)
	}
	if strings.Contains(strings.ToLower(s), "bearer") {
		s = bearerRE.ReplaceAllString(s, "${1}"+Redacted)
	}
	return s
}

// RedactURL removes the password of a URL's userinfo and the values of token-like query
// parameters. A string that does not parse as a URL is returned unchanged.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	changed := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if sensitiveKey.MatchString(k) {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}

func (r *Redactor) scrubAttr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); s != "" {
			if scrubbed := r.Scrub(s); scrubbed != s {
				return slog.String(a.Key, scrubbed)
			}
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			if s := v.Error(); r.Scrub(s) != s {
				return slog.String(a.Key, r.Scrub(s))
			}
		case interface{ String() string }:
			if s := v.String(); r.Scrub(s) != s {
				return slog.String(a.Key, r.Scrub(s))
			}
		}
	}
	return a
}

// ScrubError returns an error whose message is scrubbed, keeping the original for errors.Is/As.
func (r *Redactor) ScrubError(err error) error {
	if err == nil {
		return nil
	}
	msg := r.Scrub(err.Error())
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
