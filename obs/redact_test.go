package obs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestScrub(t *testing.T) {
	r := NewRedactor("hunter2-password", "", "abc")
	cases := []struct{ in, mustNot, must string }{
		{"push to https://bob:s3cret@loki.example.com/loki/api/v1/push failed", "s3cret", "https://xxxxx@loki.example.com"},
		{"GET https://x.my.salesforce.com/services/oauth2/userinfo?access_token=00Dabc!tok&x=1", "00Dabc!tok", "x=1"},
		{"login with hunter2-password rejected", "hunter2-password", Redacted},
		{"Authorization: Bearer 00D5g000004abcdef!AQ8AQKs", "00D5g000004abcdef", "Bearer " + Redacted},
		{"a plain message about abc", "", "abc"}, // too short to be treated as a secret
	}
	for _, c := range cases {
		got := r.Scrub(c.in)
		if c.mustNot != "" && strings.Contains(got, c.mustNot) {
			t.Errorf("Scrub(%q) = %q still contains %q", c.in, got, c.mustNot)
		}
		if !strings.Contains(got, c.must) {
			t.Errorf("Scrub(%q) = %q, want it to contain %q", c.in, got, c.must)
		}
	}
}

func TestScrubPEMLines(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"
	r := NewRedactor(key)
	if got := r.Scrub("parse error near MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"); strings.Contains(got, "MIIEvQIBADANBgkq") {
		t.Errorf("a line of the key leaked: %q", got)
	}
}

func TestLoggerScrubsAttributesAndMessage(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, err := NewLogger(&buf, LogOptions{Level: "debug", Format: format, Redactor: NewRedactor("tok-very-secret")})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("using tok-very-secret now", "url", "https://u:p4ss@h.example.com/x", "err", errors.New("bad tok-very-secret"))
		out := buf.String()
		for _, leak := range []string{"tok-very-secret", "p4ss"} {
			if strings.Contains(out, leak) {
				t.Errorf("%s log leaks %q: %s", format, leak, out)
			}
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%s log has no redaction marker: %s", format, out)
		}
	}
}

func TestScrubErrorKeepsChain(t *testing.T) {
	base := errors.New("dial https://a:secretpw@host.example.com: refused")
	err := NewRedactor().ScrubError(base)
	if strings.Contains(err.Error(), "secretpw") || !errors.Is(err, base) {
		t.Errorf("ScrubError = %v (is base: %v)", err, errors.Is(err, base))
	}
}

func TestParseLevel(t *testing.T) {
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("want an error for an unknown level")
	}
	if _, err := NewLogger(&bytes.Buffer{}, LogOptions{Format: "xml"}); err == nil {
		t.Error("want an error for an unknown format")
	}
}

// Every way a credential rides in a URL is removed, and a redacted URL is left as it is.
func TestRedactURLForms(t *testing.T) {
	const secret = "Sekr3t-value-42"
	forms := []string{
		"https://bob:" + secret + "@loki.example.com/loki/api/v1/push",
		"https://loki.example.com/push?token=" + secret,
		"https://loki.example.com/push?x=1&access_token=" + secret,
		"https://loki.example.com/push?api_key=" + secret + "&y=2",
		"https://loki.example.com/push?apikey=" + secret,
		"https://loki.example.com/push?refresh_token=" + secret,
		"https://bucket.s3.amazonaws.com/k?X-Amz-Security-Token=" + secret + "&X-Amz-Signature=" + secret,
		"https://storage.googleapis.com/b/o?X-Goog-Signature=" + secret,
		"https://loki.example.com/push?password=" + secret,
		"https://loki.example.com/push?client_secret=" + secret,
		"https://login.example.com/callback#access_token=" + secret + "&state=x",
		"https://login.example.com/callback#id_token=" + secret,
		"https://x.my.salesforce.com/secur/frontdoor.jsp?sid=" + secret + "&retURL=%2Fhome",
		"https://login.example.com/token?client_assertion=" + secret + "&grant_type=x",
		"https://login.example.com/token?assertion=" + secret,
		"https://login.example.com/token?jwt=" + secret,
		"https://loki.example.com/push?pass=" + secret,
	}
	for _, u := range forms {
		got := RedactURL(u)
		if strings.Contains(got, secret) {
			t.Errorf("RedactURL(%q) = %q", u, got)
		}
		if again := RedactURL(got); again != got {
			t.Errorf("redacting %q again changed it to %q", got, again)
		}
		if scrubbed := NewRedactor().Scrub(`{"error":"Post \"` + u + `\": refused"}`); strings.Contains(scrubbed, secret) || !strings.HasSuffix(scrubbed, `\": refused"}`) {
			t.Errorf("inside a JSON string: %q", scrubbed)
		}
	}
	if u := "https://loki.example.com/push?query=up&limit=5"; RedactURL(u) != u {
		t.Errorf("a URL without credentials changed: %q", RedactURL(u))
	}
}

