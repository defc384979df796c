// Package pubsub is the Pub/Sub API source: Real-Time Event Monitoring streams
// (/event/LoginEventStream, /event/ApiAnomalyEvent, ...), custom platform events
// (/event/Order_Event__e) and Change Data Capture channels (/data/AccountChangeEvent) read as a
// bounded pull per run.
//
// Each topic is one checkpoint key, pubsub:<topic>, whose cursor holds the replay id to resume
// after (see Cursor). A run resumes there with CUSTOM, keeps at most num_requested (≤ 100)
// events outstanding, and stops the topic on the first of: max_events events, the idle period
// with nothing arriving, or the run's deadline. A topic stopped at max_events may have more
// events waiting: it ends with source.ErrWaiting, and the run is not caught up. Every event
// becomes one JSON line (the decoded Avro record, fields in schema order) with its replay id in
// structured metadata. Events that shaping drops, events whose payload does not decode, and
// keepalives carrying a newer latest_replay_id become Skip records: they advance the cursor
// without a log line.
//
// Replay ids age out after about 72 hours. A quiet topic's position would silently age towards
// that horizon, because Salesforce sends keepalives only every ~270 s, longer than the idle
// period: when a topic's position has not advanced for refresh_after, the run waits (up to its
// deadline) for a keepalive and commits the keepalive's id. The position's age is reported per
// topic (Source.Topics, the counter replay_id_age_seconds:<topic> and a note when it is old);
// for a cursor holding only Cursor.LatestAt, the age of the later of that moment and the last
// quiet look (Cursor.CheckedAt).
// A stored position Salesforce refuses follows replay_lost: fail (the run ends with the
// integrity outcome, exit 7, nothing more committed for the topic), earliest or latest (a
// warning, the counter replay_fallback and a note saying events may have been missed). A
// fallback that meets no event replaces the refused position: latest with the moment it
// subscribed (Cursor.LatestAt); earliest, when the pull ended idle, with a floor at the
// retention horizon (which skips nothing retained) and the moment it looked (Cursor.CheckedAt),
// so the next run pulls from EARLIEST again instead of reporting the fallback again.
//
// A topic subscribed at LATEST (start: latest, or the replay_lost: latest fallback) has no
// replay id to store until an event or a keepalive arrives, and the idle rule usually ends the
// pull first. Its cursor then records when that subscription opened (Cursor.LatestAt): the next
// run subscribes at EARLIEST and skips, as a start time does, the events older than that moment
// (less LatestMargin), so the events published between runs are shipped rather than lost. A
// run that meets nothing there for the idle period stores when it looked (Cursor.CheckedAt) and
// keeps the floor (an idle pull proves only that nothing came in time), so a quiet topic's
// position ages only while the job does not run; a position whose last look is older than
// Retention follows replay_lost, as a refused replay id does. A session renewal on that
// subscription before anything arrived makes the client re-subscribe at LATEST, a later start:
// the run then applies the same rule at once (EARLIEST, skipping the events older than the
// first subscription's moment), so the re-subscribe loses nothing.
package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// Name is the source's config name.
const Name = "pubsub"

// Wildcard in Topics discovers the org's Real-Time Event Monitoring streams.
const Wildcard = "*"

// ReplayLost is the policy for a stored replay id Salesforce refuses.
type ReplayLost string

// The replay_lost policies.
const (
	// ReplayLostFail ends the run with the integrity outcome (exit 7): a human decides.
	ReplayLostFail ReplayLost = "fail"
	// ReplayLostEarliest resumes from the oldest retained event (duplicates, bounded by the
	// retention window; events older than it are lost). Custom platform events and CDC count
	// the redelivered events against the org's delivery allocation.
	ReplayLostEarliest ReplayLost = "earliest"
	// ReplayLostLatest resumes from the newest event: everything in between is lost.
	ReplayLostLatest ReplayLost = "latest"
)

