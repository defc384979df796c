package shape

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// defaultAliases maps normalised names whose mechanisms spell one category differently.
// LoginHistory (a SOQL object) records the same logins as LoginEvent and the Login
// EventLogFile.
var defaultAliases = map[string]string{
	"loginhistory": "login",
}

// DefaultAliases returns the built-in category alias table (normalised name → category).
func DefaultAliases() map[string]string { return maps.Clone(defaultAliases) }

// categorySuffixes are stripped (one, the first that matches) from a normalised name, so
// LoginEventStream, LoginEvent and Login are one category.
var categorySuffixes = []string{"eventstream", "eventstore", "event"}

// normalizeCategory lower-cases name, drops a Pub/Sub channel prefix (/event/, /data/), spaces
// and one Event/EventStream/EventStore suffix.
func normalizeCategory(name string) string {
	n := strings.TrimSpace(name)
	for _, p := range []string{"/event/", "/data/"} {
		if len(n) >= len(p) && strings.EqualFold(n[:len(p)], p) {
			n = n[len(p):]
		}
	}
	n = strings.ToLower(strings.ReplaceAll(n, " ", ""))
	for _, s := range categorySuffixes {
		if len(n) > len(s) && strings.HasSuffix(n, s) {
			n = n[:len(n)-len(s)]
			break
		}
	}
	return n
}

// Category returns the event category that a source's type, object or topic name feeds: the
// name lower-cased, without spaces, a Pub/Sub channel prefix or an Event / EventStream /
// EventStore suffix, then mapped through the alias table (DefaultAliases plus extra, whose
// keys and values are normalised the same way). Login (EventLogFile), LoginEvent (SOQL Big
// Object), /event/LoginEventStream (Pub/Sub) and LoginHistory (SOQL) are all "login".
func Category(name string, extra map[string]string) string {
	return categoryWith(name, mergeAliases(extra))
}

func categoryWith(name string, aliases map[string]string) string {
	n := normalizeCategory(name)
	if a, ok := aliases[n]; ok {
		return a
	}
	return n
}

func mergeAliases(extra map[string]string) map[string]string {
	m := DefaultAliases()
	for k, v := range extra {
		m[normalizeCategory(k)] = normalizeCategory(v)
	}
	return m
}

// Wildcard is the name that stands for every type or topic a source can discover.
const Wildcard = "*"

// Claim is one configured name of one source: an EventLogFile event type, a SOQL object, the
// ApexLog source, a Pub/Sub topic, or Wildcard.
type Claim struct {
	// Source is the source's config name (eventlogfile, soql, apexlog, pubsub).
	Source string
	// Name is the type, object or topic as configured.
	Name string
	// Path is the configuration key the name comes from, for the error.
	Path string
}

// ErrOverlap is wrapped by every *OverlapError.
var ErrOverlap = errors.New("two sources feed one event category")

// OverlapError reports two sources feeding one event category. Category is Wildcard when two
// sources both discover everything.
type OverlapError struct {
	Category      string
	First, Second Claim
}

// Error implements error; it names the category and both claims.
func (e *OverlapError) Error() string {
	if e.Category == Wildcard {
		return fmt.Sprintf("both %s (%s) and %s (%s) discover every type, so every shared category would be shipped twice; list the types of one explicitly or set allow_overlap",
			e.First.Source, e.First.Path, e.Second.Source, e.Second.Path)
	}
	return fmt.Sprintf("event category %q is fed by both %s %s (%s) and %s %s (%s): Loki would hold every event twice; keep one, or set allow_overlap",
		e.Category, e.First.Source, e.First.Name, e.First.Path, e.Second.Source, e.Second.Name, e.Second.Path)
}

// Unwrap makes errors.Is(err, ErrOverlap) true.
func (e *OverlapError) Unwrap() error { return ErrOverlap }

// CheckOverlap is the startup guard: it returns one *OverlapError (joined) per category that
// claims of two different sources share, and one when two sources both claim Wildcard. A
// wildcard next to explicit names of another source is not an overlap here: discovery skips
// the categories other sources own (see Owned). Claims of the same source may share a
// category.
func CheckOverlap(claims []Claim, extraAliases map[string]string) error {
	aliases := mergeAliases(extraAliases)
	first := map[string]Claim{}
	var wildcard *Claim
	var errs []error
	reported := map[string]bool{}
	for _, c := range claims {
		if c.Name == Wildcard {
			if wildcard != nil && wildcard.Source != c.Source && !reported[Wildcard] {
				reported[Wildcard] = true
				errs = append(errs, &OverlapError{Category: Wildcard, First: *wildcard, Second: c})
			}
			if wildcard == nil {
				cc := c
				wildcard = &cc
			}
			continue
		}
		cat := categoryWith(c.Name, aliases)
		if cat == "" {
			continue
		}
		prev, ok := first[cat]
		switch {
		case !ok:
			first[cat] = c
		case prev.Source != c.Source && !reported[cat]:
			reported[cat] = true
			errs = append(errs, &OverlapError{Category: cat, First: prev, Second: c})
		}
	}
	return errors.Join(errs...)
}

// Owned returns the categories the claims of sources other than source feed (wildcards
// excluded), sorted: what source's discovery must skip.
func Owned(claims []Claim, source string, extraAliases map[string]string) []string {
	aliases := mergeAliases(extraAliases)
	var out []string
	for _, c := range claims {
		if c.Source == source || c.Name == Wildcard {
			continue
		}
		if cat := categoryWith(c.Name, aliases); cat != "" {
			out = append(out, cat)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
