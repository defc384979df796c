package pubsub

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
)

// Errors of the Go API (not of the gRPC API).
var (
	ErrUnknownTopic = errors.New("simpubsub: unknown topic")
	ErrBadSchema    = errors.New("simpubsub: invalid Avro schema")
	ErrEncode       = errors.New("simpubsub: event does not match the topic's schema")
)

// topic is one event channel: an append-only log of events and the replay-id counter.
type topic struct {
	name string

	mu      sync.Mutex
	schema  string // current schema id
	parsed  avro.Schema
	salt    uint32 // changes on ResetStream (org migration): older ids become invalid
	seq     uint64 // last replay sequence issued (events and keepalive marks)
	tipAt   time.Time
	log     []entry // oldest first; purged entries are trimmed lazily
	minted  []mint  // ascending seq: when each replay sequence was issued
	changed chan struct{}
}

type mint struct {
	seq uint64
	at  time.Time
}

type entry struct {
	seq      uint64
	at       time.Time
	id       string
	schemaID string
	payload  []byte
}

// replayIDLen is the size of a replay id, 8 bytes as Salesforce's: the topic's salt (16 bits,
// changed by ResetStream) | the sequence (48 bits), big-endian. Clients must treat it as opaque,
// as on Salesforce; the mint time of each sequence is kept aside for the retention check.
const replayIDLen = 8

const seqBits = 48

// replayID encodes seq, minted at at (t.mu held).
func (t *topic) replayID(seq uint64, at time.Time) []byte {
	if n := len(t.minted); n == 0 || t.minted[n-1].seq < seq {
		t.minted = append(t.minted, mint{seq: seq, at: at})
	}
	b := make([]byte, replayIDLen)
	binary.BigEndian.PutUint64(b, uint64(t.salt&0xffff)<<seqBits|seq&(1<<seqBits-1))
	return b
}

// parseReplayID returns the sequence and mint time of id, or ok false when the id is not one
// this topic issued since its last reset, or one whose mint time has been trimmed (t.mu held).
func (t *topic) parseReplayID(id []byte) (seq uint64, at time.Time, ok bool) {
	if len(id) != replayIDLen {
		return 0, time.Time{}, false
	}
	v := binary.BigEndian.Uint64(id)
	if uint32(v>>seqBits) != t.salt&0xffff {
		return 0, time.Time{}, false
	}
	seq = v & (1<<seqBits - 1)
	if seq > t.seq {
		return 0, time.Time{}, false
	}
	i := sort.Search(len(t.minted), func(i int) bool { return t.minted[i].seq >= seq })
	if i == len(t.minted) || t.minted[i].seq != seq {
		return 0, time.Time{}, false
	}
	return seq, t.minted[i].at, true
}

// notify wakes the topic's subscribers (t.mu held).
func (t *topic) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *topic) currentSchema() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.schema
}

// schemaID is the fingerprint Salesforce-style: 22 characters of URL-safe base64 of the
// canonical form's SHA-256.
func schemaID(s avro.Schema) (string, error) {
	fp, err := s.FingerprintUsing(avro.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(fp[:16]), nil
}

// AddTopic creates a topic (e.g. /event/LoginEventStream, /event/Order_Event__e,
// /data/AccountChangeEvent) with an Avro record schema in JSON, and returns the schema id.
// Adding an existing topic replaces its schema (see SetSchema).
func (s *Server) AddTopic(name, schemaJSON string) (string, error) {
	if !strings.HasPrefix(name, "/event/") && !strings.HasPrefix(name, "/data/") {
		return "", fmt.Errorf("simpubsub: topic %q must start with /event/ or /data/", name)
	}
	s.mu.Lock()
	t := s.topics[name]
	if t == nil {
		t = &topic{name: name, salt: uint32(s.opts.Seed) ^ hash32(name), changed: make(chan struct{})}
		s.topics[name] = t
	}
	s.mu.Unlock()
	return s.SetSchema(name, schemaJSON)
}

// SetSchema changes a topic's schema (schema evolution); events published before keep theirs.
func (s *Server) SetSchema(name, schemaJSON string) (string, error) {
	parsed, err := avro.ParseWithCache(schemaJSON, "", &avro.SchemaCache{})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	if parsed.Type() != avro.Record {
		return "", fmt.Errorf("%w: an event schema must be a record", ErrBadSchema)
	}
	id, err := schemaID(parsed)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	t := s.topic(name)
	if t == nil {
		return "", fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	s.mu.Lock()
	s.schemas[id] = schemaJSON
	s.mu.Unlock()
	t.mu.Lock()
	t.schema, t.parsed = id, parsed
	t.mu.Unlock()
	return id, nil
}

func (s *Server) topic(name string) *topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topics[name]
}

// Topics returns the topic names.
func (s *Server) Topics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.topics))
	for n := range s.topics {
		out = append(out, n)
	}
	return out
}