// Start is where a topic with no stored position starts.
type Start string

// Start positions.
const (
	// StartEarliest ships what Salesforce still retains (about 72 hours).
	StartEarliest Start = "earliest"
	// StartLatest ships only events published after the first run subscribed (see
	// Cursor.LatestAt for a first run that sees no event).
	StartLatest Start = "latest"
)

// LatestMargin is how much earlier than Cursor.LatestAt a resumed topic starts shipping. The
// skip compares an event's own time (EventDate, CreatedDate or the CDC commit time: Salesforce's
// clock, and for a Real-Time Event Monitoring event the time of the action, which precedes its
// publication) with LatestAt (this host's clock): the margin covers clock skew and that
// publication lag, so an event published after the LATEST subscription is never skipped. The
// price is that events of the few minutes before it, which LATEST left out, may be shipped.
const LatestMargin = 5 * time.Minute

// Retention is how long Salesforce keeps Pub/Sub events and accepts their replay ids (about
// 72 hours).
const Retention = 72 * time.Hour

// Lifetime is the age past which a stored position is taken as lost: Retention, less
// LatestMargin for this host's clock against Salesforce's. A cursor holding only LatestAt whose
// last quiet look is older follows replay_lost, as a refused replay id does: the events
// published between it and the oldest retained one may be gone.
const Lifetime = Retention - LatestMargin

// SkipBeforeStart is the skip reason (and run-report event) of an event older than
// Options.StartAt on a topic that had no stored position.
const SkipBeforeStart = "before_start"

// Defaults of Options.
const (
	DefaultMaxEvents    = 1000
	DefaultNumRequested = sfpubsub.MaxOutstanding
	DefaultIdle         = 5 * time.Second
	DefaultRefreshAfter = 24 * time.Hour
	DefaultAgeWarning   = 48 * time.Hour
)

