package keyset

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/salesforce"
)

// Kind says which field keys a row and how keys compare.
type Kind int

const (
	// ByID keys rows on Id: compared on the case-sensitive 15-character form, byte-wise (the
	// order of Salesforce's base-62 ids).
	ByID Kind = iota
	// ByEventIdentifier keys Big Object rows on EventIdentifier (a UUID), compared without case.
	ByEventIdentifier
)

// EventIdentifier is the key field of ByEventIdentifier.
const EventIdentifier = "EventIdentifier"

// Field returns the name of the key field.
func (k Kind) Field() string {
	if k == ByEventIdentifier {
		return EventIdentifier
	}
	return "Id"
}

// Norm returns the form of key that is compared and hashed.
func (k Kind) Norm(key string) string {
	if k == ByEventIdentifier {
		return strings.ToLower(key)
	}
	if len(key) > 15 {
		return key[:15]
	}
	return key
}

// Position is a point in (timestamp, key) order. An empty key lies before every key of its
// timestamp.
type Position struct {
	TS  time.Time
	Key string
}

// Cmp orders two positions.
func (k Kind) Cmp(a, b Position) int {
	if c := a.TS.Compare(b.TS); c != 0 {
		return c
	}
	return strings.Compare(k.Norm(a.Key), k.Norm(b.Key))
}

// hash48 is the 48-bit FNV-1a hash of a normalised key that the seen set stores.
func (k Kind) hash48(key string) uint64 {
	h := uint64(14695981039346656037)
	n := k.Norm(key)
	for i := 0; i < len(n); i++ {
		h ^= uint64(n[i])
		h *= 1099511628211
	}
	return h >> 16
}

// ValidKey checks a key read back from a cursor: an Id, or an EventIdentifier (any short text
// without control characters; it is quoted with QuoteString in queries).
func (k Kind) ValidKey(key string) error {
	if k == ByEventIdentifier {
		if key == "" || len(key) > 255 || !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%q is not an EventIdentifier", key)
		}
		return nil
	}
	return salesforce.ValidateID(key)
}

// Quote returns a key as a SOQL literal (ids validated).
func (k Kind) Quote(key string) (string, error) {
	if k == ByEventIdentifier {
		return salesforce.QuoteString(key), nil
	}
	return salesforce.QuoteID(key)
}
