package job

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/source/sourcetest"
)

// TestBindingKeys: which stored keys a binding reads, and what its source sees — the org
// prefix removed, unprefixed legacy keys only for the legacy fallback and never over the
// org's own key; CheckCursor finds the reader of a key and lets its source judge the value.
func TestBindingKeys(t *testing.T) {
	src := &sourcetest.Numbered{Totals: map[string]int{"numbered:a": 1, "numbered:b": 1}}
	single := Binding{Source: src}
	eu := Binding{Org: "eu", Source: src}
	us := Binding{Org: "us", Source: src}
	bs := []Binding{eu, us}
	MarkLegacyFallback(bs)
	if !bs[0].LegacyFallback || bs[1].LegacyFallback {
		t.Fatalf("legacy fallback %v %v, want the first org only", bs[0].LegacyFallback, bs[1].LegacyFallback)
	}
	for _, c := range []struct {
		b    Binding
		key  string
		want string
		ok   bool
	}{
		{single, "numbered:a", "numbered:a", true},
		{single, "org=eu:numbered:a", "", false},
		{eu, "org=eu:numbered:a", "numbered:a", true},
		{eu, "org=us:numbered:a", "", false},
		{eu, "numbered:a", "", false},
		{bs[0], "numbered:a", "numbered:a", true},
		{bs[0], "org=us:numbered:a", "", false},
	} {
		if got, ok := c.b.Reads(c.key); got != c.want || ok != c.ok {
			t.Errorf("%s reads %q: %q %v, want %q %v", c.b.ReportName(), c.key, got, ok, c.want, c.ok)
		}
	}

	stored := map[string]json.RawMessage{
		"org=eu:numbered:a": sourcetest.EncodeCursor(5),
		"numbered:a":        sourcetest.EncodeCursor(1), // legacy, hidden by the org's own
		"numbered:b":        sourcetest.EncodeCursor(2), // legacy, read by the fallback
		"org=us:numbered:b": sourcetest.EncodeCursor(9),
	}
	got := bindingCursors(bs[0], stored)
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"numbered:a", "numbered:b"}) ||
		string(got["numbered:a"]) != string(stored["org=eu:numbered:a"]) || string(got["numbered:b"]) != string(stored["numbered:b"]) {
		t.Fatalf("eu's cursors %s", got)
	}

	if reader, _, err := CheckCursor(bs, "org=us:numbered:b", sourcetest.EncodeCursor(3)); reader != "org=us:numbered" || err != nil {
		t.Fatalf("reader of org=us:numbered:b: %q %v", reader, err)
	}
	if reader, _, err := CheckCursor(bs, "org=us:numbered:b", json.RawMessage(`"garbage"`)); reader != "org=us:numbered" || err == nil {
		t.Fatalf("a value the source cannot read: reader %q, err %v", reader, err)
	}
	if reader, names, err := CheckCursor(bs, "org=fr:numbered:a", sourcetest.EncodeCursor(3)); reader != "" || err != nil || len(names) != 2 {
		t.Fatalf("a key no binding reads: reader %q, names %v, err %v", reader, names, err)
	}
	if reader, _, err := CheckCursor(bs, "org=eu:numbered:zzz", sourcetest.EncodeCursor(3)); reader != "" || err != nil {
		t.Fatalf("a key of no stream of the source: reader %q, err %v", reader, err)
	}
}