// Options configures the source. Zero values take the documented defaults.
type Options struct {
	// Topics are the topic names (/event/..., /data/...); "*" adds the org's Real-Time Event
	// Monitoring streams found by describeGlobal (every <X>EventStream, and <X>Event when
	// <X>EventStore exists too). Custom platform events and CDC channels are listed explicitly.
	Topics []string
	// MaxEvents is N, the most events one topic ships per run (default 1000). A topic stopped
	// there waits for the next run (source.ErrWaiting): the run is not caught up.
	MaxEvents int
	// NumRequested is the most events outstanding on one subscription, 1..100 (default 100).
	NumRequested int
	// Idle ends a topic's pull when nothing arrived for this long (default 5s).
	Idle time.Duration
	// RefreshAfter: a topic whose stored position has not advanced for this long waits for a
	// keepalive (up to the run's deadline) to refresh it (default 24h; negative disables).
	RefreshAfter time.Duration
	// AgeWarning adds a run-report note for a position older than this (default 48h).
	AgeWarning time.Duration
	// ReplayLost is the policy for a refused stored position (default ReplayLostFail).
	ReplayLost ReplayLost
	// Start is where a topic without a stored position starts (default StartEarliest).
	Start Start
	// StartAt, when set with StartEarliest, also skips (reason SkipBeforeStart, cursor advanced)
	// the events of a topic without a stored position whose own time (EventDate, CreatedDate or
	// the CDC commit time) is before it: the Pub/Sub API can only start at the oldest retained
	// event, the newest, or a replay id, never at a time. Events without a time of their own are
	// shipped. A stored position always wins.
	StartAt time.Time
	// Shaper shapes every topic's events (nil: no transforms, the default routing).
	Shaper *shape.Shaper
	// Labels are extra stream labels of every entry (sf_org_id, org).
	Labels []loki.Label
	// OwnedCategories are event categories other sources ship (shape.Owned): topics "*"
	// discovers in them are left out. Explicit topics are always shipped.
	OwnedCategories []string
	// Closer is closed once every stream of the run is closed (the run's Pub/Sub client).
	Closer io.Closer
	// Log receives the source's own messages (nil = the run's logger).
	Log *slog.Logger
	// Now is the wall clock of cursor times (nil = time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.NumRequested <= 0 || o.NumRequested > sfpubsub.MaxOutstanding {
		o.NumRequested = DefaultNumRequested
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.RefreshAfter == 0 {
		o.RefreshAfter = DefaultRefreshAfter
	}
	if o.AgeWarning <= 0 {
		o.AgeWarning = DefaultAgeWarning
	}
	if o.ReplayLost == "" {
		o.ReplayLost = ReplayLostFail
	}
	if o.Start == "" {
		o.Start = StartEarliest
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate checks the options (errors name the option).
func (o Options) Validate() error {
	if len(o.Topics) == 0 {
		return fmt.Errorf("pubsub: Topics: list at least one topic, or %q", Wildcard)
	}
	for _, t := range o.Topics {
		if t != Wildcard && !ValidTopic(t) {
			return fmt.Errorf("pubsub: Topics: %q is not a topic name like /event/LoginEventStream, /event/Order_Event__e or /data/AccountChangeEvent", t)
		}
	}
	if o.NumRequested < 0 || o.NumRequested > sfpubsub.MaxOutstanding {
		return fmt.Errorf("pubsub: NumRequested: %d is outside 1..%d", o.NumRequested, sfpubsub.MaxOutstanding)
	}
	switch o.ReplayLost {
	case "", ReplayLostFail, ReplayLostEarliest, ReplayLostLatest:
	default:
		return fmt.Errorf("pubsub: ReplayLost: %q is not fail, earliest or latest", o.ReplayLost)
	}
	switch o.Start {
	case "", StartEarliest, StartLatest:
	default:
		return fmt.Errorf("pubsub: Start: %q is not earliest or latest", o.Start)
	}
	if !o.StartAt.IsZero() && o.Start == StartLatest {
		return errors.New("pubsub: StartAt: only with Start earliest (latest ships only new events already)")
	}
	return nil
}

// ValidTopic reports whether name looks like a Pub/Sub topic: /event/<Name> or /data/<Name>
// with a name of letters, digits and underscores.
func ValidTopic(name string) bool {
	rest, ok := strings.CutPrefix(name, "/event/")
	if !ok {
		rest, ok = strings.CutPrefix(name, "/data/")
	}
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// EventType is the event_type of a topic: its name without the /event/ or /data/ prefix.
func EventType(topic string) string {
	return topic[strings.LastIndexByte(topic, '/')+1:]
}

// Client is what the source needs of the Pub/Sub API; *sfpubsub.Client implements it.
type Client interface {
	Schema(ctx context.Context, id string) (avro.Schema, error)
	Subscribe(ctx context.Context, req sfpubsub.SubscribeRequest) (*sfpubsub.Subscription, error)
}

// Discoverer lists the org's sObjects for "*"; *salesforce.Client implements it.
type Discoverer interface {
	DescribeGlobal(ctx context.Context) (*salesforce.GlobalDescribe, error)
}

// Source is the Pub/Sub source for one invocation.
type Source struct {
	c    Client
	disc Discoverer
	opts Options

	mu     sync.Mutex
	topics []*TopicReport
	open   int // streams not closed yet
}

// New returns the source; disc may be nil when Topics has no "*".
func New(c Client, disc Discoverer, opts Options) (*Source, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("pubsub: New needs a Pub/Sub client")
	}
	if disc == nil && slices.Contains(opts.Topics, Wildcard) {
		return nil, fmt.Errorf("pubsub: Topics: %q needs a Discoverer (describeGlobal)", Wildcard)
	}
	if opts.Shaper == nil {
		sh, err := shape.New(shape.Options{})
		if err != nil {
			return nil, err
		}
		opts.Shaper = sh
	}
	return &Source{c: c, disc: disc, opts: opts.withDefaults()}, nil
}

// replayAgePrefix starts the event that carries a topic's replay position age in seconds.
const replayAgePrefix = "replay_id_age_seconds:"

// ReplayAgeEvent is the name of the event counting, in seconds, how long the topic's stored
// replay id had not advanced when the run started (for a cursor holding only Cursor.LatestAt,
// how long ago that moment was).
func ReplayAgeEvent(topic string) string { return replayAgePrefix + topic }

// ReplayAgeTopic returns the topic of a ReplayAgeEvent name.
func ReplayAgeTopic(event string) (string, bool) { return strings.CutPrefix(event, replayAgePrefix) }

// Name implements source.Source.
func (s *Source) Name() string { return Name }

// TopicReport is what one topic did in the run (for metrics and doctor).
type TopicReport struct {
	Topic string
	// ReplayAge is how long the stored position had not advanced when the run started (for a
	// cursor holding only Cursor.LatestAt, how long ago that was; 0 when the topic had none;
	// -1 when its age is unknown: a legacy value).
	ReplayAge time.Duration
	// Refreshing reports that the run waited for a keepalive to refresh the position.
	Refreshing bool
	// Events, Skipped and Keepalives count what the topic yielded.
	Events, Skipped, Keepalives int
	// Stop says why the pull ended (max_events, idle, deadline, keepalive, ...); empty when
	// the run ended it (budget, error).
	Stop sfpubsub.StopReason
	// Fallback is the preset used after the stored position was refused ("" when none).
	Fallback string
}

// Topics returns the per-topic reports of the last Open (updated as the streams run).
func (s *Source) Topics() []TopicReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TopicReport, len(s.topics))
	for i, t := range s.topics {
		out[i] = *t
	}
	return out
}

