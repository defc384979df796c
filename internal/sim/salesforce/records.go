package salesforce

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Record is one row for Insert, keyed by field name (any case). Values may
// be string, time.Time, int, int64, float64, bool or nil; datetime fields
// also accept RFC 3339 strings and Salesforce's "2006-01-02T15:04:05.000+0000".
// A missing Id is allocated; missing CreatedDate / SystemModstamp /
// LastModifiedDate default to the org's now, EventDate likewise, and
// EventIdentifier to a deterministic UUID.
type Record map[string]any

// Insert adds records to an object and returns their ids in order.
func (o *Org) Insert(objectName string, records ...Record) ([]string, error) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	obj := o.objectByName(objectName)
	if obj == nil || !obj.queryable() {
		return nil, fmt.Errorf("%w: %s", ErrUnknownObject, objectName)
	}
	ids := make([]string, 0, len(records))
	for _, in := range records {
		r, err := o.buildRecord(obj, in, now)
		if err != nil {
			return ids, err
		}
		o.addRecord(r)
		ids = append(ids, r.id)
	}
	return ids, nil
}

// Get returns a copy of a record's field values by id (15 or 18 characters).
func (o *Org) Get(id string) (Record, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	r := o.byID[to15(id)]
	if r == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	out := Record{}
	for k, v := range r.vals {
		out[k] = v
	}
	return out, nil
}

// SetVisibleAfter hides a record from queries (and downloads) until the
// org's clock reaches at, simulating Salesforce's visibility lag.
func (o *Org) SetVisibleAfter(id string, at time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.byID[to15(id)]
	if r == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	r.visibleAt = at
	return nil
}

// Count returns the number of records of an object, visible or not.
func (o *Org) Count(objectName string) int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	obj := o.objectByName(objectName)
	if obj == nil {
		return 0
	}
	return len(obj.records)
}

func (o *Org) buildRecord(obj *object, in Record, now time.Time) (*record, error) {
	r := &record{obj: obj, vals: make(map[string]any, len(obj.fields))}
	for k, v := range in {
		f := obj.byLower[strings.ToLower(k)]
		if f == nil {
			return nil, fmt.Errorf("%w: %s.%s", ErrUnknownField, obj.name, k)
		}
		cv, err := convertValue(f, v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", obj.name, f.Name, err)
		}
		r.vals[f.Name] = cv
	}
	if v, ok := r.vals["Id"].(string); ok && v != "" {
		id, ok := normalizeID(v)
		if !ok {
			return nil, fmt.Errorf("%w: id %q", ErrInvalidValue, v)
		}
		if o.byID[to15(id)] != nil {
			return nil, fmt.Errorf("%w: duplicate id %s", ErrInvalidValue, id)
		}
		r.id = id
	} else {
		for {
			obj.seq++
			id := makeID(obj.def.Prefix, obj.seq)
			if o.byID[to15(id)] == nil {
				r.id = id
				break
			}
		}
	}
	r.vals["Id"] = r.id
	ts := now.UTC().Truncate(time.Millisecond)
	setDefault := func(name string, v any) {
		if _, has := obj.byLower[strings.ToLower(name)]; !has {
			return
		}
		if cur, ok := r.vals[name]; !ok || cur == nil {
			r.vals[name] = v
		}
	}
	setDefault("CreatedDate", ts)
	if c, ok := r.vals["CreatedDate"].(time.Time); ok {
		ts = c
	}
	setDefault("LastModifiedDate", ts)
	setDefault("SystemModstamp", ts)
	setDefault("IsDeleted", false)
	if obj.byLower["eventdate"] != nil {
		setDefault("EventDate", ts)
		setDefault("EventIdentifier", uuidFor(uint64(o.opts.Seed), r.id))
	}
	if obj.custom() {
		setDefault("Name", fmt.Sprintf("AE-%06d", obj.seq))
	}
	return r, nil
}

