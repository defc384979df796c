package salesforce

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Record is one SOQL row as Salesforce sends it: field name → value, where a
// value is nil, bool, string, json.Number (numbers keep their exact text, e.g.
// "12899.0"), or a nested Record-shaped map[string]any for a relationship
// (LogUser → {attributes, Username}). The "attributes" member carries the
// sObject type.
type Record map[string]any

// Type returns the record's sObject type from attributes.type
// ("AggregateResult" for GROUP BY rows); "" when absent.
func (r Record) Type() string {
	a, _ := r["attributes"].(map[string]any)
	t, _ := a["type"].(string)
	return t
}

// Get returns the value at a field path; "LogUser.Username" walks the
// LogUser relationship. ok is false when a segment is missing or a
// relationship on the way is null.
func (r Record) Get(path string) (v any, ok bool) {
	cur := map[string]any(r)
	for {
		name, rest, more := strings.Cut(path, ".")
		v, ok = cur[name]
		if !ok || !more {
			return v, ok
		}
		next, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		cur, path = next, rest
	}
}

// String returns the value at path as text: strings as they are, numbers in
// their JSON form, booleans as "true"/"false". ok is false for missing, null
// and relationship values.
func (r Record) String(path string) (string, bool) {
	v, ok := r.Get(path)
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// Int64 returns the value at path as an integer. Salesforce sends
// integer-valued doubles as 12899.0, so numbers (and numeric strings) are
// parsed as floats when they are not plain integers; a fractional value is
// not an integer (ok false).
func (r Record) Int64(path string) (int64, bool) {
	s, ok := r.String(path)
	if !ok {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Float64 returns the numeric value at path.
func (r Record) Float64(path string) (float64, bool) {
	s, ok := r.String(path)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// Time returns the datetime at path, parsed with ParseDateTime.
func (r Record) Time(path string) (time.Time, bool) {
	s, ok := r.String(path)
	if !ok {
		return time.Time{}, false
	}
	t, err := ParseDateTime(s)
	return t, err == nil
}

// Flatten returns the record without "attributes", relationship objects
// folded into dotted keys ("LogUser.Username"). A null relationship stays a
// single nil-valued key. The result is a new map; r is not modified.
func (r Record) Flatten() map[string]any {
	out := make(map[string]any, len(r))
	flattenInto(out, "", r)
	return out
}

func flattenInto(out map[string]any, prefix string, m map[string]any) {
	for k, v := range m {
		if k == "attributes" {
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			flattenInto(out, prefix+k+".", sub)
			continue
		}
		out[prefix+k] = v
	}
}