// A registered secret is found however it was encoded on the way out: inside a JSON string (HTML
// escaping or not), a quoted Go string, a URL.
func TestScrubFindsEncodedSecrets(t *testing.T) {
	secret := "p&ss<w>rd\"quoted\\slash\nsecond-line-of-the-secret"
	r := NewRedactor(secret)
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"e": secret})
	html, _ := json.Marshal(map[string]string{"e": secret})
	for _, out := range []string{string(html), plain.String(), strconv.Quote(secret), url.QueryEscape(secret), url.PathEscape(secret)} {
		if got := r.Scrub(out); strings.Contains(got, "ss<w>rd") || strings.Contains(got, `ss\u003cw\u003erd`) || strings.Contains(got, "ss%3Cw%3Erd") {
			t.Errorf("Scrub(%s) = %s", out, got)
		}
	}
}

// The Writer scrubs what passes through it and tells what it wraps.
func TestWriterScrubs(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, NewRedactor("tok-very-secret"))
	n, err := w.Write([]byte("using tok-very-secret at https://u:pw12345@h.example.com/x\n"))
	if err != nil || n != len("using tok-very-secret at https://u:pw12345@h.example.com/x\n") {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if out := buf.String(); strings.Contains(out, "tok-very-secret") || strings.Contains(out, "pw12345") {
		t.Errorf("written: %q", out)
	}
	if w.Unwrap() != &buf {
		t.Error("Unwrap does not return the wrapped writer")
	}
}

// TestQuotesAsIsHoldsForEveryByte checks the shortcut of encodings: a value quotesAsIs accepts
// is written unchanged by the JSON encoder (with and without HTML escaping) and strconv.Quote,
// so the forms it skips would have been the value itself. Every byte is tried, alone and inside
// a PEM line.
func TestQuotesAsIsHoldsForEveryByte(t *testing.T) {
	const line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
	if !quotesAsIs(line) {
		t.Fatalf("a PEM line should take the shortcut")
	}
	accepted := 0
	for c := range 256 {
		for _, s := range []string{string([]byte{byte(c)}), line[:20] + string([]byte{byte(c)}) + line[20:]} {
			if !quotesAsIs(s) {
				continue
			}
			accepted++
			var b strings.Builder
			enc := json.NewEncoder(&b)
			for _, html := range []bool{true, false} {
				b.Reset()
				enc.SetEscapeHTML(html)
				if err := enc.Encode(s); err != nil {
					t.Fatal(err)
				}
				if got := unquote(b.String()); got != s {
					t.Errorf("byte %#x: JSON (HTML escaping %v) writes %q as %q", c, html, s, got)
				}
			}
			if got := unquote(strconv.Quote(s)); got != s {
				t.Errorf("byte %#x: strconv.Quote writes %q as %q", c, s, got)
			}
		}
	}
	if accepted != 2*(0x7f-0x20-5) {
		t.Errorf("%d values took the shortcut, want the %d with a printable byte other than \"\\<>&", accepted, 2*(0x7f-0x20-5))
	}
}

