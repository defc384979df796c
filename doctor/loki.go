package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
)

// TestSource is the source label of doctor's test entry: filter it out with
// {source!="sf2loki-doctor"}, or find it with {source="sf2loki-doctor"}.
const TestSource = "sf2loki-doctor"

// Pusher pushes entries to Loki; *loki.Client implements it.
type Pusher interface {
	Push(ctx context.Context, entries []loki.Entry) loki.Result
}

// Loki is the receiver to check.
type Loki struct {
	// Client pushes the test entry. When nil, ClientErr says why it could not be built.
	Client    Pusher
	ClientErr error
	// URL is the push URL, for messages.
	URL string
	// Labels are the static stream labels every entry carries (sink.loki.labels).
	Labels map[string]string
	// Run identifies this doctor run in the test entry (structured metadata doctor_run).
	Run string
	// Now is the clock of the entry's timestamp. Default time.Now.
	Now func() time.Time
}

// LokiCheck returns the check that pushes one test entry carrying structured metadata, the way
// every real entry is pushed.
func LokiCheck(l Loki) Check {
	return Check{ID: "loki.write", Title: "Loki test write with structured metadata", Run: l.check}
}

// TestEntry is the entry doctor pushes.
func (l Loki) TestEntry() loki.Entry {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	pairs := []loki.Label{}
	for k, v := range l.Labels {
		pairs = append(pairs, loki.Label{Name: k, Value: v})
	}
	pairs = append(pairs, loki.Label{Name: "source", Value: TestSource})
	line, _ := json.Marshal(map[string]string{
		"message":    "sf2loki doctor test write; safe to ignore",
		"doctor_run": l.Run,
	})
	return loki.Entry{
		Timestamp: now(),
		Labels:    loki.NewLabels(pairs...),
		Line:      string(line),
		Metadata:  []loki.Label{{Name: "doctor_run", Value: l.Run}},
	}
}

func (l Loki) check(ctx context.Context) Result {
	if l.Client == nil {
		return Fail("fix sink.loki (sf2loki config check)", "cannot build the Loki client: %v", l.ClientErr)
	}
	e := l.TestEntry()
	res := l.Client.Push(ctx, []loki.Entry{e})
	switch {
	case len(res.Accepted) == 1:
		return Pass("pushed 1 entry with structured metadata to %s", l.URL).With(
			fmt.Sprintf("stream %s, doctor_run=%s; exclude it with {source!=%q}", e.Labels, l.Run, TestSource))
	case len(res.Rejected) == 1:
		rej := res.Rejected[0]
		low := strings.ToLower(rej.Detail)
		switch {
		case strings.Contains(low, "structured metadata") || strings.Contains(low, "structured_metadata"):
			return Fail("enable structured metadata on the receiver: Loki 3.x with limits_config.allow_structured_metadata: true on a TSDB schema v13 period (older Loki cannot store it)",
				"the receiver refuses structured metadata (HTTP %d): %s", rej.Status, truncate(rej.Detail, 300))
		case rej.Reason == loki.ReasonInvalidLabels:
			return Fail("fix sink.loki.labels / sink.loki.extra_labels", "the label guard refused the test entry: %s", rej.Detail)
		default:
			return Fail("check the receiver's limits (limits_config) against the error above",
				"the receiver rejected the test entry (%s, HTTP %d): %s", rej.Reason, rej.Status, truncate(rej.Detail, 300))
		}
	}
	err := res.Err
	var se *loki.StatusError
	switch {
	case errors.Is(err, loki.ErrAuth):
		return Fail("check sink.loki.username / password_file / bearer_token_file and sink.loki.tenant_id (X-Scope-OrgID)", "the receiver refused the credentials: %v", err)
	case errors.As(err, &se) && se.StatusCode == http.StatusNotFound:
		return Fail("set sink.loki.url to the full push URL: https://HOST/loki/api/v1/push (VictoriaLogs: /insert/loki/api/v1/push)", "%s answered 404: %v", l.URL, err)
	case errors.Is(err, loki.ErrNotIngested):
		return Fail("the receiver accepted the request but did not ingest it (HTTP 260: ingestion blocked); check the tenant's limits", "%v", err)
	case errors.Is(err, loki.ErrUnavailable), ctx.Err() != nil:
		return Fail("check sink.loki.url, DNS, TLS (sink.loki.tls) and firewalls between this host and the receiver", "cannot reach %s: %v", l.URL, err)
	default:
		return Fail("check sink.loki", "the test write failed: %v", err)
	}
}
