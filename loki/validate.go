package loki

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Loki's reasons for refusing an entry (the reason label of its
// loki_discarded_samples_total), as the client reports them. A rejection the
// client predicted has Status 0; one the receiver answered carries the reason
// read from the answer to a request holding only that entry.
const (
	ReasonTooOld                Reason = "greater_than_max_sample_age"
	ReasonTooNew                Reason = "too_far_in_future"
	ReasonTooFarBehind          Reason = "too_far_behind"
	ReasonOutOfOrder            Reason = "out_of_order"
	ReasonLineTooLong           Reason = "line_too_long"
	ReasonMetadataDisallowed    Reason = "disallowed_structured_metadata"
	ReasonMetadataTooLarge      Reason = "structured_metadata_too_large"
	ReasonMetadataTooMany       Reason = "structured_metadata_too_many"
	ReasonMaxLabelNames         Reason = "max_label_names_per_series"
	ReasonLabelNameTooLong      Reason = "label_name_too_long"
	ReasonLabelValueTooLong     Reason = "label_value_too_long"
	ReasonDuplicateLabelNames   Reason = "duplicate_label_names"
	ReasonMissingLabels         Reason = "missing_labels"
	ReasonMissingEnforcedLabels Reason = "missing_enforced_labels"
)

// Reasons lists every reason the client reports, for metrics that create their
// series up front.
func Reasons() []Reason {
	return []Reason{ReasonInvalidLabels, ReasonInvalidTimestamp, ReasonBadRequest, ReasonTooLarge,
		ReasonTooOld, ReasonTooNew, ReasonTooFarBehind, ReasonOutOfOrder, ReasonLineTooLong,
		ReasonMetadataDisallowed, ReasonMetadataTooLarge, ReasonMetadataTooMany, ReasonMaxLabelNames,
		ReasonLabelNameTooLong, ReasonLabelValueTooLong, ReasonDuplicateLabelNames, ReasonMissingLabels,
		ReasonMissingEnforcedLabels}
}

// Defaults of Limits: Loki's own defaults.
const (
	DefaultMaxAge              = 7 * 24 * time.Hour
	DefaultCreationGracePeriod = 10 * time.Minute
	DefaultOutOfOrderWindow    = time.Hour
	DefaultMaxMetadataBytes    = 64 << 10
	DefaultMaxMetadataEntries  = 128
)

// Limits are the receiver's limits the client knows. The client refuses an
// entry that breaks one before sending it (its rejection has Status 0 and
// Loki's reason), so a predictable rejection never costs a request, a split or
// a re-sent entry. Zero values are Loki's defaults; a negative duration or size
// turns that check off (the receiver was configured without it).
type Limits struct {
	// MaxAge is reject_old_samples_max_age: entries older than now minus it
	// are refused (greater_than_max_sample_age).
	MaxAge time.Duration
	// CreationGracePeriod: entries newer than now plus it are refused
	// (too_far_in_future).
	CreationGracePeriod time.Duration
	// OutOfOrderWindow is how far behind its stream's newest entry an entry
	// may be (too_far_behind). The client does not check it: it does not know
	// what earlier pushes stored. The job does, with its per-stream heads.
	OutOfOrderWindow time.Duration
	// DisallowStructuredMetadata says the receiver refuses every entry that
	// carries structured metadata (allow_structured_metadata: false).
	DisallowStructuredMetadata bool
	// MaxMetadataBytes and MaxMetadataEntries cap an entry's structured
	// metadata (sum of name and value lengths; pairs).
	MaxMetadataBytes   int
	MaxMetadataEntries int
}

// WithDefaults returns l with zero fields set to Loki's defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxAge == 0 {
		l.MaxAge = DefaultMaxAge
	}
	if l.CreationGracePeriod == 0 {
		l.CreationGracePeriod = DefaultCreationGracePeriod
	}
	if l.OutOfOrderWindow == 0 {
		l.OutOfOrderWindow = DefaultOutOfOrderWindow
	}
	if l.MaxMetadataBytes == 0 {
		l.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if l.MaxMetadataEntries == 0 {
		l.MaxMetadataEntries = DefaultMaxMetadataEntries
	}
	return l
}

// acceptance is the range of timestamps Limits accept at one moment, in Unix nanoseconds:
// worked out once for all the entries of a push, whose timestamps are then compared as
// integers.
type acceptance struct {
	l              *Limits
	now            time.Time
	oldest, newest int64 // inclusive
}

// at returns what l accepts at time now. l must have its defaults applied.
func (l *Limits) at(now time.Time) acceptance {
	a := acceptance{l: l, now: now, oldest: math.MinInt64, newest: math.MaxInt64}
	if l.MaxAge > 0 {
		if oldest := now.Add(-l.MaxAge); oldest.After(minTimestamp) {
			a.oldest = oldest.UnixNano()
		}
	}
	if l.CreationGracePeriod > 0 {
		if newest := now.Add(l.CreationGracePeriod); newest.Before(maxTimestamp) {
			a.newest = newest.UnixNano()
		}
	}
	return a
}