// TestAddTwiceRegistersOnce: registering the same secret again changes nothing.
func TestAddTwiceRegistersOnce(t *testing.T) {
	pem := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nq/+x=<&>\"\\ long enough\n-----END PRIVATE KEY-----\n"
	r := NewRedactor(pem)
	before := append([]string(nil), r.secrets...)
	r.Add(pem)
	if strings.Join(r.secrets, "\x00") != strings.Join(before, "\x00") {
		t.Fatalf("a second Add changed the forms:\n%q\n%q", before, r.secrets)
	}
	for _, form := range []string{"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", url.QueryEscape("q/+x=<&>\"\\ long enough"), `q/+x=\u003c\u0026\u003e\"\\ long enough`} {
		if !r.known[form] {
			t.Errorf("form %q not registered", form)
		}
	}
}

// Redaction fails closed: a URL the parser rejects (a bad escape or port, a password with
// characters a URL does not allow) or a query whose pairs it drops still loses its
// credentials, by their shape.
func TestRedactURLFailsClosed(t *testing.T) {
	const secret = "Sekr3t-value-42"
	cases := []struct{ in, want string }{
		// a '%' that is not an escape
		{"https://grafana-user:50%off-" + secret + "@logs.example.net/loki/api/v1/push", "https://xxxxx@logs.example.net/loki/api/v1/push"},
		// a port that is not a number
		{"https://user:" + secret + "@loki.example.net:31OO/push?token=" + secret, "https://xxxxx@loki.example.net:31OO/push?token=xxxxx"},
		// a password holding '/', '#' and '@'
		{"https://user:a/b#c@" + secret + "@host.example.net/x", "https://xxxxx@host.example.net/x"},
		// ';' makes the query parser drop the pair
		{"https://x.my.salesforce.com/cb?a=1;access_token=" + secret, "https://x.my.salesforce.com/cb?a=1;access_token=xxxxx"},
		// a name that does not decode cannot be told harmless
		{"https://host.example.net/x?a=1&to%zzken=" + secret + "&b=2", "https://host.example.net/x?a=1&to%zzken=xxxxx&b=2"},
		// an '@' in the query of a URL that does not parse: the parameters after it still count
		{"https://host.example.net:31OO/x?email=a@b.example&sid=" + secret, "https://xxxxx@b.example&sid=xxxxx"},
		{"https://host.example.net:31OO/cb#state=1&access_token=" + secret, "https://host.example.net:31OO/cb#state=1&access_token=xxxxx"},
	}
	for _, c := range cases {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := RedactURL(got); again != got {
			t.Errorf("redacting %q again changed it to %q", got, again)
		}
		if scrubbed := NewRedactor().Scrub(`sink.loki.url: "` + c.in + `" is not an absolute http(s) URL`); strings.Contains(scrubbed, secret) {
			t.Errorf("Scrub leaves the credential in: %q", scrubbed)
		}
	}
}

