package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Field is one field of a describe answer.
type Field struct {
	Name       string `json:"name"`
	Type       string `json:"type"` // id, string, datetime, double, reference, picklist, base64, address, …
	Label      string `json:"label"`
	Length     int    `json:"length"`
	Nillable   bool   `json:"nillable"`
	Filterable bool   `json:"filterable"`
	Sortable   bool   `json:"sortable"`
	Groupable  bool   `json:"groupable"`
	Custom     bool   `json:"custom"`
	// RelationshipName names the parent relationship of a reference field
	// (LogUserId → LogUser).
	RelationshipName string   `json:"relationshipName"`
	ReferenceTo      []string `json:"referenceTo"`
}

// SObjectDescribe is the answer of /sobjects/{Name}/describe.
type SObjectDescribe struct {
	Name      string  `json:"name"`
	Label     string  `json:"label"`
	Custom    bool    `json:"custom"`
	Queryable bool    `json:"queryable"`
	Fields    []Field `json:"fields"`
}

// Field returns the field named name (exact API name), if described.
func (d *SObjectDescribe) Field(name string) (Field, bool) {
	for _, f := range d.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// unselectableTypes are field types left out of SelectableFields: base64
// blobs (EventLogFile.LogFile) are fetched as streams, and compound address /
// location values are also described as their component fields.
var unselectableTypes = map[string]bool{
	"base64":   true,
	"address":  true,
	"location": true,
}

// SelectableFields returns the names of the fields to list in an explicit
// SELECT (which, unlike FIELDS(ALL), allows 2000-row pages): every described
// field except base64 blobs and compound address/location fields, in
// describe order.
func (d *SObjectDescribe) SelectableFields() []string {
	out := make([]string, 0, len(d.Fields))
	for _, f := range d.Fields {
		if !unselectableTypes[f.Type] {
			out = append(out, f.Name)
		}
	}
	return out
}

// SObjectInfo is one entry of describeGlobal.
type SObjectInfo struct {
	Name         string `json:"name"`
	Label        string `json:"label"`
	KeyPrefix    string `json:"keyPrefix"`
	Custom       bool   `json:"custom"`
	Queryable    bool   `json:"queryable"`
	Retrieveable bool   `json:"retrieveable"`
	Searchable   bool   `json:"searchable"`
}

// GlobalDescribe is the answer of /sobjects/.
type GlobalDescribe struct {
	Encoding     string        `json:"encoding"`
	MaxBatchSize int           `json:"maxBatchSize"`
	SObjects     []SObjectInfo `json:"sobjects"`
}

// describeCache holds describes for the life of a Client (one invocation, or
// several when a warm Lambda keeps the client): each object is described at
// most once, even by concurrent callers, until ForgetDescribe; a failure is
// not cached.
type describeCache struct {
	mu      sync.Mutex
	entries map[string]*describeEntry // object name, or globalKey
}

// globalKey is the cache key of describeGlobal (not a valid object name).
const globalKey = "/"

type describeEntry struct {
	ready  chan struct{}
	obj    *SObjectDescribe
	global *GlobalDescribe
	err    error
}

// load returns the entry for key, running fetch once for all concurrent
// callers. A failed fetch is forgotten so the next caller tries again.
func (dc *describeCache) load(ctx context.Context, key string, fetch func(*describeEntry)) (*describeEntry, error) {
	for {
		dc.mu.Lock()
		if dc.entries == nil {
			dc.entries = map[string]*describeEntry{}
		}
		e, ok := dc.entries[key]
		if !ok {
			e = &describeEntry{ready: make(chan struct{})}
			dc.entries[key] = e
			dc.mu.Unlock()
			fetch(e)
			if e.err != nil {
				dc.mu.Lock()
				delete(dc.entries, key)
				dc.mu.Unlock()
			}
			close(e.ready)
			return e, e.err
		}
		dc.mu.Unlock()
		select {
		case <-e.ready:
			if e.err == nil {
				return e, nil
			}
			// The fetch we waited for failed (perhaps its caller's context
			// ended): try again ourselves.
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Describe returns the describe of object (field names and types), fetched at
// most once per Client.
func (c *Client) Describe(ctx context.Context, object string) (*SObjectDescribe, error) {
	if err := ValidateIdentifier(object); err != nil {
		return nil, err
	}
	e, err := c.describes.load(ctx, object, func(e *describeEntry) {
		var d SObjectDescribe
		e.err = c.authorizedJSON(ctx, KindDescribe, c.dataPath("sobjects/"+object+"/describe"), nil, func(b []byte) error {
			d = SObjectDescribe{}
			if err := json.Unmarshal(b, &d); err != nil {
				return err
			}
			if d.Name == "" || d.Fields == nil {
				return errors.New("not a describe result: missing name or fields")
			}
			return nil
		})
		if e.err != nil {
			e.err = fmt.Errorf("salesforce: describe %s: %w", object, e.err)
			return
		}
		e.obj = &d
	})
	if err != nil {
		return nil, err
	}
	return e.obj, nil
}

// ForgetDescribe drops the cached describe of object, so that the next
// Describe fetches it again. A client kept across invocations (a warm Lambda)
// otherwise keeps a field list that field-level security or an admin may have
// changed since: call it when a query answers INVALID_FIELD.
func (c *Client) ForgetDescribe(object string) {
	c.describes.forget(object)
}

// forget drops the entry of key; callers waiting for its fetch still get it.
func (dc *describeCache) forget(key string) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	delete(dc.entries, key)
}

// DescribeGlobal returns the list of the org's sObjects, fetched at most once
// per Client.
func (c *Client) DescribeGlobal(ctx context.Context) (*GlobalDescribe, error) {
	e, err := c.describes.load(ctx, globalKey, func(e *describeEntry) {
		var g GlobalDescribe
		e.err = c.authorizedJSON(ctx, KindDescribeGlobal, c.dataPath("sobjects/"), nil, func(b []byte) error {
			g = GlobalDescribe{}
			if err := json.Unmarshal(b, &g); err != nil {
				return err
			}
			if g.SObjects == nil {
				return errors.New("not a describeGlobal result: missing sobjects")
			}
			return nil
		})
		if e.err != nil {
			e.err = fmt.Errorf("salesforce: describeGlobal: %w", e.err)
			return
		}
		e.global = &g
	})
	if err != nil {
		return nil, err
	}
	return e.global, nil
}

// Limit is one org limit of /limits.
type Limit struct {
	Max       int64
	Remaining int64
}

// Limits returns the org limits keyed by name (DailyApiRequests, …). Entries
// without numeric Max and Remaining are skipped; per-app sub-limits are
// ignored.
func (c *Client) Limits(ctx context.Context) (map[string]Limit, error) {
	var raw map[string]json.RawMessage
	err := c.authorizedJSON(ctx, KindLimits, c.dataPath("limits"), nil, func(b []byte) error {
		raw = nil
		return json.Unmarshal(b, &raw)
	})
	if err != nil {
		return nil, fmt.Errorf("salesforce: limits: %w", err)
	}
	out := make(map[string]Limit, len(raw))
	for name, v := range raw {
		var l struct {
			Max       *json.Number `json:"Max"`
			Remaining *json.Number `json:"Remaining"`
		}
		if json.Unmarshal(v, &l) != nil || l.Max == nil || l.Remaining == nil {
			continue
		}
		mx, err1 := l.Max.Int64()
		rem, err2 := l.Remaining.Int64()
		if err1 != nil || err2 != nil {
			continue
		}
		out[name] = Limit{Max: mx, Remaining: rem}
	}
	return out, nil
}
