package sourcetest

import (
	"bytes"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

const (
	staleLine   = "a line an earlier record left"
	staleReason = "stale"
	staleRef    = 7
)

var (
	staleTime   = time.Unix(1, 0)
	staleCursor = []byte(`{"stale":true}`)
)

// Stale returns a record as an earlier call of Next may have left it: skipped with a reason, and
// carrying an entry (time, labels, line, metadata, reference) and a cursor. A test that drains
// a stream into one record it reuses starts every Next from Stale and checks the result with
// LeftStale, so that a stream which does not overwrite the record whole, as source.Stream
// requires, is caught.
func Stale() source.Record {
	return source.Record{
		Entry: loki.Entry{
			Timestamp: staleTime,
			Labels:    loki.NewLabels(loki.Label{Name: "stale", Value: "true"}),
			Line:      staleLine,
			Metadata:  []loki.Label{{Name: "stale", Value: "true"}},
			Ref:       staleRef,
		},
		Cursor:     source.CursorJSON(bytes.Clone(staleCursor)),
		Skip:       true,
		SkipReason: staleReason,
	}
}

// LeftStale names the fields of rec that still hold what Stale put there (none when Next
// overwrote the record whole).
func LeftStale(rec source.Record) []string {
	var left []string
	e := &rec.Entry
	if e.Timestamp.Equal(staleTime) {
		left = append(left, "Entry.Timestamp")
	}
	if _, ok := e.Labels.Get("stale"); ok {
		left = append(left, "Entry.Labels")
	}
	if e.Line == staleLine {
		left = append(left, "Entry.Line")
	}
	for _, m := range e.Metadata {
		if m.Name == "stale" {
			left = append(left, "Entry.Metadata")
			break
		}
	}
	if e.Ref == staleRef {
		left = append(left, "Entry.Ref")
	}
	if bytes.Equal(rec.Cursor.JSON(), staleCursor) {
		left = append(left, "Cursor")
	}
	switch {
	case rec.SkipReason == staleReason:
		left = append(left, "Skip, SkipReason")
	case rec.Skip && rec.SkipReason == "":
		// Every source names why it skips: a skip without a reason is Stale's, its reason
		// cleared and the mark left.
		left = append(left, "Skip")
	}
	return left
}