// The credential of an Authorization or Proxy-Authorization header is scrubbed whatever its
// scheme and however the header was written out, registered as a secret or not; the scheme
// and what surrounds the header stay.
func TestScrubAuthorizationHeaders(t *testing.T) {
	const cred = "c2VrcmV0LWNyZWQ6cHc9PQ" // base64-like, as a Basic credential is
	cases := []struct{ in, want string }{
		{"Authorization: Basic " + cred + "==", "Authorization: Basic [REDACTED]"},
		{`401 from proxy, request headers: {"Authorization":"Basic ` + cred + `","Accept":"*/*"}`,
			`401 from proxy, request headers: {"Authorization":"Basic [REDACTED]","Accept":"*/*"}`},
		{`{"error":"echo {\"authorization\":\"Token ` + cred + `\",\"x\":1}"}`,
			`{"error":"echo {\"authorization\":\"Token [REDACTED]\",\"x\":1}"}`},
		{"map[Accept:[*/*] Authorization:[Bearer " + cred + "]]", "map[Accept:[*/*] Authorization:[Bearer [REDACTED]]]"},
		{`http.Header{"Proxy-Authorization":[]string{"Basic ` + cred + `"}}`, `http.Header{"Proxy-Authorization":[]string{"Basic [REDACTED]"}}`},
		{"Proxy-Authorization: Digest username=\"bob\", realm=\"r\", nonce=\"n1\", response=\"" + cred + "\"\r\nHost: h",
			"Proxy-Authorization: Digest [REDACTED]\r\nHost: h"},
		{`{"Authorization":"Digest username=\"bob\", response=\"` + cred + `\"","Host":"h"}`,
			`{"Authorization":"Digest [REDACTED]","Host":"h"}`},
		{"Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + cred,
			"Authorization: AWS4-HMAC-SHA256 [REDACTED]"},
		{`level=WARN msg=retry authorization="Negotiate ` + cred + `" attempt=2`, `level=WARN msg=retry authorization="Negotiate [REDACTED]" attempt=2`},
		// an unknown scheme cannot be told from the credential: both go
		{"Authorization: Custom " + cred, "Authorization: [REDACTED]"},
		{"AuthorizationHeaderMalformed: the authorization header is malformed", "AuthorizationHeaderMalformed: the authorization header is malformed"},
	}
	r := NewRedactor()
	for _, c := range cases {
		got := r.Scrub(c.in)
		if got != c.want {
			t.Errorf("Scrub(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
		if again := r.Scrub(got); again != got {
			t.Errorf("scrubbing %q again changed it to %q", got, again)
		}
	}

	var buf bytes.Buffer
	log, err := NewLogger(&buf, LogOptions{Format: "json", Redactor: r})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("request", "Authorization", "Basic "+cred)
	if out := buf.String(); strings.Contains(out, cred) || !strings.Contains(out, `"Authorization":"Basic [REDACTED]"`) {
		t.Errorf("an Authorization attribute is logged as %s", out)
	}
}

// A registered password is found inside a basic-auth credential, base64("user:password"), even
// away from its header and whatever the user: only characters that encode the user are left.
func TestScrubBasicAuthOfARegisteredPassword(t *testing.T) {
	const password = "lokiPassw0rd-42"
	r := NewRedactor(password)
	for _, user := range []string{"", "1", "12", "123", "loki-user", "1234567"} { // every alignment
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			cred := enc.EncodeToString([]byte(user + ":" + password))
			got := r.Scrub("credential " + cred + " refused")
			left, ok := strings.CutPrefix(got, "credential ")
			left, _, found := strings.Cut(left, Redacted)
			if !ok || !found || !strings.HasPrefix(base64.RawStdEncoding.EncodeToString([]byte(user+":")), left) {
				t.Errorf("user %q: Scrub(%q) = %q: what is left must encode the user only", user, cred, got)
			}
		}
	}
	if got := r.Scrub("data: " + base64.StdEncoding.EncodeToString([]byte(password))); strings.Contains(got, base64.RawStdEncoding.EncodeToString([]byte(password))) {
		t.Errorf("the base64 of the password is left in: %q", got)
	}
}

// An '@' the parser did not read as the end of a userinfo may still end one: a password holding
// '/', '?' or '#' ends the authority early, and when what precedes reads as host:port the URL
// parses (https://user:12/x@host is host "user", port 12, path "/x@host"). Such an '@' with a ':'
// before it is taken for the end of the userinfo, and the userinfo before it is redacted whole.
func TestRedactURLAtOutsideParsedUserinfoIsRedacted(t *testing.T) {
	const secret = "Sekr3t-value-42"
	cases := []struct{ in, want string }{
		// the password reads as a port, the rest as a path, a query or a fragment
		{"https://user:12/x" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://user:12?" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://user:12#" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://user:/" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		// a port that is not a number: the URL does not parse
		{"https://user:pa?" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://user:pa#" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		// a password holding '@': the parser finds part of it, or all of it
		{"https://user:p@" + secret + "/x@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://user:p@" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://user:" + secret + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		// an '@' in the query of a URL that does not parse, no ':' before it: the parameters
		// before it count too
		{"https://host.example.net/x%zz?token=" + secret + "&email=a@b.example", "https://host.example.net/x%zz?token=xxxxx&email=a@b.example"},
		{"https://host.example.net/x?token=" + secret + "&email=a@b.example", "https://host.example.net/x?token=xxxxx&email=a@b.example"},
	}
	for _, c := range cases {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := RedactURL(got); again != got {
			t.Errorf("redacting %q again changed it to %q", got, again)
		}
		if scrubbed := NewRedactor().Scrub("push to " + c.in + " failed"); strings.Contains(scrubbed, secret) {
			t.Errorf("Scrub leaves the credential in: %q", scrubbed)
		}
	}
	// No ':' before the '@': no password can be there, the URL stays as it is.
	for _, u := range []string{"https://loki.example.com/users/a@b.example/x?limit=5", "https://loki.example.com/x?email=a@b.example"} {
		if got := RedactURL(u); got != u {
			t.Errorf("RedactURL(%q) = %q, want it unchanged", u, got)
		}
	}
}

// A URL's whole userinfo is redacted, the username too: some services take a token as the
// username (https://TOKEN@host, https://TOKEN:@host, https://TOKEN:x-oauth-basic@host). This holds
// for a URL that parses, one that does not, and one whose '@' the parser read past the authority.
func TestRedactURLRedactsUsername(t *testing.T) {
	const token = "ghp_T0kenValue42abcdef"
	cases := []struct{ in, want string }{
		// the URL parses
		{"https://" + token + "@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://" + token + ":@loki.example.com/loki/api/v1/push", "https://xxxxx@loki.example.com/loki/api/v1/push"},
		{"https://" + token + ":x-oauth-basic@github.example.com/org/repo.git", "https://xxxxx@github.example.com/org/repo.git"},
		{"https://" + token + ":pw-42@loki.example.com/push?token=" + token, "https://xxxxx@loki.example.com/push?token=xxxxx"},
		{"https://" + token + "@loki.example.com", "https://xxxxx@loki.example.com"},
		// redacted by an earlier version, which kept the username
		{"https://" + token + ":xxxxx@loki.example.com/push", "https://xxxxx@loki.example.com/push"},
		// the URL does not parse (a port that is not a number, a '%' that is not an escape)
		{"https://" + token + "@loki.example.net:31OO/push", "https://xxxxx@loki.example.net:31OO/push"},
		{"https://" + token + ":@loki.example.net:31OO/push", "https://xxxxx@loki.example.net:31OO/push"},
		{"https://" + token + ":50%off@loki.example.net/push", "https://xxxxx@loki.example.net/push"},
		{"https://" + token + "@loki.example.net/x%zz?email=a@b.example", "https://xxxxx@loki.example.net/x%zz?email=a@b.example"},
		// an '@' the parser read past the authority
		{"https://" + token + ":12/x@loki.example.com/push", "https://xxxxx@loki.example.com/push"},
		{"https://" + token + ":p@q/x@loki.example.com/push", "https://xxxxx@loki.example.com/push"},
	}
	for _, c := range cases {
		got := RedactURL(c.in)
		if got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := RedactURL(got); again != got {
			t.Errorf("redacting %q again changed it to %q", got, again)
		}
		for _, in := range []string{"push to " + c.in + " failed", `{"error":"Post \"` + c.in + `\": refused"}`} {
			if scrubbed := NewRedactor().Scrub(in); strings.Contains(scrubbed, token) || !strings.Contains(scrubbed, "xxxxx@") {
				t.Errorf("Scrub(%q) = %q", in, scrubbed)
			}
		}
	}
	// Nothing to hide: no userinfo, an empty one, or one already redacted.
	for _, u := range []string{"https://loki.example.com/push", "https://@loki.example.com/push", "https://xxxxx@loki.example.com/push",
		"https://xxxxx@loki.example.net:31OO/push"} {
		if got := RedactURL(u); got != u {
			t.Errorf("RedactURL(%q) = %q, want it unchanged", u, got)
		}
	}
}
