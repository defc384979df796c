package config

import (
	"fmt"
	"net"
	"regexp"
	"time"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// PubSubSource configures the Pub/Sub API source.
type PubSubSource struct {
	Enabled      bool        `yaml:"enabled" desc:"Subscribe to the configured topics."`
	Topics       []string    `yaml:"topics" example:"[/event/LoginEventStream, /event/Order_Event__e, /data/AccountChangeEvent]" desc:"Topics to ship: Real-Time Event Monitoring streams (/event/LoginEventStream), custom platform events (/event/X__e), Change Data Capture channels (/data/AccountChangeEvent); * adds every event stream the org has (minus categories another source ships). Per-topic sampling and labels: shape.types with the topic's name without /event/ or /data/ as type."`
	Endpoint     string      `yaml:"endpoint" default:"api.pubsub.salesforce.com:7443" desc:"Pub/Sub API host:port (a regional endpoint if your org uses one)."`
	MaxEvents    int         `yaml:"max_events" default:"1000" min:"1" desc:"N: the most events one topic ships per run; the topic's pull stops there (or on idle, or at the run's deadline). Stopped at N, the topic's key leaves the run not caught_up: it is listed under waiting in the run report, and the next run goes on after the last event shipped."`
	NumRequested int         `yaml:"num_requested" default:"100" min:"1" desc:"Most events outstanding on one subscription (1-100, Salesforce's cap); more are requested as they arrive."`
	Idle         Duration    `yaml:"idle" default:"5s" desc:"A topic's pull ends when nothing arrived for this long (Salesforce's keepalives come only every ~270s)."`
	RefreshAfter Duration    `yaml:"refresh_after" default:"24h" desc:"When a topic's stored replay id has not advanced for this long, the run waits (up to its deadline) for a keepalive and commits its newer replay id, so a quiet topic never ages out of the ~72h retention; needs run.max_duration above ~5m to see a keepalive. 0 = never."`
	AgeWarning   Duration    `yaml:"age_warning" default:"48h" desc:"A topic's stored position older than this (a replay id that has not advanced, or a latest_at: a LATEST subscription that met no event, aged from the last run that found the topic quiet) adds a note to the run report and a doctor warning (check store.pubsub); past the ~72h retention the position is lost and replay_lost applies (doctor fails with replay_lost: fail)."`
	ReplayLost   string      `yaml:"replay_lost" default:"fail" enum:"fail|earliest|latest" desc:"When Salesforce refuses a stored replay id (expired after ~72h, or an org migration), or a stored latest_at (a quiet topic started at latest) is older than ~72h: fail (exit 7, nothing committed for the topic, a human decides), earliest (resume from the oldest retained event: duplicates, and custom events/CDC count against the delivery allocation) or latest (resume from now: the events between the refused id and the fallback are lost). Both fallbacks log a warning, count replay_fallback and note in the run report that events may have been missed."`
	Start        PubSubStart `yaml:"start" default:"earliest" desc:"Where a topic without a stored replay id starts: earliest (what Salesforce still retains, ~72h), latest (the events published from the first run's subscription on, less a 5-minute margin for clock skew), or an RFC 3339 time: subscribe at earliest and skip (count before_start, advance) the events older than it, since Pub/Sub cannot start at a time. Ignored once the topic has a stored position (a replay id, or latest_at)."`
	Plaintext    bool        `yaml:"plaintext" desc:"Talk to the endpoint without TLS: only for a loopback endpoint (the simulated org of sf2loki demo)."`
	TLS          TLS         `yaml:"tls" desc:"TLS settings for the Pub/Sub endpoint (ca_file, server_name, insecure_skip_verify)."`
}

// topicRE is a Pub/Sub topic name.
var topicRE = regexp.MustCompile(`^/(event|data)/[A-Za-z0-9_]+$`)

// pubsubRetention is Salesforce's replay retention for platform events and CDC.
const pubsubRetention = 72 * time.Hour

// PubSubStart is the start key of the Pub/Sub source: earliest, latest or an RFC 3339 time.
type PubSubStart string

// Preset returns the subscription start and, for a time, the time before which events are
// skipped (zero otherwise).
func (p PubSubStart) Preset() (pubsub.Start, time.Time) {
	switch p {
	case "", "earliest":
		return pubsub.StartEarliest, time.Time{}
	case "latest":
		return pubsub.StartLatest, time.Time{}
	}
	return pubsub.StartEarliest, Time(p).T()
}

func validatePubSub(s PubSubSource, path string, errs *Errors) {
	if s.Start != "earliest" && s.Start != "latest" {
		if _, err := parseTime(string(s.Start)); err != nil || s.Start == "" {
			msg := fmt.Sprintf("%q is not earliest, latest or an RFC 3339 time (such as 2024-06-01T00:00:00Z)", s.Start)
			if sug := suggest(string(s.Start), []string{"earliest", "latest"}); sug != "" {
				msg += fmt.Sprintf("; did you mean %q?", sug)
			}
			errs.add(path+".start", "%s", msg)
		}
	}
	if !s.Enabled {
		return
	}
	if len(s.Topics) == 0 {
		errs.add(path+".topics", "is required: list the topics to ship (/event/LoginEventStream, /data/AccountChangeEvent, ...) or * for the org's event streams")
	}
	seen := map[string]bool{}
	for i, t := range s.Topics {
		p := fmt.Sprintf("%s.topics[%d]", path, i)
		switch {
		case t == shape.Wildcard:
		case !topicRE.MatchString(t):
			errs.add(p, "%q is not a topic name like /event/LoginEventStream, /event/Order_Event__e or /data/AccountChangeEvent", t)
		case seen[t]:
			errs.add(p, "%q is listed twice", t)
		}
		seen[t] = true
	}
	if host, port, err := net.SplitHostPort(s.Endpoint); err != nil || host == "" || port == "" {
		errs.add(path+".endpoint", "%q is not host:port (e.g. api.pubsub.salesforce.com:7443)", s.Endpoint)
	} else if s.Plaintext && !isLoopback(host) {
		errs.add(path+".plaintext", "plaintext gRPC is only allowed to a loopback endpoint, not %s", host)
	}
	if s.NumRequested > 100 {
		errs.add(path+".num_requested", "%d is above Salesforce's cap of 100 outstanding events", s.NumRequested)
	}
	if s.Idle == 0 {
		errs.add(path+".idle", "must be positive")
	}
	if s.RefreshAfter.D() >= pubsubRetention {
		errs.add(path+".refresh_after", "%s is not below Salesforce's ~72h retention: a quiet topic's replay id would expire before it is refreshed", s.RefreshAfter)
	}
	if s.TLS.CertFile != "" || s.TLS.KeyFile != "" {
		errs.add(path+".tls.cert_file", "client certificates are not supported by the Pub/Sub API")
	}
}

// claims lists the configured topics for the overlap guard (the wildcard included).
func (s PubSubSource) claims(path string) []shape.Claim {
	if !s.Enabled {
		return nil
	}
	out := make([]shape.Claim, 0, len(s.Topics))
	for i, t := range s.Topics {
		out = append(out, shape.Claim{Source: "pubsub", Name: t, Path: fmt.Sprintf("%s.topics[%d]", path, i)})
	}
	return out
}
