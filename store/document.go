package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SchemaVersion is the document schema this package reads and writes. A document without a
// schema field is a legacy Python sf2loki flat key map (see decode).
const SchemaVersion = 2

// LegacyFenceKey is the reserved key the Python file store kept its fence epoch under: never a
// checkpoint.
const LegacyFenceKey = "__fence_epoch__"

// Document is the checkpoint document: one JSON object per deployment (job group or backfill),
// holding the fence, the last writer's stamp and every checkpoint.
type Document struct {
	Schema       int                   `json:"schema"`
	Fence        *Fence                `json:"fence,omitempty"`
	Writer       *Stamp                `json:"writer,omitempty"`
	Checkpoints  map[string]Checkpoint `json:"checkpoints"`
	Counters     map[string]Counter    `json:"counters,omitempty"`
	LastCommitAt time.Time             `json:"last_commit_at,omitzero"`
	History      []ClaimRecord         `json:"history,omitempty"`
}

// LeaseRef names the lease whose epochs fence a document.
type LeaseRef struct {
	Kind      string `json:"kind"`                // "Lease" (Kubernetes) or "store" (embedded)
	Namespace string `json:"namespace,omitempty"` // Kubernetes namespace, empty otherwise
	Name      string `json:"name"`
}

// String renders the reference as kind/namespace/name.
func (r LeaseRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Fence records the epoch that owns the document. The embedded-lease fields (RenewedAt,
// Duration, Released) are used by lease/store, where the fence is the lease.
type Fence struct {
	Epoch     uint64    `json:"epoch"`
	Holder    string    `json:"holder,omitempty"`
	Lease     LeaseRef  `json:"lease,omitzero"`
	LeaseUID  string    `json:"lease_uid,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	RenewedAt time.Time `json:"renewed_at,omitzero"`
	Duration  Duration  `json:"duration,omitzero"`
	Released  bool      `json:"released,omitempty"`
}

// Stamp identifies one write. Every write carries a new stamp, so two versions never have the
// same bytes (defeating MD5-ETag ABA) and an ambiguous write is verified exactly.
type Stamp struct {
	Epoch      uint64    `json:"epoch"`
	Invocation string    `json:"invocation"`
	Seq        uint64    `json:"seq"`
	WrittenAt  time.Time `json:"written_at"`
	Host       string    `json:"host,omitempty"`
}

// same reports whether two stamps name the same write.
func (s *Stamp) same(o *Stamp) bool {
	return s != nil && o != nil && s.Epoch == o.Epoch && s.Invocation == o.Invocation && s.Seq == o.Seq
}

// Checkpoint is one source position. Value is raw JSON produced by the source (legacy Python
// values arrive as JSON strings).
type Checkpoint struct {
	Value     json.RawMessage `json:"value"`
	Epoch     uint64          `json:"epoch"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
}

// Counter is a small named number committed atomically with checkpoints (for example a daily
// egress byte budget: Window "2026-11-29", Value bytes used). Epoch and UpdatedAt are set by
// the writer.
type Counter struct {
	Value     int64     `json:"value"`
	Window    string    `json:"window,omitempty"`
	Epoch     uint64    `json:"epoch,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// ClaimRecord is one entry of the document's short claim history.
type ClaimRecord struct {
	Epoch     uint64    `json:"epoch"`
	Holder    string    `json:"holder"`
	Lease     LeaseRef  `json:"lease,omitzero"`
	LeaseUID  string    `json:"lease_uid,omitempty"`
	ClaimedAt time.Time `json:"claimed_at"`
}

// Duration is a time.Duration that encodes as a Go duration string ("30s").
type Duration time.Duration

// MarshalJSON encodes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\" or a number of seconds")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// FenceEpoch returns the document's fence epoch, 0 when unfenced.
func (d *Document) FenceEpoch() uint64 {
	if d == nil || d.Fence == nil {
		return 0
	}
	return d.Fence.Epoch
}

// Clone returns a deep copy.
func (d *Document) Clone() *Document {
	if d == nil {
		return nil
	}
	c := *d
	if d.Fence != nil {
		f := *d.Fence
		c.Fence = &f
	}
	if d.Writer != nil {
		w := *d.Writer
		c.Writer = &w
	}
	c.Checkpoints = make(map[string]Checkpoint, len(d.Checkpoints))
	for k, v := range d.Checkpoints {
		v.Value = bytes.Clone(v.Value)
		c.Checkpoints[k] = v
	}
	c.Counters = maps.Clone(d.Counters)
	c.History = slices.Clone(d.History)
	return &c
}

// Encode renders the document as indented JSON with a trailing newline.
func (d *Document) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Export returns what of the document moves to another deployment: the checkpoints match
// accepts, the counters and the last commit time — without the fence, the writer stamp and the
// claim history, which belong to this deployment's lease (copied into another document, a
// foreign fence would lock its live job out).
func (d *Document) Export(match func(string) bool) *Document {
	out := &Document{Schema: SchemaVersion, Checkpoints: map[string]Checkpoint{}, LastCommitAt: d.LastCommitAt}
	for k, cp := range d.Checkpoints {
		if match(k) {
			out.Checkpoints[k] = cp
		}
	}
	if len(d.Counters) > 0 {
		out.Counters = maps.Clone(d.Counters)
	}
	return out
}

// Imported is the change that writes an exported document's checkpoints and counters into
// another document (the Python fence key, which is no checkpoint, left out). An error says
// there is nothing to import.
func (d *Document) Imported() (Change, error) {
	if len(d.Checkpoints) == 0 && len(d.Counters) == 0 {
		return Change{}, errors.New("holds no checkpoints")
	}
	ch := Change{Set: make(map[string]json.RawMessage, len(d.Checkpoints))}
	for k, cp := range d.Checkpoints {
		if k != LegacyFenceKey {
			ch.Set[k] = cp.Value
		}
	}
	if len(d.Counters) > 0 {
		ch.Counters = make(map[string]Counter, len(d.Counters))
		for k, ct := range d.Counters {
			ch.Counters[k] = Counter{Value: ct.Value, Window: ct.Window}
		}
	}
	return ch, nil
}

// StringValue returns a checkpoint value holding a JSON string.
func StringValue(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// Decode parses stored bytes. object names the document in errors. legacy reports a Python
// flat key map, converted to checkpoints with its __fence_epoch__ as the fence epoch.
func Decode(object string, data []byte) (doc *Document, legacy bool, err error) {
	corrupt := func(reason string, err error) (*Document, bool, error) {
		return nil, false, &CorruptError{Object: object, Reason: reason, Err: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return corrupt("empty", nil)
	}
	if !utf8.Valid(data) {
		return corrupt("not valid UTF-8", nil)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return corrupt("not a JSON object", err)
	}
	if top == nil {
		return corrupt("not a JSON object (null)", nil)
	}
	rawSchema, ok := top["schema"]
	if !ok {
		if err := legacyShape(top); err != nil {
			return corrupt("no schema key, and not the Python sf2loki's flat key map either", err)
		}
		doc, err := decodeLegacy(top)
		if err != nil {
			return corrupt("legacy key map", err)
		}
		return doc, true, nil
	}
	var schema int
	if err := json.Unmarshal(rawSchema, &schema); err != nil {
		return corrupt("schema is not a number", err)
	}
	if schema != SchemaVersion {
		return corrupt(fmt.Sprintf("schema %d is not supported (this sf2loki reads schema %d; "+
			"a newer release may have written it)", schema, SchemaVersion), nil)
	}
	doc = &Document{}
	if err := json.Unmarshal(data, doc); err != nil {
		return corrupt("fields do not match schema 2", err)
	}
	if doc.Checkpoints == nil {
		doc.Checkpoints = map[string]Checkpoint{}
	}
	for k, c := range doc.Checkpoints {
		if len(c.Value) == 0 || string(c.Value) == "null" {
			return corrupt(fmt.Sprintf("checkpoint %q has no value (sf2loki never writes one; "+
				"`sf2loki state delete %s` restarts the key from its lookback)", k, k), nil)
		}
	}
	return doc, false, nil
}

// schemaFields are the top-level members of a schema-2 document. The Python flat map never
// has them as keys (its keys are namespaced: "eventlogfile:Login", "pubsub:/event/X", ...).
var schemaFields = []string{"fence", "writer", "checkpoints", "counters", "last_commit_at", "history"}

// legacyShape accepts only the Python sf2loki's document: a flat map of string values, with
// an optional __fence_epoch__ (a number or a numeric string). Anything else without a schema
// key — a schema-2 document that lost its schema member, a hand edit — must not be taken for
// it: its fence would be read as 0 and its cursors filed under wrong keys.
func legacyShape(top map[string]json.RawMessage) error {
	for _, f := range schemaFields {
		if _, ok := top[f]; ok {
			return fmt.Errorf("it has the schema-2 member %q but no schema: restore it from a backup, or add \"schema\": %d if it is otherwise intact", f, SchemaVersion)
		}
	}
	for k, v := range top {
		if k == LegacyFenceKey {
			continue
		}
		if len(v) == 0 || v[0] != '"' {
			return fmt.Errorf("key %q holds %s, not a string as the Python sf2loki wrote", k, clip(v))
		}
	}
	return nil
}

// clip shortens a raw value for a message.
func clip(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}

// decodeLegacy converts the Python flat map {key: value, "__fence_epoch__": N}. Keys travel
// verbatim (multi-org prefixes included); values keep their JSON form (strings in practice).
func decodeLegacy(top map[string]json.RawMessage) (*Document, error) {
	doc := &Document{Schema: SchemaVersion, Checkpoints: make(map[string]Checkpoint, len(top))}
	for k, v := range top {
		if k == LegacyFenceKey {
			epoch, err := legacyEpoch(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", LegacyFenceKey, err)
			}
			if epoch > 0 {
				doc.Fence = &Fence{Epoch: epoch}
			}
			continue
		}
		doc.Checkpoints[k] = Checkpoint{Value: bytes.Clone(v)}
	}
	return doc, nil
}

func legacyEpoch(v json.RawMessage) (uint64, error) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var any any
	if err := dec.Decode(&any); err != nil {
		return 0, err
	}
	switch x := any.(type) {
	case json.Number:
		n = x
	case string:
		n = json.Number(strings.TrimSpace(x))
	default:
		return 0, fmt.Errorf("not an integer: %s", v)
	}
	e, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		if i, ierr := strconv.ParseInt(string(n), 10, 64); ierr == nil && i < 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("not an integer: %s", v)
	}
	return e, nil
}
