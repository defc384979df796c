package soql

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// Defaults of Object fields left zero.
const (
	DefaultLookback      = time.Hour
	DefaultOverlap       = 5 * time.Minute
	DefaultMaxOverlapIDs = 500
	// BigObjectPageSize is the most rows one Big Object query returns, and the default
	// PageSize.
	BigObjectPageSize = 200
	// fullPage is the largest page of an explicit field list: a standard query whose run can
	// take at least this many rows is sent without LIMIT and paged by nextRecordsUrl.
	fullPage = 2000
	// DefaultBufferRows bounds the Big Object rows held in memory at once.
	DefaultBufferRows = 2000
	// DefaultBigObjectSpan is the first EventDate window of a Big Object drain; it adapts.
	DefaultBigObjectSpan = time.Hour
)

// Names of the index fields of Real-Time Event Monitoring Big Objects.
const (
	EventDate       = "EventDate"
	EventIdentifier = keyset.EventIdentifier
)

// Options configures the SOQL source.
type Options struct {
	// Client is the org's client (required). Its describe cache makes describe one call per
	// object per run.
	Client *salesforce.Client
	// Objects are the objects polled, one key each. Names must be unique.
	Objects []Object
	// Shaper shapes rows into entries; nil ships every field in the JSON line with the
	// default labels.
	Shaper *shape.Shaper
	// Counter attributes this source's API calls (see Source.Calls); nil makes one.
	Counter *salesforce.Counter
	// OrgID is the sf_org_id label; empty means Client.OrgID (read at Open).
	OrgID string
	// Labels are further stream labels of every entry (the org label in multi-org setups).
	Labels []loki.Label
	// Now is the wall clock (nil = time.Now). Salesforce's clock is derived from it with the
	// client's measured offset.
	Now func() time.Time
	// Log is used when the job gives none (nil = slog.Default()).
	Log *slog.Logger
}

// Object is one polled sObject.
type Object struct {
	// Name is the sObject API name (LoginHistory, Audit_Event__c, LoginEvent).
	Name string
	// TimestampField is the increasing datetime field the cursor follows. Empty means
	// DefaultTimestampField(Name, BigObject). Big Objects must use EventDate.
	TimestampField string
	// Fields are the fields selected (relationship paths allowed). Empty means every field of
	// describe except base64 and compound ones. Id (EventIdentifier for Big Objects) and the
	// timestamp field are always added.
	Fields []string
	// Where is an extra SOQL condition ANDed to every query, written by the operator
	// (CheckWhere validates its shape). Not allowed for Big Objects.
	Where string
	// BigObject selects the Big Object reader (EventDate DESC drains keyed on EventIdentifier).
	BigObject bool
	// Lookback is how far back a key without a usable cursor starts (0 = DefaultLookback).
	Lookback time.Duration
	// Start, when set, is where a key without a usable cursor starts, instead of now − Lookback.
	// A stored cursor always wins.
	Start time.Time
	// Overlap is the overlap window re-read each run for rows that became visible late
	// (0 = DefaultOverlap; negative = no window).
	Overlap time.Duration
	// MaxOverlapIDs caps the ids remembered in the window (0 = DefaultMaxOverlapIDs); past it
	// the window shrinks, with a warning.
	MaxOverlapIDs int
	// Settle leaves rows younger than now − Settle for a later run (0 = none).
	Settle time.Duration
	// NoLateProbe leaves out the probe for rows that became visible later than the overlap
	// window reaches back ((before the window) AND Id > max_id); such rows are then missed
	// silently, as they always are for Big Objects.
	NoLateProbe bool
	// PageSize is the LIMIT of one Big Object query, at most BigObjectPageSize (0 =
	// BigObjectPageSize). Standard objects are read with one query per run, paged by
	// nextRecordsUrl in pages of the client's BatchSize (up to 2000 rows); a LIMIT is added only
	// when the run's budget is smaller than a page.
	PageSize int
	// MaxRecordsPerRun ends the key's run after this many records (0 = no limit but the job's
	// budget), waiting for the next run (source.ErrWaiting): the run is not caught up.
	MaxRecordsPerRun int
	// BufferRows bounds the Big Object rows held in memory (0 = DefaultBufferRows).
	BufferRows int
}

// DefaultTimestampField returns the timestamp field used when none is configured: EventDate for
// Big Objects, LoginTime for LoginHistory, CreatedDate otherwise.
func DefaultTimestampField(object string, bigObject bool) string {
	switch {
	case bigObject:
		return EventDate
	case strings.EqualFold(object, "LoginHistory"):
		return "LoginTime"
	}
	return "CreatedDate"
}

