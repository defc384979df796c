package obs

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Redacted replaces a secret wherever one is scrubbed.
const Redacted = "[REDACTED]"

// Redactor scrubs registered secret values, the credentials embedded in URLs (userinfo and
// token-like query parameters) and those of Authorization headers from strings. It is safe for
// concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first, so a secret containing another is replaced whole
	known   map[string]bool
	added   map[string]bool // the values whose encodings are registered
}

// NewRedactor returns a Redactor that knows the given secrets (empty values are ignored).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers more secret values. Values shorter than 4 bytes are ignored: scrubbing them would
// mangle ordinary text without protecting anything. Each value is also registered as it looks
// inside a JSON string, a quoted Go string, a URL and a basic-auth credential, so it is found in
// a run report, a quoted log attribute or a logged request header too.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.known == nil {
		r.known, r.added = map[string]bool{}, map[string]bool{}
	}
	add := func(v string) {
		// A process registers its secrets more than once (the configuration's, then the
		// logger's); each value's encodings are made once.
		if r.added[v] {
			return
		}
		r.added[v] = true
		for _, form := range encodings(v) {
			if len(form) >= 4 && !r.known[form] {
				r.known[form] = true
				r.secrets = append(r.secrets, form)
			}
		}
	}
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		add(s)
		// A multi-line secret (a PEM key) may be logged one line at a time.
		for _, line := range strings.Split(s, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				add(line)
			}
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// encodings returns s as written raw, inside a JSON string (with and without HTML escaping),
// inside a quoted Go string, escaped in a URL query or path, and in base64 as the password of
// HTTP basic auth.
func encodings(s string) []string {
	out := append([]string{s}, basicAuth(s)...)
	if quotesAsIs(s) { // a line of a PEM key, a token: only the URL escapes can differ
		return append(out, url.QueryEscape(s), url.PathEscape(s))
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	_ = enc.Encode(s)
	out = append(out, unquote(b.String()))
	b.Reset()
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out = append(out, unquote(b.String()))
	out = append(out, unquote(strconv.Quote(s)), url.QueryEscape(s), url.PathEscape(s))
	return out
}

// basicAuth returns the forms password takes inside an HTTP basic-auth credential,
// base64("user:password"), whatever the user: base64 encodes 3 bytes at a time, so the password
// is encoded in one of three ways depending on where it starts in a group. Each form holds only
// characters that the user does not change (no padding: a credential may be written without
// it). The first is also the base64 of the password alone (a Kubernetes Secret's data).
func basicAuth(password string) []string {
	enc := base64.RawStdEncoding
	return []string{
		enc.EncodeToString([]byte(password)),               // the password starts a group
		enc.EncodeToString([]byte(":" + password)),         // the ':' does
		enc.EncodeToString([]byte("\x00:" + password))[2:], // the ':' is in the middle of one
	}
}

// quotesAsIs reports whether s is written unchanged inside a JSON string (with or without HTML
// escaping) and a quoted Go string: printable ASCII without a quote, a backslash or <>&.
func quotesAsIs(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// unquote strips the quotes (and the encoder's newline) around an encoded string.
func unquote(q string) string {
	q = strings.TrimSuffix(q, "\n")
	if len(q) >= 2 {
		return q[1 : len(q)-1]
	}
	return q
}

var (
	// urlRE stops at a backslash too, so a URL inside a JSON string ends before its escaped quote.
	urlRE = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>\\]+`)
	// sensitiveKey matches query parameters that carry credentials: any name containing token,
	// secret, password, key, signature, credential, assertion or jwt (access_token,
	// refresh_token, id_token, api_key, client_assertion, X-Amz-Security-Token,
	// X-Goog-Signature, ...), and a few exact names (sid: a Salesforce frontdoor session id).
	sensitiveKey = regexp.MustCompile(`(?i)(token|secret|passw|pwd|key|signature|credential|assertion|jwt|^(sig|sid|pass|auth|authorization|code|session)$)`)
	bearerRE     = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/!=-]{8,}`)
	// authHeaderRE finds an Authorization or Proxy-Authorization header name and what separates
	// it from its value, as written in a request, a JSON object (also one inside a JSON string),
	// a Go http.Header printed with %v or %#v, or a text log attribute.
	authHeaderRE = regexp.MustCompile(`(?i)\b(?:proxy-)?authorization(?:\\?["'])?\s*[:=]\s*(?:\[\]string\{)?\[?(?:\\?["'])?\s*`)
	// authSchemeRE is a known authentication scheme and the space after it: what follows is the
	// credential. A value that starts otherwise is redacted whole.
	authSchemeRE = regexp.MustCompile(`(?i)^(?:basic|bearer|digest|token|negotiate|ntlm|oauth|dpop|gnap|hoba|mutual|vapid|` +
		`privatetoken|concealed|scram-sha-1|scram-sha-256|aws4-hmac-sha256|apikey|ssws)\s+`)
	// authCredentialRE is a credential: a list of auth-params (Digest, AWS4-HMAC-SHA256:
	// name=token or name="quoted", the quotes escaped inside a JSON string) or a token68 (Basic,
	// Bearer and most others; one a registered secret was replaced in is still one).
	authCredentialRE = regexp.MustCompile(`^(?:` + authParam + `(?:\s*,\s*` + authParam + `)*|(?:[A-Za-z0-9._~+/!%:-]|` +
		regexp.QuoteMeta(Redacted) + `)+=*)`)
)

