package loki

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// wireStream and wireEntry are a decoded request before validation.
type wireStream struct {
	labels  string
	entries []wireEntry
}

type wireEntry struct {
	ts       time.Time
	line     string
	metadata []Pair
}

// decodeProto decodes a logproto.PushRequest (field numbers per Loki's
// pkg/push/push.proto). Unknown fields are skipped as protobuf requires; the
// query-side field EntryAdapter.parsed is refused because clients must not
// send it.
func decodeProto(b []byte) ([]wireStream, error) {
	var streams []wireStream
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 {
			return nil // format (2) and anything newer: ignored
		}
		if typ != protowire.BytesType {
			return errors.New("PushRequest.streams has the wrong wire type")
		}
		s, err := decodeStream(v)
		if err != nil {
			return err
		}
		streams = append(streams, s)
		return nil
	})
	return streams, err
}

func decodeStream(b []byte) (wireStream, error) {
	var s wireStream
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 1:
			if typ != protowire.BytesType {
				return errors.New("StreamAdapter.labels has the wrong wire type")
			}
			s.labels = string(v)
		case 2:
			if typ != protowire.BytesType {
				return errors.New("StreamAdapter.entries has the wrong wire type")
			}
			e, err := decodeEntry(v)
			if err != nil {
				return err
			}
			s.entries = append(s.entries, e)
		case 3:
			if typ != protowire.VarintType {
				return errors.New("StreamAdapter.hash has the wrong wire type")
			}
		}
		return nil
	})
	return s, err
}

func decodeEntry(b []byte) (wireEntry, error) {
	e := wireEntry{ts: time.Unix(0, 0)}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case 1:
			if typ != protowire.BytesType {
				return errors.New("EntryAdapter.timestamp has the wrong wire type")
			}
			ts, err := decodeTimestamp(v)
			if err != nil {
				return err
			}
			e.ts = ts
		case 2:
			if typ != protowire.BytesType {
				return errors.New("EntryAdapter.line has the wrong wire type")
			}
			e.line = string(v)
		case 3:
			if typ != protowire.BytesType {
				return errors.New("EntryAdapter.structuredMetadata has the wrong wire type")
			}
			p, err := decodePair(v)
			if err != nil {
				return err
			}
			e.metadata = append(e.metadata, p)
		case 4:
			return errors.New("EntryAdapter.parsed is query-side only and must not be pushed")
		}
		return nil
	})
	return e, err
}

func decodeTimestamp(b []byte) (time.Time, error) {
	var sec, nsec int64
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 && num != 2 {
			return nil
		}
		if typ != protowire.VarintType {
			return errors.New("google.protobuf.Timestamp field has the wrong wire type")
		}
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num == 1 {
			sec = int64(x)
		} else {
			nsec = int64(int32(x))
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	if nsec < 0 || nsec > 999_999_999 {
		return time.Time{}, fmt.Errorf("timestamp nanos %d out of range", nsec)
	}
	return time.Unix(sec, nsec), nil
}

func decodePair(b []byte) (Pair, error) {
	var p Pair
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 && num != 2 {
			return nil
		}
		if typ != protowire.BytesType {
			return errors.New("LabelPairAdapter field has the wrong wire type")
		}
		if num == 1 {
			p.Name = string(v)
		} else {
			p.Value = string(v)
		}
		return nil
	})
	return p, err
}

