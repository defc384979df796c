package pubsub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// MetadataReplayID is the structured-metadata name of an entry's replay id (base64).
const MetadataReplayID = "replay_id"

// Event is one decoded event, as a Shaper sees it.
type Event struct {
	// Topic is the topic name and Type its event_type (the name without /event/ or /data/).
	Topic, Type string
	// ID is the event's id and ReplayID its position.
	ID       string
	ReplayID []byte
	// Fields is the decoded Avro record (see sfpubsub.Fields for the value types).
	Fields sfpubsub.Fields
	// Time is the entry timestamp: EventDate, CreatedDate or ChangeEventHeader.commitTimestamp
	// (TimeField names which), else the topic's last event time (TimeField empty).
	Time      time.Time
	TimeField string
}

// shaper applies the shape section to a topic's decoded events: the same transforms, sampling
// and routing as every source, on the event's fields. A nested record (CDC's
// ChangeEventHeader, a compound address) is flattened into dotted names
// (ChangeEventHeader.changeType), as SOQL relationship fields are; an array or map is one field
// holding its JSON text. The sampling key is the event's id (stable across replays). One shaper
// serves one topic in one run, from one goroutine.
type shaper struct {
	plan *shape.Plan
	typ  string
	rec  shape.Record
	num  []byte
}

func newShaper(sh *shape.Shaper, eventType string, labels []loki.Label) *shaper {
	return &shaper{plan: sh.Plan(shape.Schema{Source: Name, Type: eventType, Labels: labels}), typ: eventType}
}

// Shape turns an event into a Loki entry, or names why it is dropped (sampled, drop_row:...).
func (p *shaper) Shape(ev *Event) (loki.Entry, string) {
	p.rec.Reset()
	p.rec.Type, p.rec.Time = p.typ, ev.Time
	if ev.ID != "" {
		p.rec.ID = append(p.rec.ID, ev.ID...)
	} else {
		p.rec.ID = base64.StdEncoding.AppendEncode(p.rec.ID, ev.ReplayID)
	}
	p.appendFields("", ev.Fields)
	return p.plan.Shape(&p.rec)
}

func (p *shaper) appendFields(prefix string, fs sfpubsub.Fields) {
	for _, f := range fs {
		name := prefix + f.Name
		switch v := f.Value.(type) {
		case nil:
			p.rec.Append(name, shape.Null, nil)
		case bool:
			p.rec.AppendString(name, shape.Bool, strconv.FormatBool(v))
		case int32:
			p.num = strconv.AppendInt(p.num[:0], int64(v), 10)
			p.rec.Append(name, shape.Number, p.num)
		case int64:
			p.num = strconv.AppendInt(p.num[:0], v, 10)
			p.rec.Append(name, shape.Number, p.num)
		case float32:
			p.appendFloat(name, float64(v), 32)
		case float64:
			p.appendFloat(name, v, 64)
		case string:
			p.rec.AppendString(name, shape.String, v)
		case []byte:
			p.rec.AppendString(name, shape.String, base64.StdEncoding.EncodeToString(v))
		case sfpubsub.Fields:
			p.appendFields(name+".", v)
		default: // an array or a map: its JSON text
			p.num = sfpubsub.AppendJSONValue(p.num[:0], v)
			p.rec.Append(name, shape.String, p.num)
		}
	}
}