// authParam is one auth-param of a credential: name=token or name="quoted string".
const authParam = `[A-Za-z0-9_.-]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|\\"(?:[^"\\]|\\[^"])*\\"|[^\s,"'\\\]]+)`

// Scrub returns s with every registered secret, URL credential, Authorization header credential
// and bearer token replaced.
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
	lower := strings.ToLower(s)
	if strings.Contains(lower, "authorization") {
		s = scrubAuthorization(s)
	}
	if strings.Contains(lower, "bearer") {
		s = bearerRE.ReplaceAllString(s, "${1}"+Redacted)
	}
	return s
}

// scrubAuthorization replaces the credentials of the Authorization and Proxy-Authorization
// headers in s, whatever their scheme.
func scrubAuthorization(s string) string {
	locs := authHeaderRE.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	done := 0
	for _, loc := range locs {
		if loc[0] < done { // inside the value just redacted
			continue
		}
		if strings.HasPrefix(s[loc[1]-1:], Redacted) { // the separator took its '[': redacted before
			continue
		}
		start, end := authCredential(s[loc[1]:])
		if start == end {
			continue
		}
		b.WriteString(s[done : loc[1]+start])
		b.WriteString(Redacted)
		done = loc[1] + end
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// redactAuthorization returns an Authorization header's value with its credential replaced.
func redactAuthorization(v string) string {
	start, end := authCredential(v)
	if start == end {
		return v
	}
	return v[:start] + Redacted + v[end:]
}

// authCredential returns where the credential of an Authorization header value v starts and
// ends: after a known scheme, the credential that follows; otherwise the first word and, when
// another follows, that one too (an unknown scheme and its credential).
func authCredential(v string) (start, end int) {
	start = len(authSchemeRE.FindString(v))
	end = start + len(authCredentialRE.FindString(v[start:]))
	if start == 0 && end > 0 {
		if next := strings.TrimLeft(v[end:], " \t"); len(next) < len(v[end:]) {
			if n := len(authCredentialRE.FindString(next)); n > 0 {
				end = len(v) - len(next) + n
			}
		}
	}
	return start, end
}

// urlMask replaces a credential inside a URL.
const urlMask = "xxxxx"

// RedactURL replaces a URL's whole userinfo, username and password (some services take a token
// as the username: https://TOKEN@host, https://TOKEN:x-oauth-basic@host), with "xxxxx" and
// removes the values of token-like query (and fragment) parameters. It fails closed: a string
// that does not parse as a URL, or whose parsed authority may have been cut short by a password
// (see atPastAuthority), is redacted by its shape (the userinfo between the scheme and the host,
// the query and the fragment), never returned as it is. A URL with nothing to remove (also when
// it was redacted before) is returned unchanged.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || atPastAuthority(raw) {
		return redactURLShape(raw)
	}
	changed := false
	if u.User != nil && u.User.String() != urlMask {
		if p, _ := u.User.Password(); u.User.Username() != "" || p != "" {
			u.User = url.User(urlMask)
			changed = true
		}
	}
	if q, ok := redactQuery(u.RawQuery); ok {
		u.RawQuery, changed = q, true
	}
	// OAuth's implicit flow returns tokens in the fragment (#access_token=...).
	frag, fragChanged := redactQuery(u.EscapedFragment())
	if fragChanged {
		u.Fragment, u.RawFragment, changed = "", "", true
	}
	if !changed {
		return raw
	}
	out := u.String()
	if fragChanged {
		out += "#" + frag
	}
	return out
}