func (s *Source) update(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
}

// Open implements source.Source: it resolves the topics and starts one bounded pull per topic
// (all at once, so their idle periods overlap).
func (s *Source) Open(ctx context.Context, req source.OpenRequest) ([]source.Stream, error) {
	log := s.opts.Log
	if log == nil {
		log = req.Log
	}
	if log == nil {
		log = slog.Default()
	}
	count, note := req.Count, req.Note
	if count == nil {
		count = func(string, int64) {}
	}
	if note == nil {
		note = func(string) {}
	}
	topics, err := s.resolveTopics(ctx, log)
	if err != nil {
		s.release()
		return nil, err
	}
	now := s.opts.Now()
	var streams []source.Stream
	var reports []*TopicReport
	for _, topic := range topics {
		st := &stream{src: s, topic: topic, key: Key(topic), log: log.With("topic", topic), count: count, note: note, deadline: req.Budget.Deadline}
		st.rep = &TopicReport{Topic: topic}
		cur, id, ok, err := DecodeCursor(req.Cursors[st.key])
		switch {
		case err != nil:
			st.log.Warn("the stored position is unusable; starting from the configured start", "start", s.opts.Start, "err", err)
			count("cursor_reset", 1)
		case ok && id == nil:
			// Only the moment of a LATEST subscription (and of the last quiet look): no replay id
			// to refresh, but a position the retention ends all the same (past Retention it
			// follows replay_lost), so its age is reported as a replay id's is.
			st.cur = cur
			age := positionAge(cur, id, now)
			count(ReplayAgeEvent(topic), int64(age/time.Second))
			if age >= s.opts.AgeWarning {
				note(fmt.Sprintf("%s: the stored position is latest_at, last found quiet at %s, %s ago; Salesforce keeps about 72h, after which the position is lost and replay_lost applies",
					topic, cur.quietSince().UTC().Format(time.RFC3339), age.Round(time.Minute)))
			}
			st.rep.ReplayAge = age
		case ok:
			st.cur, st.resume = cur, id
			age := positionAge(cur, id, now) // -1: unknown, a legacy value
			if age >= 0 {
				count(ReplayAgeEvent(topic), int64(age/time.Second))
				if age >= s.opts.AgeWarning {
					note(fmt.Sprintf("%s: the stored replay id has not advanced for %s; Salesforce keeps about 72h, after which the position is lost", topic, age.Round(time.Minute)))
				}
			}
			st.rep.ReplayAge = age
			st.rep.Refreshing = s.opts.RefreshAfter > 0 && (age < 0 || age >= s.opts.RefreshAfter)
		}
		if err := st.start(ctx); err != nil {
			st.openErr = err // reported by the topic's stream; the other topics run
		}
		streams = append(streams, st)
		reports = append(reports, st.rep)
	}
	s.update(func() { s.topics = reports; s.open = len(streams) })
	if len(streams) == 0 {
		s.release()
	}
	return streams, nil
}

