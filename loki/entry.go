package loki

import (
	"math"
	"time"
	"unicode/utf8"
)

// Entry is one log entry to push.
type Entry struct {
	// Timestamp is the entry's time, sent with nanosecond precision. It must
	// lie within the int64 Unix-nanosecond range (years 1678–2262); the zero
	// time is rejected.
	Timestamp time.Time
	// Labels is the entry's complete stream label set.
	Labels Labels
	// Line is the log line, sent byte for byte (capped by Options.MaxLineBytes).
	Line string
	// Metadata is the entry's structured metadata, sent in the given order.
	// Give a deterministic order so that resends are byte-identical (Loki's
	// duplicate detection compares them).
	Metadata []Label
	// Ref is an opaque value chosen by the caller (for example the position of
	// the entry's checkpoint); the client reports every outcome with it.
	Ref uint64
}

// TruncatedMetadataName is the structured-metadata field added to an entry
// whose line was cut by the line cap; its value is the original line length in
// bytes. It is left off (Truncation.Marked) where it would break the
// receiver's structured-metadata Limits, which would refuse the entry whole.
const TruncatedMetadataName = "sf2loki_truncated"

// EventTimeMetadata is the structured-metadata field that keeps an entry's own time (RFC 3339
// with nanoseconds, UTC) when it is shipped with another timestamp: re-stamped to fit the
// receiver's ordering rules, or a backfill shipped at ingest time (docs/ordering.md).
const EventTimeMetadata = "event_time"

// DefaultMaxLineBytes is the default line cap, Loki's max_line_size default.
const DefaultMaxLineBytes = 256 << 10

var (
	minTimestamp = time.Unix(0, math.MinInt64)
	maxTimestamp = time.Unix(0, math.MaxInt64)
)

// CapLine returns line cut to at most max bytes on a UTF-8 character boundary,
// and whether it was cut. A max <= 0 means no cap. If the bytes before the cut
// are not valid UTF-8 the cut falls exactly at max.
func CapLine(line string, max int) (string, bool) {
	if max <= 0 || len(line) <= max {
		return line, false
	}
	cut := max
	for back := 0; back < utf8.UTFMax && cut > 0; back++ {
		if utf8.RuneStart(line[cut]) {
			return line[:cut], true
		}
		cut--
	}
	return line[:max], true
}
