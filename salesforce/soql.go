package salesforce

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// This file is the only place where values become SOQL text. Identifiers
// (object, field and event-type names) are validated, never quoted or
// escaped; values are formatted as literals. Anything that reaches a query
// from configuration or from a checkpoint must go through one of these.

// ErrInvalidSOQLValue marks a value refused by the SOQL helpers.
var ErrInvalidSOQLValue = errors.New("salesforce: invalid SOQL value")

// identRE is one API name segment: a letter, then letters, digits and
// underscores (which covers Custom__c, ns__Obj__c, My_Event__e, Rel__r,
// EventType names such as ApexExecution). Salesforce API names never start
// with a digit or underscore and never contain other characters.
var identRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

const (
	maxIdentLen = 255
	// maxPathSegments: SOQL allows five levels of child-to-parent
	// relationship, i.e. up to six names in a path.
	maxPathSegments = 6
)

// ValidateIdentifier checks that name is a single Salesforce API name
// (object, field or EventLogFile event type, including Custom__c, ns__Obj__c
// and Platform_Event__e) safe to splice into SOQL as is.
func ValidateIdentifier(name string) error {
	if len(name) > maxIdentLen || !identRE.MatchString(name) || strings.HasSuffix(name, "_") {
		return fmt.Errorf("%w: %q is not a Salesforce API name (letters, digits and underscores, starting with a letter)", ErrInvalidSOQLValue, excerpt([]byte(name)))
	}
	return nil
}

// ValidateFieldPath checks a field reference that may walk relationships,
// such as "LogUser.Username" or "Account__r.Owner.Name".
func ValidateFieldPath(path string) error {
	segs := strings.Split(path, ".")
	if len(segs) > maxPathSegments {
		return fmt.Errorf("%w: field path %q has more than %d segments", ErrInvalidSOQLValue, excerpt([]byte(path)), maxPathSegments)
	}
	for _, s := range segs {
		if err := ValidateIdentifier(s); err != nil {
			return fmt.Errorf("%w: in field path %q", err, excerpt([]byte(path)))
		}
	}
	return nil
}

var sfIDRE = regexp.MustCompile(`^[A-Za-z0-9]{15}([A-Za-z0-9]{3})?$`)

// ValidateID checks that id is a 15- or 18-character Salesforce record id.
// Ids read back from checkpoints must pass this before reaching a query or a
// download path.
func ValidateID(id string) error {
	if !sfIDRE.MatchString(id) {
		return fmt.Errorf("%w: %q is not a 15- or 18-character Salesforce id", ErrInvalidSOQLValue, excerpt([]byte(id)))
	}
	return nil
}

// QuoteID validates id and returns it as a SOQL string literal ('0AT…').
func QuoteID(id string) (string, error) {
	if err := ValidateID(id); err != nil {
		return "", err
	}
	return "'" + id + "'", nil
}

// soqlEscaper escapes the characters SOQL string literals treat specially.
var soqlEscaper = strings.NewReplacer(
	`\`, `\\`,
	`'`, `\'`,
	`"`, `\"`,
	"\n", `\n`,
	"\r", `\r`,
	"\t", `\t`,
	"\b", `\b`,
	"\f", `\f`,
)

// QuoteString returns s as a SOQL string literal: single-quoted, with
// backslash, quotes and control characters escaped. Any string is safe.
func QuoteString(s string) string {
	return "'" + soqlEscaper.Replace(s) + "'"
}

// QuoteStrings returns the literals of values joined for an IN list:
// ('a','b'). It returns "" for no values (an empty IN list is a syntax
// error; callers must leave the clause out).
func QuoteStrings(values []string) string {
	if len(values) == 0 {
		return ""
	}
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = QuoteString(v)
	}
	return "(" + strings.Join(q, ",") + ")"
}

// dateTimeLayout is the literal form: UTC, milliseconds, Z. Salesforce
// answers "+0000", which is not a legal literal.
const dateTimeLayout = "2006-01-02T15:04:05.000Z"

// FormatDateTime returns t as an unquoted SOQL dateTime literal in UTC with
// milliseconds: 2026-06-30T01:00:00.000Z.
func FormatDateTime(t time.Time) string {
	return t.UTC().Format(dateTimeLayout)
}

// parseLayouts are the datetime forms Salesforce answers or users write.
var parseLayouts = []string{
	"2006-01-02T15:04:05.999999999Z0700", // Salesforce: 2026-06-30T01:00:00.000+0000
	time.RFC3339Nano,                     // ...Z and ±hh:mm
	"2006-01-02T15:04:05.999999999Z07",
}

// ParseDateTime parses a datetime as Salesforce returns it
// (2026-06-30T01:00:00.000+0000) or as an ISO-8601 literal (…Z, ±hh:mm), with
// or without fractional seconds. The result is in UTC. Pass a persisted
// watermark through ParseDateTime and FormatDateTime before putting it into
// SOQL.
func ParseDateTime(s string) (time.Time, error) {
	for _, l := range parseLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: %q is not a Salesforce datetime", ErrInvalidSOQLValue, excerpt([]byte(s)))
}

// ParseDateTimeBytes is ParseDateTime over bytes. The form Salesforce answers
// (2026-06-30T01:00:00.000+0000) and the literal form (….000Z) are read
// without time.Parse; any other goes through ParseDateTime.
func ParseDateTimeBytes(b []byte) (time.Time, error) {
	if t, ok := parseMillisUTC(b); ok {
		return t, nil
	}
	return ParseDateTime(string(b))
}

// parseMillisUTC reads yyyy-mm-ddThh:mm:ss.sss followed by +0000 or Z; ok is
// false for anything else, including a date or time out of range (which
// ParseDateTime then refuses as time.Parse does).
func parseMillisUTC(b []byte) (time.Time, bool) {
	switch {
	case len(b) == 28 && string(b[23:]) == "+0000":
	case len(b) == 24 && b[23] == 'Z':
	default:
		return time.Time{}, false
	}
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' {
		return time.Time{}, false
	}
	ok := true
	num := func(s []byte) int {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				ok = false
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(b[0:4]), num(b[5:7]), num(b[8:10])
	hour, minute, sec, ms := num(b[11:13]), num(b[14:16]), num(b[17:19]), num(b[20:23])
	if !ok || year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	// time.Date's result, without its normalisation (a third of a row's timestamp's cost).
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(unix, int64(ms)*int64(time.Millisecond)).UTC(), true
}

// daysIn is the number of days of a month (1-12) of a year of the proleptic Gregorian calendar.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch is the number of days from 1970-01-01 to a valid date of a year from 1 to 9999
// (Howard Hinnant's days_from_civil).
func daysSinceEpoch(year, month, day int) int64 {
	if month <= 2 {
		year-- // the year starts in March: February's leap day ends it
	}
	era := year / 400 // year >= 0 here
	yoe := year - era*400
	doy := (153*((month+9)%12)+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097+doe) - 719468
}

// NormalizeDateTime turns any datetime ParseDateTime accepts into a SOQL
// literal, or returns an error (never the input unchanged).
func NormalizeDateTime(s string) (string, error) {
	t, err := ParseDateTime(s)
	if err != nil {
		return "", err
	}
	return FormatDateTime(t), nil
}