// kind is what keys the object's rows: EventIdentifier for Big Objects, Id otherwise.
func (o Object) kind() keyset.Kind {
	if o.BigObject {
		return keyset.ByEventIdentifier
	}
	return keyset.ByID
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Object) withDefaults() Object {
	if o.TimestampField == "" {
		o.TimestampField = DefaultTimestampField(o.Name, o.BigObject)
	}
	if o.Lookback <= 0 {
		o.Lookback = DefaultLookback
	}
	switch {
	case o.Overlap == 0:
		o.Overlap = DefaultOverlap
	case o.Overlap < 0:
		o.Overlap = 0
	}
	if o.MaxOverlapIDs <= 0 {
		o.MaxOverlapIDs = DefaultMaxOverlapIDs
	}
	if o.PageSize <= 0 || o.PageSize > BigObjectPageSize {
		o.PageSize = BigObjectPageSize
	}
	if o.BufferRows <= 0 {
		o.BufferRows = DefaultBufferRows
	}
	o.BufferRows = max(o.BufferRows, o.PageSize)
	return o
}

// ErrInvalidObject marks an Object that Validate refuses.
var ErrInvalidObject = errors.New("soql: invalid object")

// ObjectError names the invalid field of one object (Go field name of Object).
type ObjectError struct {
	Object string
	Field  string
	Msg    string
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("soql: object %s: %s: %s", e.Object, e.Field, e.Msg)
}

// Unwrap makes errors.Is(err, ErrInvalidObject) true.
func (e *ObjectError) Unwrap() error { return ErrInvalidObject }

// Validate checks o without any network call: identifiers and field paths are valid API names,
// the Where clause has a sane shape, Big Objects use EventDate and no Where. The config layer
// calls it at load; New calls it too.
func (o Object) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ObjectError{Object: o.Name, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if err := salesforce.ValidateIdentifier(o.Name); err != nil {
		bad("Name", "%v", err)
	}
	if o.TimestampField != "" {
		if err := salesforce.ValidateFieldPath(o.TimestampField); err != nil {
			bad("TimestampField", "%v", err)
		} else if strings.Contains(o.TimestampField, ".") {
			bad("TimestampField", "must be a field of the object itself, not a relationship path")
		}
	}
	for i, f := range o.Fields {
		if err := salesforce.ValidateFieldPath(f); err != nil {
			bad(fmt.Sprintf("Fields[%d]", i), "%v", err)
		}
	}
	if o.Where != "" {
		if err := CheckWhere(o.Where); err != nil {
			bad("Where", "%v", err)
		}
	}
	if o.BigObject {
		if o.TimestampField != "" && !strings.EqualFold(o.TimestampField, EventDate) {
			bad("TimestampField", "a Big Object is read on its index field EventDate, not %s", o.TimestampField)
		}
		if o.Where != "" {
			bad("Where", "Big Objects can only be filtered on their index fields; where is not supported")
		}
	}
	if o.PageSize < 0 || o.PageSize > BigObjectPageSize {
		bad("PageSize", "%d is outside 1..%d", o.PageSize, BigObjectPageSize)
	}
	if o.MaxRecordsPerRun < 0 {
		bad("MaxRecordsPerRun", "must not be negative")
	}
	if o.Lookback < 0 || o.Settle < 0 {
		bad("Lookback", "durations must not be negative")
	}
	return errors.Join(errs...)
}

// CheckWhere checks that an operator's WHERE condition is one self-contained boolean
// expression: string literals closed, parentheses balanced, and none of the clauses that would
// change the query's shape (ORDER BY, LIMIT, OFFSET, GROUP BY, HAVING, FOR, WITH, USING, a
// nested SELECT). The condition is always wrapped in parentheses.
func CheckWhere(where string) error {
	if strings.TrimSpace(where) == "" {
		return errors.New("is empty")
	}
	depth := 0
	var word strings.Builder
	checkWord := func() error {
		w := strings.ToUpper(word.String())
		word.Reset()
		switch w {
		case "ORDER", "LIMIT", "OFFSET", "GROUP", "HAVING", "FOR", "WITH", "USING", "SELECT", "FROM":
			return fmt.Errorf("may not contain %s: it must be a condition only", w)
		}
		return nil
	}
	for i := 0; i < len(where); i++ {
		c := where[i]
		switch {
		case c == '\'':
			if err := checkWord(); err != nil {
				return err
			}
			j := i + 1
			for ; j < len(where); j++ {
				if where[j] == '\\' {
					j++
					continue
				}
				if where[j] == '\'' {
					break
				}
			}
			if j >= len(where) {
				return errors.New("has an unterminated string literal")
			}
			i = j
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return errors.New("has an unbalanced ')'")
			}
		case c == ';':
			return errors.New("may not contain ';'")
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			word.WriteByte(c)
			continue
		}
		if err := checkWord(); err != nil {
			return err
		}
	}
	if err := checkWord(); err != nil {
		return err
	}
	if depth != 0 {
		return errors.New("has an unbalanced '('")
	}
	return nil
}