// eachField walks the fields of one message. For varint fields v holds the
// raw varint bytes; for length-delimited fields, the payload.
func eachField(b []byte, f func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			p, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = p, m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			v, n = b[:m], m
		}
		if err := f(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// decodeJSON decodes Loki's v1 JSON push body. Keys must be exactly
// "streams", "stream" and "values" (Loki's decoder may be laxer about case);
// timestamps must be JSON strings of Unix nanoseconds; each value has 2 or 3
// elements, the third an object of string values.
func decodeJSON(b []byte) ([]wireStream, error) {
	var top map[string]json.RawMessage
	if err := strictUnmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("decoding JSON body: %w", err)
	}
	raw, ok := top["streams"]
	if !ok {
		return nil, errors.New(`JSON body has no "streams" key`)
	}
	var rawStreams []map[string]json.RawMessage
	if err := strictUnmarshal(raw, &rawStreams); err != nil {
		return nil, fmt.Errorf("decoding streams: %w", err)
	}
	streams := make([]wireStream, 0, len(rawStreams))
	for i, rs := range rawStreams {
		var labels map[string]string
		if v, ok := rs["stream"]; ok {
			if err := strictUnmarshal(v, &labels); err != nil {
				return nil, fmt.Errorf("stream %d: labels: %w", i, err)
			}
		}
		v, ok := rs["values"]
		if !ok {
			return nil, fmt.Errorf(`stream %d has no "values" key`, i)
		}
		var values [][]json.RawMessage
		if err := strictUnmarshal(v, &values); err != nil {
			return nil, fmt.Errorf("stream %d: values: %w", i, err)
		}
		s := wireStream{labels: formatLabels(mapPairs(labels))}
		for j, val := range values {
			e, err := decodeJSONValue(val)
			if err != nil {
				return nil, fmt.Errorf("stream %d value %d: %w", i, j, err)
			}
			s.entries = append(s.entries, e)
		}
		streams = append(streams, s)
	}
	return streams, nil
}

func decodeJSONValue(val []json.RawMessage) (wireEntry, error) {
	var e wireEntry
	if len(val) != 2 && len(val) != 3 {
		return e, fmt.Errorf("has %d elements, want 2 or 3", len(val))
	}
	ts := bytes.TrimSpace(val[0])
	if len(ts) == 0 || ts[0] != '"' {
		return e, errors.New("timestamp must be a JSON string of Unix nanoseconds")
	}
	var tss string
	if err := strictUnmarshal(ts, &tss); err != nil {
		return e, err
	}
	ns, err := strconv.ParseInt(tss, 10, 64)
	if err != nil {
		return e, fmt.Errorf("timestamp %q: %w", tss, err)
	}
	e.ts = time.Unix(0, ns)
	if err := strictUnmarshal(val[1], &e.line); err != nil {
		return e, fmt.Errorf("line: %w", err)
	}
	if len(val) == 3 {
		var md map[string]string
		if err := strictUnmarshal(val[2], &md); err != nil {
			return e, fmt.Errorf("structured metadata: %w", err)
		}
		e.metadata = mapPairs(md)
	}
	return e, nil
}

func strictUnmarshal(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return errors.New("null is not allowed here")
	}
	return json.Unmarshal(b, v)
}

// parseLabels parses a stream label string {name="value", ...} the way Loki
// does for pushes: names [a-zA-Z_][a-zA-Z0-9_]*, only the = matcher, values
// double-quoted with Go escapes.
func parseLabels(s string) ([]Pair, error) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return nil, fmt.Errorf("labels %q: must be enclosed in braces", s)
	}
	t = strings.TrimSpace(t[1 : len(t)-1])
	var pairs []Pair
	for t != "" {
		i := 0
		for i < len(t) && (t[i] == '_' || t[i] >= 'a' && t[i] <= 'z' || t[i] >= 'A' && t[i] <= 'Z' || i > 0 && t[i] >= '0' && t[i] <= '9') {
			i++
		}
		if i == 0 {
			return nil, fmt.Errorf("labels %q: expected a label name at %q", s, t)
		}
		name := t[:i]
		t = strings.TrimSpace(t[i:])
		if !strings.HasPrefix(t, "=") || strings.HasPrefix(t, "=~") {
			return nil, fmt.Errorf("labels %q: expected = after %s", s, name)
		}
		t = strings.TrimSpace(t[1:])
		if !strings.HasPrefix(t, `"`) {
			return nil, fmt.Errorf("labels %q: value of %s must be double-quoted", s, name)
		}
		q, err := strconv.QuotedPrefix(t)
		if err != nil {
			return nil, fmt.Errorf("labels %q: value of %s: %w", s, name, err)
		}
		v, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("labels %q: value of %s: %w", s, name, err)
		}
		pairs = append(pairs, Pair{Name: name, Value: v})
		t = strings.TrimSpace(t[len(q):])
		if t == "" {
			break
		}
		if t[0] != ',' {
			return nil, fmt.Errorf("labels %q: expected , or } after the value of %s", s, name)
		}
		t = strings.TrimSpace(t[1:])
		if t == "" {
			return nil, fmt.Errorf("labels %q: trailing comma", s)
		}
	}
	return pairs, nil
}
