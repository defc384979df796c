package obs

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestScrub(t *testing.T) {
	r := NewRedactor("hunter2-password", "", "abc")
	cases := []struct{ in, mustNot, must string }{
		{"push to https://bob:s3cret@loki.example.com/loki/api/v1/push failed", "s3cret", "bob:xxxxx@loki.example.com"},
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