func (o *Org) addRecord(r *record) {
	r.obj.records = append(r.obj.records, r)
	o.byID[to15(r.id)] = r
}

// uuidFor derives a stable UUID-formatted identifier.
func uuidFor(seed uint64, key string) string {
	a := splitmix64(seed ^ hashString(key))
	b := splitmix64(a ^ 0x5bd1e995)
	const hex = "0123456789abcdef"
	var out [36]byte
	j := 0
	for i := 0; i < 32; i++ {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			out[j] = '-'
			j++
		}
		var nib uint64
		if i < 16 {
			nib = a >> (60 - 4*uint(i)) & 0xf
		} else {
			nib = b >> (60 - 4*uint(i-16)) & 0xf
		}
		if i == 12 {
			nib = 4
		}
		out[j] = hex[nib]
		j++
	}
	return string(out[:])
}

func convertValue(f *fieldDef, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch f.Type {
	case typeDateTime, typeDate:
		var t time.Time
		switch x := v.(type) {
		case time.Time:
			t = x
		case string:
			p, err := parseAnyTime(x)
			if err != nil {
				return nil, fmt.Errorf("%w: %q", ErrInvalidValue, x)
			}
			t = p
		default:
			return nil, fmt.Errorf("%w: %T for datetime", ErrInvalidValue, v)
		}
		t = t.UTC().Truncate(time.Millisecond)
		if f.Type == typeDate {
			t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		}
		return t, nil
	case typeInt:
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) {
				return int64(x), nil
			}
		}
		return nil, fmt.Errorf("%w: %v for int", ErrInvalidValue, v)
	case typeDouble:
		switch x := v.(type) {
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		}
		return nil, fmt.Errorf("%w: %v for double", ErrInvalidValue, v)
	case typeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("%w: %v for boolean", ErrInvalidValue, v)
	case typeBase64:
		return nil, nil
	default:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %T for %s", ErrInvalidValue, v, f.Type.describeName())
		}
		if s == "" {
			return nil, nil // Salesforce stores empty text as null
		}
		if f.Type == typeID || f.Type == typeReference {
			if id, ok := normalizeID(s); ok {
				return id, nil
			}
		}
		return s, nil
	}
}

func parseAnyTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000-0700", "2006-01-02T15:04:05-0700", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("unparseable time %q", s)
}

// scheduledChange is a data change applied once the clock reaches at
// (e.g. a Daily EventLogFile regenerated in place).
type scheduledChange struct {
	at    time.Time
	apply func()
}

// schedule registers a change; callers hold o.mu.
func (o *Org) schedule(at time.Time, apply func()) {
	o.scheduled = append(o.scheduled, scheduledChange{at: at, apply: apply})
	sort.SliceStable(o.scheduled, func(i, j int) bool { return o.scheduled[i].at.Before(o.scheduled[j].at) })
}

// applyDue runs the scheduled changes whose time has come.
func (o *Org) applyDue(now time.Time) {
	o.mu.RLock()
	due := len(o.scheduled) > 0 && !o.scheduled[0].at.After(now)
	o.mu.RUnlock()
	if !due {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.scheduled) > 0 && !o.scheduled[0].at.After(now) {
		c := o.scheduled[0]
		o.scheduled = o.scheduled[1:]
		c.apply()
	}
}

// sfDateTime formats a datetime the way Salesforce serializes it in JSON.
func sfDateTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000+0000")
}

// javaDouble formats a float like Java's Double.toString, which is how
// Salesforce serializes double fields (12899.0, 1.073741824E9).
func javaDouble(v float64) string {
	if v == 0 {
		return "0.0"
	}
	a := math.Abs(v)
	if a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(v, 'E', -1, 64)
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(exp, "+-")
	exp = strings.TrimLeft(exp, "0")
	if exp == "" {
		exp = "0"
	}
	if neg {
		exp = "-" + exp
	}
	return mant + "E" + exp
}