// atPastAuthority reports whether raw has an '@' after the authority a URL parser reads (which
// ends at the first '/', '?' or '#') with a ':' before it. A password may hold any of those
// three, and then the parser reads the start of the userinfo as a host (https://user:12/x@host
// is host "user", port 12, path "/x@host"): that '@' may end a userinfo the parser did not see.
func atPastAuthority(raw string) bool {
	i := strings.Index(raw, "://")
	if i < 0 {
		return false
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?#")
	at := strings.LastIndexByte(rest, '@')
	return end >= 0 && at > end && strings.IndexByte(rest[:at], ':') >= 0
}

// redactURLShape redacts a URL that does not parse (a bad escape or port, a password with
// characters a URL does not allow) or that may hold a userinfo its parse did not find: what
// looks like userinfo, whole, and sensitive parameters wherever they are.
func redactURLShape(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	head, rest := raw[:i+3], raw[i+3:]
	// The userinfo may end at any '@': a password may hold '@', '/', '?' and '#', so the last
	// one is taken when a ':' is before it. Without a ':' there is no password, and a username
	// holds none of '/', '?' and '#': the userinfo ends at the last '@' before the first of them,
	// and an '@' after it is read as part of a path, a query or a fragment.
	at := strings.LastIndexByte(rest, '@')
	if at >= 0 && strings.IndexByte(rest[:at], ':') < 0 {
		authority := rest
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			authority = rest[:end]
		}
		at = strings.LastIndexByte(authority, '@')
	}
	if at >= 0 && strings.Trim(rest[:at], ":") != "" { // an empty userinfo hides nothing
		head, rest = head+urlMask+"@", rest[at+1:]
	}
	// Where the query and the fragment start is not certain either (a '?' may have been taken
	// for the userinfo's): the rest is read as parameters, split at any of their separators.
	rest, _ = redactParams(rest, "?#&;")
	return head + rest
}

// redactQuery replaces the values of sensitive parameters of a query string; ok is false when
// there are none.
func redactQuery(raw string) (string, bool) { return redactParams(raw, "&;") }

// redactParams replaces, in place, the values of sensitive name=value pairs of raw, split at
// any byte of seps; ok is false when there are none. It fails closed where a query parser
// would drop a pair and keep the rest: ';' separates pairs as '&' does (a server may read
// "a=1;access_token=..." as two), and a pair whose name does not decode, so that it cannot
// tell whether the name is sensitive, has its value replaced too.
func redactParams(raw, seps string) (string, bool) {
	if raw == "" || !strings.Contains(raw, "=") {
		return raw, false
	}
	var b strings.Builder
	changed := false
	for pos := 0; pos <= len(raw); {
		end := strings.IndexAny(raw[pos:], seps)
		if end < 0 {
			end = len(raw)
		} else {
			end += pos
		}
		pair := raw[pos:end]
		if eq := strings.IndexByte(pair, '='); eq >= 0 && pair[eq+1:] != urlMask {
			name, err := url.QueryUnescape(pair[:eq])
			if err != nil || sensitiveKey.MatchString(name) || sensitiveKey.MatchString(pair[:eq]) {
				pair = pair[:eq+1] + urlMask
				changed = true
			}
		}
		b.WriteString(pair)
		if end < len(raw) {
			b.WriteByte(raw[end])
		}
		pos = end + 1
	}
	if !changed {
		return raw, false
	}
	return b.String(), true
}

// authHeaderName matches an attribute that holds an Authorization header's value alone.
var authHeaderName = regexp.MustCompile(`(?i)^(?:proxy-)?authorization$`)

func (r *Redactor) scrubAttr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); s != "" {
			scrubbed := r.Scrub(s)
			if authHeaderName.MatchString(a.Key) {
				scrubbed = redactAuthorization(scrubbed)
			}
			if scrubbed != s {
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

// Writer scrubs everything written through it. Each Write is scrubbed on its own, so callers
// write whole lines (fmt.Fprintf, a JSON encoder and the slog handlers do).
type Writer struct {
	w io.Writer
	r *Redactor
}

// NewWriter returns a Writer that scrubs with r before writing to w.
func NewWriter(w io.Writer, r *Redactor) *Writer { return &Writer{w: w, r: r} }

// Write writes p scrubbed; it reports len(p) written when the scrubbed text was.
func (w *Writer) Write(p []byte) (int, error) {
	in := string(p)
	out := w.r.Scrub(in)
	if out == in {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the underlying writer (to ask whether it is a terminal, say).
func (w *Writer) Unwrap() io.Writer { return w.w }