func (p *shaper) appendFloat(name string, f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		p.rec.AppendString(name, shape.String, strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	p.num = strconv.AppendFloat(p.num[:0], f, 'g', -1, bits)
	p.rec.Append(name, shape.Number, p.num)
}

// stream is one topic's bounded pull.
type stream struct {
	src      *Source
	topic    string
	key      string
	log      *slog.Logger
	count    func(string, int64)
	note     func(string)
	deadline time.Time
	rep      *TopicReport

	cur    Cursor // stored cursor (zero when none)
	resume []byte // stored replay id (nil when none)

	sub      *sfpubsub.Subscription
	openErr  error
	shaper   *shaper
	fellBack bool
	// notBefore is Options.StartAt when the topic started without a stored position, or the
	// stored Cursor.LatestAt less LatestMargin (else zero).
	notBefore time.Time
	// passed reports that an event of this pull was at or after notBefore: from then on the
	// cursors no longer carry it (Cursor.NotBefore).
	passed bool
	// latestAt is when the topic's LATEST subscription was opened (else zero), and positioned
	// reports that a record gave the topic a cursor: a pull that ends without one yields a
	// cursor holding latestAt (latestCursor). atLatest reports that the current subscription
	// is that LATEST one (not yet replaced by resubscribeFromLatestAt).
	latestAt   time.Time
	atLatest   bool
	positioned bool
	// emptyAt is when an EARLIEST subscription that replaces or resumes a stored position (the
	// replay_lost: earliest fallback, or a stored LatestAt) was opened (else zero), and
	// emptyFloor the LatestAt such a pull stores when it ends idle without a record
	// (emptyCursor): the stored one, or the fallback's retention horizon.
	emptyAt, emptyFloor time.Time
	closed              bool
	lastAt              time.Time
	ev                  Event
}

func (st *stream) Key() string { return st.key }

// start opens the subscription from the stored position (or the configured start).
func (st *stream) start(ctx context.Context) error {
	o := st.src.opts
	req := sfpubsub.SubscribeRequest{
		Topic: st.topic, Max: o.MaxEvents, NumRequested: o.NumRequested, Idle: o.Idle,
		Deadline: st.deadline, WaitForKeepalive: st.rep.Refreshing,
	}
	switch {
	case st.resume != nil:
		req.Preset, req.ReplayID = sfpubsub.Custom, st.resume
		st.notBefore = st.cur.NotBefore // a start a cut pull left in force
	case !st.cur.LatestAt.IsZero():
		if o.Now().Sub(st.cur.quietSince()) > Lifetime {
			return st.latestAtLost(ctx)
		}
		// "latest" as of an earlier run's subscription: from there on, not from now.
		req.Preset = sfpubsub.Earliest
		st.notBefore = st.cur.LatestAt.Add(-LatestMargin)
		// Taken before subscribing: if this pull meets nothing, the job looked at this moment
		// (CheckedAt), so a quiet topic's position does not age past Retention however often
		// the job runs; the floor stays, since an idle pull proves only that nothing came in
		// time.
		st.emptyAt, st.emptyFloor = o.Now().UTC(), st.cur.LatestAt
	case o.Start == StartLatest:
		req.Preset = sfpubsub.Latest
	default:
		req.Preset = sfpubsub.Earliest
		st.notBefore = o.StartAt
	}
	return st.open(ctx, req)
}

func (st *stream) open(ctx context.Context, req sfpubsub.SubscribeRequest) error {
	st.atLatest = req.Preset == sfpubsub.Latest
	if st.atLatest {
		// Taken before subscribing: the server's LATEST is no earlier than this.
		st.latestAt = st.src.opts.Now().UTC()
	}
	sub, err := st.src.c.Subscribe(ctx, req)
	if err != nil {
		return fmt.Errorf("pubsub: %s: %w", st.topic, err)
	}
	st.sub = sub
	st.lastAt = st.cur.LastEventAt
	if st.shaper == nil {
		typ := EventType(st.topic)
		st.shaper = newShaper(st.src.opts.Shaper, typ, st.src.opts.Labels)
	}
	if req.WaitForKeepalive {
		st.log.Info("the stored replay id has not advanced for refresh_after; waiting for a keepalive to refresh it", "age", st.rep.ReplayAge.Round(time.Second))
	}
	return nil
}

// Next implements source.Stream.
func (st *stream) Next(ctx context.Context, rec *source.Record) error {
	r, err := st.nextRecord(ctx)
	return source.Fill(rec, r, err)
}

// nextRecord returns the next record, for Next to fill in.
func (st *stream) nextRecord(ctx context.Context) (source.Record, error) {
	if st.openErr != nil {
		return source.Record{}, st.openErr
	}
	for {
		it, err := st.sub.Next(ctx)
		if errors.Is(err, io.EOF) && !st.latestAt.IsZero() && !st.positioned {
			return st.latestCursor(), nil // the EOF comes on the next call
		}
		if errors.Is(err, io.EOF) && !st.emptyAt.IsZero() && !st.positioned && st.sub.Stopped() == sfpubsub.StopIdle {
			return st.emptyCursor(), nil // the EOF comes on the next call
		}
		if errors.Is(err, io.EOF) {
			reason := st.sub.Stopped()
			st.src.update(func() { st.rep.Stop = reason })
			st.count("stopped_"+string(reason), 1)
			st.log.Debug("topic pull ended", "reason", reason, "delivered", st.sub.Delivered())
			if reason == sfpubsub.StopMax {
				// More events may follow: the run is not caught up. Idle means none came for
				// the idle period; the deadline is the run's end, not the topic's.
				return source.Record{}, fmt.Errorf("%w: stopped at max_events (%d events); the next run goes on after the last event shipped",
					source.ErrWaiting, st.src.opts.MaxEvents)
			}
			return source.Record{}, io.EOF
		}
		if err != nil {
			if errors.Is(err, sfpubsub.ErrReplayLost) && !st.fellBack {
				if ferr := st.replayLost(ctx, err); ferr != nil {
					return source.Record{}, ferr
				}
				continue
			}
			return source.Record{}, fmt.Errorf("pubsub: %s: %w", st.topic, err)
		}
		if st.atLatest && !st.positioned && st.sub.Reauths() > 0 {
			// The session was renewed before anything arrived, and the client subscribed again
			// at LATEST, a later start than latestAt: what was published in between would be
			// lost once this item gave the topic a position.
			if err := st.resubscribeFromLatestAt(ctx); err != nil {
				return source.Record{}, err
			}
			continue
		}
		if it.Keepalive() {
			st.src.update(func() { st.rep.Keepalives++; st.rep.Skipped++ })
			return source.Record{Skip: true, SkipReason: "keepalive", Cursor: source.CursorJSON(st.cursor(it.ReplayID))}, nil
		}
		return st.event(ctx, it.Event)
	}
}

// latestCursor is the record that ends a LATEST pull which met no event and no keepalive: with
// no replay id to store, its cursor holds when the subscription opened (Cursor.LatestAt),
// replacing a refused stored id, so the next run resumes from that moment instead of
// subscribing at LATEST again and losing what was published in between.
func (st *stream) latestCursor() source.Record {
	st.log.Info("no event or keepalive arrived on the LATEST subscription; storing when it opened, so the next run ships what is published from then on",
		"latest_at", st.latestAt)
	return st.momentCursor(st.latestAt, time.Time{}, "latest_start")
}

// emptyCursor is the record that ends an EARLIEST pull (emptyAt) which met no event and no
// keepalive for the idle period. Its cursor keeps the floor (emptyFloor: the stored LatestAt,
// or after a replay_lost: earliest fallback the retention horizon, which skips nothing) and
// records the look (Cursor.CheckedAt): the next run pulls from EARLIEST again and ships
// whatever was slow to arrive, but does not meet the same refusal, or report the same
// fallback, again, and a quiet topic's position ages only while the job does not run. A pull
// cut short by the run's deadline stores nothing.
func (st *stream) emptyCursor() source.Record {
	st.log.Info("the EARLIEST subscription met no event for the idle period; storing when it looked, so a quiet topic's position does not age while the job runs",
		"latest_at", st.emptyFloor, "checked_at", st.emptyAt)
	return st.momentCursor(st.emptyFloor, st.emptyAt, "nothing_retained")
}

// momentCursor is the skipped record, counted under reason, that ends a pull which met no
// event and no keepalive: with no replay id to store, its cursor holds the floor latestAt the
// next run resumes from, and when a pull last found the topic quiet (checkedAt; zero: none).
func (st *stream) momentCursor(latestAt, checkedAt time.Time, reason string) source.Record {
	st.positioned = true
	c := Cursor{LatestAt: latestAt, CheckedAt: checkedAt, AdvancedAt: st.src.opts.Now().UTC(), LastEventAt: st.lastAt}
	return source.Record{Skip: true, SkipReason: reason, Cursor: source.CursorJSON(EncodeCursor(c))}
}

// resubscribeFromLatestAt replaces a LATEST subscription that was re-subscribed (at LATEST, so
// later) after a session renewal, before it yielded anything, with one at EARLIEST that skips
// the events older than latestAt less LatestMargin: the rule the next run would apply to the
// stored latestAt, applied now. latestAt stays the moment to store if this pull meets nothing.
func (st *stream) resubscribeFromLatestAt(ctx context.Context) error {
	o := st.src.opts
	_ = st.sub.Close()
	st.log.Info("the session was renewed on the LATEST subscription before any event or keepalive arrived; subscribing again from EARLIEST, skipping the events before the first subscription",
		"latest_at", st.latestAt)
	st.count("latest_resubscribed", 1)
	st.notBefore = st.latestAt.Add(-LatestMargin)
	req := sfpubsub.SubscribeRequest{Topic: st.topic, Preset: sfpubsub.Earliest, Max: o.MaxEvents, NumRequested: o.NumRequested, Idle: o.Idle, Deadline: st.deadline}
	if err := st.open(ctx, req); err != nil {
		st.openErr = err // later calls of Next report it too
		return err
	}
	return nil
}

// lostPosition is a stored position the topic cannot resume from, for positionLost.
type lostPosition struct {
	// what says what happened, for the fail policy's error; short names it in the log and note.
	what, short string
	// earliestMissed is what the earliest fallback may miss or repeat.
	earliestMissed string
	cause          error // Salesforce's refusal (nil when the source found the gap itself)
}

// replayLost applies the replay_lost policy to a refused stored replay id.
func (st *stream) replayLost(ctx context.Context, cause error) error {
	stored := base64.StdEncoding.EncodeToString(st.resume)
	return st.positionLost(ctx, lostPosition{
		what:           fmt.Sprintf("Salesforce refused the stored replay id %s (expired past the ~72h retention, or invalid after an org migration)", stored),
		short:          "the stored replay id was refused (expired or invalid)",
		earliestMissed: "events published between the stored position and the oldest event Salesforce still retains may have been missed, and retained events already shipped are shipped again",
		cause:          cause,
	})
}

// latestAtLost applies the replay_lost policy to a stored Cursor.LatestAt older than
// Retention: resuming from EARLIEST would silently miss the events published between that
// moment and the oldest event Salesforce still retains.
func (st *stream) latestAtLost(ctx context.Context) error {
	at := st.cur.quietSince().UTC().Format(time.RFC3339)
	return st.positionLost(ctx, lostPosition{
		what:           fmt.Sprintf("the stored position is latest_at, last found quiet at %s, more than Salesforce's ~72h retention ago", at),
		short:          fmt.Sprintf("the stored latest_at %s is past the ~72h retention", at),
		earliestMissed: "events published between the stored position and the oldest event Salesforce still retains may have been missed",
	})
}

// positionLost applies the replay_lost policy: fail returns the integrity error, earliest and
// latest report the fallback and subscribe from there.
func (st *stream) positionLost(ctx context.Context, lost lostPosition) error {
	o := st.src.opts
	if o.ReplayLost == ReplayLostFail {
		err := fmt.Errorf("%w: pubsub: %s: %s, so events since it may be lost; nothing was committed for this topic. To resume, set sources.pubsub.replay_lost to earliest (or latest), or delete the checkpoint %s",
			source.ErrNeedsHuman, st.topic, lost.what, st.key)
		if lost.cause != nil {
			err = fmt.Errorf("%w: %w", err, lost.cause)
		}
		return err
	}
	st.fellBack = true
	if st.sub != nil {
		_ = st.sub.Close()
	}
	req := sfpubsub.SubscribeRequest{Topic: st.topic, Max: o.MaxEvents, NumRequested: o.NumRequested, Idle: o.Idle, Deadline: st.deadline}
	var missed string
	if o.ReplayLost == ReplayLostEarliest {
		req.Preset = sfpubsub.Earliest
		missed = lost.earliestMissed
		// Taken before subscribing: if this pull meets nothing, the next run pulls from EARLIEST
		// again without a floor (the horizon skips nothing retained) and without the refusal.
		st.emptyAt = o.Now().UTC()
		st.emptyFloor = st.emptyAt.Add(-Retention)
	} else {
		req.Preset = sfpubsub.Latest
		missed = "every event published since the stored position, up to now, may have been missed"
	}
	log := st.log.With("replay_lost", o.ReplayLost, "preset", req.Preset.String())
	if lost.cause != nil {
		log = log.With("err", lost.cause)
	}
	log.Warn(lost.short + "; resuming per replay_lost")
	st.count("replay_fallback", 1)
	st.note(fmt.Sprintf("%s: %s and the topic resumed from %s (replay_lost: %s): %s", st.topic, lost.short, req.Preset, o.ReplayLost, missed))
	st.src.update(func() { st.rep.Fallback = req.Preset.String() })
	st.resume = nil
	return st.open(ctx, req)
}

// event decodes and shapes one event.
func (st *stream) event(ctx context.Context, ev *sfpubsub.Event) (source.Record, error) {
	schema, err := st.src.c.Schema(ctx, ev.SchemaID)
	if err != nil {
		// Never skip an event for a schema problem: the next run replays from the last commit.
		return source.Record{}, fmt.Errorf("pubsub: %s: %w", st.topic, err)
	}
	fields, err := sfpubsub.Decode(schema, ev.Payload)
	if err != nil {
		st.log.Warn("undecodable event payload skipped", "replay_id", base64.StdEncoding.EncodeToString(ev.ReplayID), "event_id", ev.ID, "err", err)
		st.count("undecodable", 1)
		st.src.update(func() { st.rep.Skipped++ })
		return source.Record{Skip: true, SkipReason: "undecodable", Cursor: source.CursorJSON(st.cursor(ev.ReplayID))}, nil
	}
	t, field, ok := sfpubsub.EventTime(fields)
	if !ok {
		t = st.lastAt
		if t.IsZero() {
			// No time anywhere yet: the run's clock, once (later events of the topic reuse it).
			t = st.src.opts.Now().UTC()
			st.count("time_fallback_now", 1)
		}
	}
	st.lastAt = t
	if ok && t.Before(st.notBefore) {
		st.count(SkipBeforeStart, 1)
		st.src.update(func() { st.rep.Skipped++ })
		return source.Record{Skip: true, SkipReason: SkipBeforeStart, Cursor: source.CursorJSON(st.cursor(ev.ReplayID))}, nil
	}
	st.passed = true
	st.ev = Event{Topic: st.topic, Type: EventType(st.topic), ID: ev.ID, ReplayID: ev.ReplayID, Fields: fields, Time: t, TimeField: field}
	entry, skip := st.shaper.Shape(&st.ev)
	lines := st.shaper.plan.Lines()
	cursor := st.cursor(ev.ReplayID)
	if skip != "" {
		st.src.update(func() { st.rep.Skipped++ })
		return source.Record{Skip: true, SkipReason: skip, Cursor: source.CursorJSON(cursor)}, nil
	}
	md := make([]loki.Label, 0, len(entry.Metadata)+1)
	md = append(md, entry.Metadata...)
	entry.Metadata = append(md, loki.Label{Name: MetadataReplayID, Value: base64.StdEncoding.EncodeToString(ev.ReplayID)})
	st.src.update(func() { st.rep.Events++ })
	return source.Record{Entry: entry, Cursor: source.CursorJSON(cursor), Lines: lines}, nil
}

// cursor returns the cursor after an item with replay id id.
func (st *stream) cursor(id []byte) json.RawMessage {
	st.positioned = true
	c := Cursor{ReplayID: base64.StdEncoding.EncodeToString(id), AdvancedAt: st.src.opts.Now().UTC(), LastEventAt: st.lastAt}
	if !st.passed {
		c.NotBefore = st.notBefore
	}
	return EncodeCursor(c)
}

// Close implements source.Stream.
func (st *stream) Close() error {
	if st.closed {
		return nil
	}
	st.closed = true
	var err error
	if st.sub != nil {
		err = st.sub.Close()
	}
	st.src.streamClosed()
	return err
}