// Publish encodes each event with the topic's current schema (a map of field name to value;
// a nullable field takes the plain value or nil; timestamps are int64 epoch milliseconds) and
// appends it, returning the replay ids. Publication time is Options.Now.
func (s *Server) Publish(name string, events ...map[string]any) ([][]byte, error) {
	t := s.topic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	t.mu.Lock()
	schema, id := t.parsed, t.schema
	t.mu.Unlock()
	payloads := make([][]byte, len(events))
	for i, ev := range events {
		b, err := encode(schema, ev)
		if err != nil {
			return nil, fmt.Errorf("%w: event %d on %s: %w", ErrEncode, i, name, err)
		}
		payloads[i] = b
	}
	return s.append(t, id, payloads), nil
}

// PublishPayload appends events with raw payloads written with schemaID (which must be known,
// unless the test wants GetSchema to fail). Use it for undecodable payloads.
func (s *Server) PublishPayload(name, schemaID string, payloads ...[]byte) ([][]byte, error) {
	t := s.topic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return s.append(t, schemaID, payloads), nil
}

func (s *Server) append(t *topic, schemaID string, payloads [][]byte) [][]byte {
	now := s.now()
	ids := make([][]byte, len(payloads))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.trim(now.Add(-s.opts.Retention))
	for i, p := range payloads {
		t.seq++
		t.tipAt = now
		t.log = append(t.log, entry{seq: t.seq, at: now, id: eventUUID(t.salt, t.seq), schemaID: schemaID, payload: p})
		ids[i] = t.replayID(t.seq, now)
	}
	t.notify()
	return ids
}

// trim drops events published, and forgets replay ids minted, before horizon (t.mu held).
func (t *topic) trim(horizon time.Time) {
	m := 0
	for m < len(t.minted) && t.minted[m].at.Before(horizon) {
		m++
	}
	if m > 0 {
		t.minted = append(t.minted[:0:0], t.minted[m:]...)
	}
	i := 0
	for i < len(t.log) && t.log[i].at.Before(horizon) {
		i++
	}
	if i > 0 {
		t.log = append(t.log[:0:0], t.log[i:]...)
	}
}

// ResetStream simulates an org migration: every replay id issued so far becomes invalid (CUSTOM
// from one is refused as corrupted); retained events stay and get new ids.
func (s *Server) ResetStream(name string) error {
	t := s.topic(name)
	if t == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	t.mu.Lock()
	// A new salt that differs in the 16 bits the ids carry.
	for old := t.salt; (t.salt^old)&0xffff == 0; {
		t.salt = t.salt*2654435761 + 1
	}
	t.mu.Unlock()
	return nil
}

// Retained returns the number of events of a topic still within the retention window.
func (s *Server) Retained(name string) int {
	t := s.topic(name)
	if t == nil {
		return 0
	}
	horizon := s.now().Add(-s.opts.Retention)
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.log {
		if !e.at.Before(horizon) {
			n++
		}
	}
	return n
}

// after returns up to max retained events with a sequence greater than seq, and the channel
// that is closed on the next publish.
func (t *topic) after(seq uint64, max int, horizon time.Time) ([]entry, chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []entry
	for _, e := range t.log {
		if len(out) == max {
			break
		}
		if e.seq > seq && !e.at.Before(horizon) {
			out = append(out, e)
		}
	}
	return out, t.changed
}

// mark returns a fresh replay id for the tip of the stream (a keepalive's latest_replay_id):
// a valid resume point after every event published so far, minted now.
func (t *topic) mark(now time.Time) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.tipAt.Equal(now) {
		t.seq++
		t.tipAt = now
	}
	return t.replayID(t.seq, now)
}

func (t *topic) tip() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

func eventUUID(salt uint32, seq uint64) string {
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", salt, seq>>48&0xffff, seq>>36&0xfff, seq>>24&0xfff, seq&0xffffffffffff)
}

func hash32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