// check returns why the receiver would refuse e, whose timestamp is ns nanoseconds after the
// Unix epoch, for its timestamp or its structured metadata, in Loki's order of checks, or ""
// when it would not. Stream labels are the label guard's business, lines the line cap's.
func (a *acceptance) check(e *Entry, ns int64) (Reason, string) {
	l := a.l
	if ns < a.oldest {
		return ReasonTooOld, fmt.Sprintf("timestamp %s is older than the receiver accepts (max age %s: oldest acceptable %s)",
			e.Timestamp.UTC().Format(time.RFC3339Nano), l.MaxAge, a.now.Add(-l.MaxAge).UTC().Format(time.RFC3339))
	}
	if ns > a.newest {
		return ReasonTooNew, fmt.Sprintf("timestamp %s is newer than the receiver accepts (creation grace period %s: newest acceptable %s)",
			e.Timestamp.UTC().Format(time.RFC3339Nano), l.CreationGracePeriod, a.now.Add(l.CreationGracePeriod).UTC().Format(time.RFC3339))
	}
	if len(e.Metadata) == 0 {
		return "", ""
	}
	if l.DisallowStructuredMetadata {
		return ReasonMetadataDisallowed, "the receiver does not accept structured metadata (sink.loki.allow_structured_metadata: false)"
	}
	if l.MaxMetadataBytes > 0 {
		if n := MetadataBytes(e.Metadata); n > l.MaxMetadataBytes {
			return ReasonMetadataTooLarge, fmt.Sprintf("structured metadata is %d bytes, the receiver accepts %d", n, l.MaxMetadataBytes)
		}
	}
	if l.MaxMetadataEntries > 0 && len(e.Metadata) > l.MaxMetadataEntries {
		return ReasonMetadataTooMany, fmt.Sprintf("%d structured metadata pairs, the receiver accepts %d", len(e.Metadata), l.MaxMetadataEntries)
	}
	return "", ""
}

// MetadataBytes is how Loki sizes structured metadata: the sum of the names'
// and values' lengths.
func MetadataBytes(md []Label) int {
	n := 0
	for _, m := range md {
		n += len(m.Name) + len(m.Value)
	}
	return n
}

// reasonPatterns maps the fixed parts of Loki's rejection messages to their
// reasons, most specific first.
var reasonPatterns = []struct {
	text   string
	reason Reason
}{
	{"entry too far behind", ReasonTooFarBehind},
	{"entry out of order", ReasonOutOfOrder},
	{"has timestamp too old", ReasonTooOld},
	{"has timestamp too new", ReasonTooNew},
	{"max entry size", ReasonLineTooLong},
	{"structured metadata, but this feature is disallowed", ReasonMetadataDisallowed},
	{"structured metadata too large", ReasonMetadataTooLarge},
	{"too many structured metadata", ReasonMetadataTooMany},
	{"label names; limit", ReasonMaxLabelNames},
	{"label name too long", ReasonLabelNameTooLong},
	{"label value too long", ReasonLabelValueTooLong},
	{"duplicate label name", ReasonDuplicateLabelNames},
	{"at least one label pair is required", ReasonMissingLabels},
	{"missing enforced labels", ReasonMissingEnforcedLabels},
	{"error parsing labels", ReasonInvalidLabels},
}

// ClassifyRejection names Loki's reason for a 400 answer to a request that
// held one entry, from the answer's body; ReasonBadRequest when the body says
// nothing the client recognizes. It is meant for one entry's answer: the body
// of a larger request is no account of which entries failed.
func ClassifyRejection(body string) Reason {
	low := strings.ToLower(body)
	for _, p := range reasonPatterns {
		if strings.Contains(low, p.text) {
			return p.reason
		}
	}
	return ReasonBadRequest
}

// Restampable reports the rejections a new timestamp cures: the entry's
// timestamp is outside what the receiver accepts (too old, too new, or too
// far behind its stream's newest entry).
func (r Reason) Restampable() bool {
	return r == ReasonTooOld || r == ReasonTooNew || r == ReasonTooFarBehind || r == ReasonOutOfOrder
}

// OldestAcceptable reads the cutoff Loki states when it refuses an entry as too old or too far
// behind ("... oldest acceptable timestamp is: 2026-06-30T10:00:00Z"), from the answer to a
// request that held that entry alone. The receiver accepts entries from that time on (to the
// second). ok is false when the detail states none.
func OldestAcceptable(detail string) (time.Time, bool) {
	const marker = "oldest acceptable timestamp is: "
	i := strings.LastIndex(detail, marker)
	if i < 0 {
		return time.Time{}, false
	}
	rest := detail[i+len(marker):]
	if j := strings.IndexAny(rest, "',\n"); j >= 0 {
		rest = rest[:j]
	}
	rest = strings.TrimSpace(rest)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999 -0700 MST"} {
		if t, err := time.Parse(layout, rest); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