// streamClosed closes Options.Closer after the last stream.
func (s *Source) streamClosed() {
	s.mu.Lock()
	s.open--
	last := s.open == 0
	s.mu.Unlock()
	if last {
		s.release()
	}
}

func (s *Source) release() {
	if s.opts.Closer != nil {
		_ = s.opts.Closer.Close()
	}
}

// Calls returns the Pub/Sub calls made so far by kind (for the run report), when the client
// counts them.
func (s *Source) Calls() map[string]int64 {
	if c, ok := s.c.(interface{ Stats() sfpubsub.Stats }); ok {
		return c.Stats().Calls
	}
	return nil
}

// CursorTime implements source.Source: the time of the last event shipped, else when the
// replay position last advanced (zero for a legacy value that records neither); for a cursor
// holding only the moment of a LATEST subscription, that moment.
func (s *Source) CursorTime(key string, raw json.RawMessage) (time.Time, error) {
	if !strings.HasPrefix(key, KeyPrefix) || !ValidTopic(strings.TrimPrefix(key, KeyPrefix)) {
		return time.Time{}, fmt.Errorf("%w: %q is not %s<topic>", source.ErrNotMyKey, key, KeyPrefix)
	}
	c, _, ok, err := DecodeCursor(raw)
	if err != nil || !ok {
		return time.Time{}, err
	}
	if c.ReplayID == "" {
		return c.LatestAt, nil
	}
	if !c.LastEventAt.IsZero() {
		return c.LastEventAt, nil
	}
	return c.AdvancedAt, nil
}

// resolveTopics expands "*" with describeGlobal and removes duplicates, keeping order.
func (s *Source) resolveTopics(ctx context.Context, log *slog.Logger) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, t := range s.opts.Topics {
		if t != Wildcard {
			add(t)
			continue
		}
		found, err := s.discover(ctx)
		if err != nil {
			if len(s.opts.Topics) == 1 {
				return nil, fmt.Errorf("pubsub: discovering the org's event streams: %w", err)
			}
			log.Warn("discovering the org's event streams failed; shipping the explicit topics only", "err", err)
			continue
		}
		for _, f := range found {
			if slices.Contains(s.opts.OwnedCategories, s.opts.Shaper.Category(f)) {
				log.Debug("discovered topic left out: another source ships its category", "topic", f)
				continue
			}
			add(f)
		}
	}
	return out, nil
}

// discover returns the org's Real-Time Event Monitoring streams: /event/<X>EventStream for
// every such sObject, and /event/<X>Event for every <X>EventStore whose <X>Event also exists
// (the new-generation threat detection channels), sorted.
func (s *Source) discover(ctx context.Context) ([]string, error) {
	g, err := s.disc.DescribeGlobal(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, o := range g.SObjects {
		names[o.Name] = true
	}
	var out []string
	for n := range names {
		switch {
		case strings.HasSuffix(n, "EventStream"):
			out = append(out, "/event/"+n)
		case strings.HasSuffix(n, "EventStore"):
			if ev := strings.TrimSuffix(n, "Store"); names[ev] {
				out = append(out, "/event/"+ev)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
