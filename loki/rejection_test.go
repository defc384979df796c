package loki

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// TestRejectionReasonReadPastLongStreamLabels: Loki's distributor names the stream before the
// reason ("entry for stream '{…}' has timestamp too old: …, oldest acceptable timestamp is: …"),
// and a stream's labels may take tens of KiB within Loki's limits. The reason must be read past
// them: a too-old entry reported as bad_request is not restampable, and the job drops it instead
// of pushing it again with a timestamp from the cutoff, which the detail must keep too.
func TestRejectionReasonReadPastLongStreamLabels(t *testing.T) {
	long := func(n int) string { return "/apex/" + strings.Repeat("p", n-6) }
	cases := []struct {
		name   string
		labels Labels
	}{
		{"one long label value", lbl("job", "sf2loki", "event_type", "URI", "uri", long(1100))},
		{"labels at Loki's value limit", lbl("job", "sf2loki", "event_type", "URI", "uri", long(2048),
			"page", long(2048), "referrer", long(2048), "client", long(2048), "route", long(2048))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := simloki.New(simloki.Options{RejectOldSamplesMaxAge: time.Hour})
			c := newClient(t, srv, func(o *Options) {
				o.Limits = Limits{MaxAge: -1} // the receiver is stricter than configured: only its answer tells
				o.Labels = LabelOptions{ExtraAllowed: []string{"uri", "page", "referrer", "client", "route"}}
			})
			es := []Entry{{Timestamp: time.Now().Add(-2 * time.Hour), Labels: tc.labels, Line: "old event", Ref: 1}}
			res := c.Push(context.Background(), es)
			if len(res.Rejected) != 1 || res.Rejected[0].Status != http.StatusBadRequest {
				t.Fatalf("rejected %+v, want the one entry rejected by the receiver", res.Rejected)
			}
			r := res.Rejected[0]
			if r.Reason != ReasonTooOld || !r.Reason.Restampable() {
				t.Fatalf("stream labels of %d bytes: the receiver refused the entry as too old, the client reports %q (restampable %v); detail ends %q",
					len(tc.labels.String()), r.Reason, r.Reason.Restampable(), r.Detail[max(0, len(r.Detail)-60):])
			}
			if _, ok := OldestAcceptable(r.Detail); !ok {
				t.Fatalf("the cutoff the receiver stated is missing from the detail (%d bytes)", len(r.Detail))
			}
		})
	}
}

// bodyOf400 answers every request with a 400 and a large body that names no reason of Loki's
// (a web application firewall's block page).
type bodyOf400 struct{ size int }

func (b bodyOf400) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	page := "<html>request blocked " + strings.Repeat("x", b.size) + "</html>"
	return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"text/html"}},
		Body: io.NopCloser(strings.NewReader(page)), Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// TestUnrecognizedRejectionIsQuotedShort: reading further into a 400's body for Loki's reason
// must not turn an unrelated page into a long detail (logged and dead-lettered per entry): a
// body that names no reason is quoted like any error, by its first bodyExcerptBytes.
func TestUnrecognizedRejectionIsQuotedShort(t *testing.T) {
	c := newClient(t, simloki.New(simloki.Options{}), func(o *Options) { o.Transport = bodyOf400{size: 1 << 20} })
	res := c.Push(context.Background(), batch(1))
	if len(res.Rejected) != 1 || res.Rejected[0].Reason != ReasonBadRequest {
		t.Fatalf("rejected %+v, want the entry rejected as bad_request", res.Rejected)
	}
	if d := res.Rejected[0].Detail; len(d) > bodyExcerptBytes || !strings.HasPrefix(d, "<html>request blocked") {
		t.Fatalf("detail of %d bytes starting %q, want the body's first %d bytes at most", len(d), d[:min(len(d), 30)], bodyExcerptBytes)
	}
}
