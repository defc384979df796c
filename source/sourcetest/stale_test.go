package sourcetest

import (
	"slices"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// TestLeftStaleNamesEachFieldLeft: a record that a Next overwrote whole has nothing left of
// Stale, and one that kept any one field of it, or kept the skip mark while clearing its
// reason, has that field named.
func TestLeftStaleNamesEachFieldLeft(t *testing.T) {
	fresh := func() source.Record {
		return source.Record{
			Entry: loki.Entry{
				Timestamp: time.Unix(1700000000, 0), Labels: loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}),
				Line: `{"n":1}`, Metadata: []loki.Label{{Name: "id", Value: "1"}},
			},
			Cursor: source.CursorJSON([]byte(`{"row":1}`)),
		}
	}
	if left := LeftStale(fresh()); len(left) != 0 {
		t.Fatalf("a record overwritten whole has %v left", left)
	}
	skipped := fresh()
	skipped.Skip, skipped.SkipReason = true, "sampled"
	if left := LeftStale(skipped); len(left) != 0 {
		t.Fatalf("a record skipped with its own reason has %v left", left)
	}
	stale := Stale()
	for _, c := range []struct {
		want string
		keep func(rec *source.Record)
	}{
		{"Entry.Timestamp", func(r *source.Record) { r.Entry.Timestamp = stale.Entry.Timestamp }},
		{"Entry.Labels", func(r *source.Record) { r.Entry.Labels = stale.Entry.Labels }},
		{"Entry.Line", func(r *source.Record) { r.Entry.Line = stale.Entry.Line }},
		{"Entry.Metadata", func(r *source.Record) { r.Entry.Metadata = stale.Entry.Metadata }},
		{"Entry.Ref", func(r *source.Record) { r.Entry.Ref = stale.Entry.Ref }},
		{"Cursor", func(r *source.Record) { r.Cursor = stale.Cursor }},
		{"Skip, SkipReason", func(r *source.Record) { r.Skip, r.SkipReason = stale.Skip, stale.SkipReason }},
		{"Skip", func(r *source.Record) { r.Skip = stale.Skip }},
	} {
		rec := fresh()
		c.keep(&rec)
		if left := LeftStale(rec); !slices.Equal(left, []string{c.want}) {
			t.Errorf("keeping %s: LeftStale = %v", c.want, left)
		}
	}
	if left := LeftStale(Stale()); len(left) != 7 {
		t.Errorf("Stale itself: %v, want every field", left)
	}
}
