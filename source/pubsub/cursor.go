package pubsub

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sf2loki/sf2loki/source"
)

// KeyPrefix starts every checkpoint key of this source: pubsub:<topic>, e.g.
// pubsub:/event/LoginEventStream (the Python original's key, so its state migrates as is).
const KeyPrefix = "pubsub:"

// cursorVersion is the version of Cursor.
const cursorVersion = 1

// Cursor is the checkpoint value of one topic.
type Cursor struct {
	V int `json:"v"`
	// ReplayID is the resume position, base64 (standard alphabet, padded) of the opaque bytes:
	// the replay id of the last event shipped, or a keepalive's latest_replay_id. Empty only
	// when LatestAt is set.
	ReplayID string `json:"replay_id,omitempty"`
	// LatestAt, on a cursor without a replay id, is when the topic was subscribed at LATEST
	// (start: latest, or replay_lost: latest after a refused id) and the pull ended before an
	// event or a keepalive gave it a replay id (the local wall clock). The next run subscribes
	// at EARLIEST and skips the events older than LatestAt less LatestMargin, so "latest" keeps
	// meaning "from that subscription on" instead of "from whenever a run next subscribes". A
	// replay_lost: earliest fallback that met nothing stores the retention horizon of its
	// subscription here: a floor that skips nothing Salesforce still keeps.
	LatestAt time.Time `json:"latest_at,omitzero"`
	// CheckedAt, on a cursor holding LatestAt, is when an EARLIEST pull from that position last
	// met nothing for the idle period. It never moves the floor (an event late to arrive, or
	// whose own time precedes its publication, is still newer than LatestAt), but the job kept
	// looking, so the position's age against the retention counts from it (quietSince).
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// NotBefore, on a cursor with a replay id, is the start still in force: the events older
	// than it are skipped (before_start) by the run that resumes here. A pull that starts at a
	// time, or from a LatestAt, keeps it in its cursors until an event passes it, so a pull cut
	// (max_events, the deadline) while it still skips the retained events from before the start
	// does not leave the next run shipping them.
	NotBefore time.Time `json:"not_before,omitzero"`
	// AdvancedAt is when ReplayID last changed (the local wall clock). Its age is how close
	// the position is to Salesforce's retention horizon (about 72 hours); refresh_after is
	// measured from it.
	AdvancedAt time.Time `json:"advanced_at,omitzero"`
	// LastEventAt is the timestamp of the last event shipped: the stable fallback time of an
	// event that carries none (so a replayed event gets the same timestamp and Loki dedups it).
	LastEventAt time.Time `json:"last_event_at,omitzero"`
}

// Key returns the checkpoint key of a topic.
func Key(topic string) string { return KeyPrefix + topic }

// EncodeCursor returns the stored form of c (version set).
func EncodeCursor(c Cursor) json.RawMessage {
	c.V = cursorVersion
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // only strings and times
	}
	return b
}

// DecodeCursor reads a stored cursor. A value written by the Python original (a bare base64
// string) is accepted as a replay id whose age is unknown. id is nil for a cursor that holds
// only LatestAt. ok is false when raw is empty. Errors wrap source.ErrCursor.
func DecodeCursor(raw json.RawMessage) (c Cursor, id []byte, ok bool, err error) {
	if len(raw) > 0 && raw[0] == '"' {
		var legacy string
		if err := json.Unmarshal(raw, &legacy); err != nil {
			return Cursor{}, nil, false, errors.Join(source.ErrCursor, err)
		}
		c = Cursor{V: cursorVersion, ReplayID: legacy}
	} else {
		found, err := source.DecodeCursor(raw, cursorVersion, &c)
		if err != nil || !found {
			return Cursor{}, nil, false, err
		}
	}
	if c.ReplayID == "" && !c.LatestAt.IsZero() {
		return c, nil, true, nil
	}
	id, err = base64.StdEncoding.DecodeString(c.ReplayID)
	if err != nil || len(id) == 0 {
		return Cursor{}, nil, false, errors.Join(source.ErrCursor, fmt.Errorf("replay_id %q is not base64 of a replay id", c.ReplayID))
	}
	return c, id, true, nil
}

// PositionAge returns the age of a stored cursor by the rule a run applies when it opens the
// topic (the replay_id_age_seconds:<topic> event, TopicReport.ReplayAge and the age_warning
// note), for doctor: kind "replay_id" for a replay id, aged since it last advanced (-1 when
// unknown: a legacy value without advanced_at); kind "latest_at" for a cursor holding only
// LatestAt, aged since that moment. A position ahead of now is 0 old. ok is false when raw is
// empty: no position, the topic starts at its start. err is DecodeCursor's for a value a run
// cannot use (it logs a warning, counts cursor_reset and starts the topic at its start).
func PositionAge(raw json.RawMessage, now time.Time) (age time.Duration, kind string, ok bool, err error) {
	c, id, ok, err := DecodeCursor(raw)
	if err != nil || !ok {
		return 0, "", false, err
	}
	if id == nil {
		return positionAge(c, id, now), "latest_at", true, nil
	}
	return positionAge(c, id, now), "replay_id", true, nil
}

// quietSince is, for a cursor holding only LatestAt, since when the topic is known to have
// had nothing to ship: the later of LatestAt and CheckedAt.
func (c Cursor) quietSince() time.Time {
	if c.CheckedAt.After(c.LatestAt) {
		return c.CheckedAt
	}
	return c.LatestAt
}

// positionAge is the age of a decoded cursor (see PositionAge).
func positionAge(c Cursor, id []byte, now time.Time) time.Duration {
	switch {
	case id == nil:
		return max(0, now.Sub(c.quietSince()))
	case c.AdvancedAt.IsZero():
		return -1
	}
	return max(0, now.Sub(c.AdvancedAt))
}
