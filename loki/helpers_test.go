package loki

import (
	"cmp"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// quietLogger discards logs so test output stays readable.
var quietLogger = slog.New(slog.DiscardHandler)

// newClient returns a client pushing to srv in-process, with fast retries
// unless mod changes them.
func newClient(t testing.TB, srv *simloki.Server, mod func(*Options)) *Client {
	t.Helper()
	o := Options{
		URL:        "http://loki.invalid/loki/api/v1/push",
		Transport:  srv.Transport(),
		MinBackoff: time.Millisecond,
		MaxBackoff: 5 * time.Millisecond,
		Logger:     quietLogger,
	}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func lbl(pairs ...string) Labels {
	ls := make([]Label, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		ls = append(ls, Label{Name: pairs[i], Value: pairs[i+1]})
	}
	return NewLabels(ls...)
}

// wantEntry is an entry as the receiver should store it.
type wantEntry struct {
	stream string
	ns     int64
	line   string
	md     []simloki.Pair
}

func expect(e Entry) wantEntry {
	md := make([]simloki.Pair, 0, len(e.Metadata))
	for _, m := range e.Metadata {
		md = append(md, simloki.Pair{Name: m.Name, Value: m.Value})
	}
	slices.SortStableFunc(md, func(a, b simloki.Pair) int { return cmp.Compare(a.Name, b.Name) })
	if len(md) == 0 {
		md = nil
	}
	return wantEntry{stream: e.Labels.String(), ns: e.Timestamp.UnixNano(), line: e.Line, md: md}
}

func stored(e simloki.Entry) wantEntry {
	md := e.Metadata
	if len(md) == 0 {
		md = nil
	}
	return wantEntry{stream: e.Stream, ns: e.Timestamp.UnixNano(), line: e.Line, md: md}
}

func cmpWant(a, b wantEntry) int {
	if c := cmp.Compare(a.stream, b.stream); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	return cmp.Compare(a.line, b.line)
}

// assertStored checks that srv holds exactly want (as a multiset).
func assertStored(t *testing.T, srv *simloki.Server, want []Entry) {
	t.Helper()
	exp := make([]wantEntry, 0, len(want))
	for _, e := range want {
		exp = append(exp, expect(e))
	}
	var got []wantEntry
	for _, e := range srv.Entries() {
		got = append(got, stored(e))
	}
	slices.SortFunc(exp, cmpWant)
	slices.SortFunc(got, cmpWant)
	if len(got) != len(exp) {
		t.Fatalf("receiver stored %d entries, want %d", len(got), len(exp))
	}
	for i := range exp {
		if !equalWant(got[i], exp[i]) {
			t.Fatalf("stored entry %d differs:\n got  %#v\n want %#v", i, got[i], exp[i])
		}
	}
}

func equalWant(a, b wantEntry) bool {
	return a.stream == b.stream && a.ns == b.ns && a.line == b.line && slices.Equal(a.md, b.md)
}

// refs returns the Refs of entries, in order.
func refs(es []Entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Ref
	}
	return out
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
