package loki

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// pairs returns n structured-metadata pairs of 5 bytes each ("k000": "v").
func pairs(n int) []Label {
	md := make([]Label, 0, n)
	for i := range n {
		md = append(md, Label{Name: fmt.Sprintf("k%03d", i), Value: "v"})
	}
	return md
}

// TestTruncationMarkerKeepsWithinMetadataLimits: a line cut by the line cap is marked with
// sf2loki_truncated only where the marker keeps the entry within the receiver's
// structured-metadata limits. Added past them (metadata disallowed, or the entry's own at the
// count or byte limit), the marker made the receiver refuse the entry whole, an entry that
// should have shipped cut: dropped, or its key frozen. Without the marker the line still ships
// cut, and the cut is still reported.
func TestTruncationMarkerKeepsWithinMetadataLimits(t *testing.T) {
	long := strings.Repeat("a", DefaultMaxLineBytes+10)
	marker := len(TruncatedMetadataName) + len(fmt.Sprint(len(long))) // as Loki counts its bytes
	cases := []struct {
		name   string
		srv    simloki.Options
		limits Limits
		md     []Label
		marked bool
	}{
		{name: "structured metadata disallowed", srv: simloki.Options{DisallowStructuredMetadata: true},
			limits: Limits{DisallowStructuredMetadata: true}},
		{name: "128 pairs, the count limit", md: pairs(DefaultMaxMetadataEntries)},
		{name: "127 pairs: the marker fits", md: pairs(DefaultMaxMetadataEntries - 1), marked: true},
		{name: "a byte over the byte limit with the marker",
			md: []Label{{Name: "big", Value: strings.Repeat("m", DefaultMaxMetadataBytes-3-marker+1)}}},
		{name: "at the byte limit with the marker: it fits", marked: true,
			md: []Label{{Name: "big", Value: strings.Repeat("m", DefaultMaxMetadataBytes-3-marker)}}},
		{name: "a receiver with lower limits", srv: simloki.Options{MaxMetadataEntries: 2},
			limits: Limits{MaxMetadataEntries: 2}, md: pairs(2)},
	}
	for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
		for _, tc := range cases {
			t.Run(enc.String()+"/"+tc.name, func(t *testing.T) {
				srv := simloki.New(tc.srv)
				c := newClient(t, srv, func(o *Options) { o.Encoding, o.Limits = enc, tc.limits })
				es := []Entry{
					{Timestamp: time.Now(), Labels: lbl("job", "sf2loki"), Line: long, Metadata: tc.md, Ref: 1},
					{Timestamp: time.Now(), Labels: lbl("job", "sf2loki"), Line: "short", Metadata: tc.md, Ref: 2},
				}
				res := c.Push(context.Background(), es)
				if !res.OK() {
					t.Fatalf("accepted %v, rejected %+v: want both entries shipped, the long one cut", res.Accepted, res.Rejected)
				}
				if res.Truncated != 1 || len(res.Truncations) != 1 || res.Truncations[0].Index != 0 ||
					res.Truncations[0].Bytes != DefaultMaxLineBytes || res.Truncations[0].Marked != tc.marked {
					t.Fatalf("truncated %d, truncations %+v; want entry 0 cut to %d bytes, marked %v", res.Truncated, res.Truncations, DefaultMaxLineBytes, tc.marked)
				}
				var cut *simloki.Entry
				for _, e := range srv.Entries() {
					if e.Line != "short" {
						cut = &e
					}
				}
				if cut == nil || cut.Line != long[:DefaultMaxLineBytes] {
					t.Fatalf("the long line was not stored cut to %d bytes", DefaultMaxLineBytes)
				}
				want := ""
				if tc.marked {
					want = fmt.Sprint(len(long))
				}
				if got := cut.MetadataValue(TruncatedMetadataName); got != want {
					t.Fatalf("%s = %q, want %q", TruncatedMetadataName, got, want)
				}
				if n := len(cut.Metadata); n != len(tc.md)+map[bool]int{true: 1}[tc.marked] {
					t.Fatalf("stored %d metadata pairs, want the entry's %d and the marker only if marked", n, len(tc.md))
				}
			})
		}
	}
}
