package loki

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// tricky pieces: quotes, backslashes, newlines, control characters, HTML
// characters, non-ASCII (2-, 3- and 4-byte UTF-8), JSON's U+2028.
var tricky = []string{`"`, `\`, "\n", "\r", "\t", "\x00", "\x1f", "<", ">", "&", "é", "日本", "🦆", "\u2028", "{", "}", "=", ",", " ", `\"`, `\\n`, "a", "Z", "0", "_"}

func randText(r *rand.Rand, maxParts int) string {
	var b strings.Builder
	for range r.IntN(maxParts + 1) {
		if r.IntN(3) == 0 {
			b.WriteString(tricky[r.IntN(len(tricky))])
		} else {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
	}
	return b.String()
}

func nonEmptyText(r *rand.Rand, maxParts int) string {
	for {
		if s := randText(r, maxParts); s != "" {
			return s
		}
	}
}

// randomEntries builds entries over a few random streams, timestamps within
// the last 50 minutes at nanosecond precision, in random order.
func randomEntries(r *rand.Rand, now time.Time, n int) []Entry {
	names := AllowedLabelNames()
	var streams []Labels
	for range 1 + r.IntN(6) {
		var ls []Label
		for _, name := range names {
			if r.IntN(2) == 0 {
				ls = append(ls, Label{Name: name, Value: nonEmptyText(r, 12)})
			}
		}
		if len(ls) == 0 {
			ls = append(ls, Label{Name: "job", Value: nonEmptyText(r, 5)})
		}
		streams = append(streams, NewLabels(ls...))
	}
	mdNames := []string{"user_id", "request_id", "client_ip", "uri", "status", "trace_id"}
	entries := make([]Entry, n)
	for i := range entries {
		var md []Label
		for _, j := range r.Perm(len(mdNames))[:r.IntN(len(mdNames)+1)] {
			md = append(md, Label{Name: mdNames[j], Value: nonEmptyText(r, 20)})
		}
		entries[i] = Entry{
			Timestamp: now.Add(-time.Duration(r.Int64N(int64(50 * time.Minute)))),
			Labels:    streams[r.IntN(len(streams))],
			Line:      randText(r, 300),
			Metadata:  md,
			Ref:       uint64(1000 + i),
		}
	}
	return entries
}

func TestRoundTripPropertyAllEncodings(t *testing.T) {
	encodings := []struct {
		name string
		mod  func(*Options)
	}{
		{"protobuf+snappy", func(o *Options) {}},
		{"json", func(o *Options) { o.Encoding = EncodingJSON }},
		{"json+gzip", func(o *Options) { o.Encoding = EncodingJSON; o.Gzip = true }},
	}
	for _, enc := range encodings {
		t.Run(enc.name, func(t *testing.T) {
			for seed := range uint64(40) {
				r := rand.New(rand.NewPCG(seed, 7))
				srv := simloki.New(simloki.Options{})
				c := newClient(t, srv, func(o *Options) {
					enc.mod(o)
					// Small requests, so streams span requests.
					o.MaxRequestBytes = 2000 + r.IntN(20000)
					o.MaxEntriesPerRequest = 1 + r.IntN(50)
				})
				entries := randomEntries(r, time.Now(), 1+r.IntN(200))
				res := c.Push(context.Background(), entries)
				if !res.OK() || res.Err != nil {
					t.Fatalf("seed %d: push not OK: rejected %v, err %v, server rejections %v", seed, res.Rejected, res.Err, srv.Rejected())
				}
				if !slices.Equal(res.Accepted, refs(entries)) {
					t.Fatalf("seed %d: Accepted refs not in input order", seed)
				}
				assertStored(t, srv, entries)
				if d := srv.Duplicates(); len(d) != 0 {
					t.Fatalf("seed %d: %d duplicates sent", seed, len(d))
				}
				assertSortedPerStream(t, srv)
			}
		})
	}
}

// assertSortedPerStream checks that every stream's entries arrived oldest
// first.
func assertSortedPerStream(t *testing.T, srv *simloki.Server) {
	t.Helper()
	for _, s := range srv.Streams() {
		es := srv.Stream(s)
		for i := 1; i < len(es); i++ {
			if es[i].Timestamp.Before(es[i-1].Timestamp) {
				t.Fatalf("stream %s: entry %d (%s) arrived after a newer one (%s)", s, i, es[i].Timestamp, es[i-1].Timestamp)
			}
		}
	}
}

func TestProtobufCarriesLineBytesVerbatim(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, nil)
	line := "invalid \xff\xfe utf-8 and a NUL \x00 byte"
	e := Entry{Timestamp: time.Now(), Labels: lbl("job", "x"), Line: line, Metadata: []Label{{"k", "v\xff"}}}
	if res := c.Push(context.Background(), []Entry{e}); !res.OK() {
		t.Fatalf("push: %+v", res)
	}
	got := srv.Entries()
	if len(got) != 1 || got[0].Line != line || got[0].MetadataValue("k") != "v\xff" {
		t.Fatalf("stored %#v, want line %q", got, line)
	}
}

func TestNanosecondTimestampsSurviveBothEncodings(t *testing.T) {
	// Timestamps a float64 would round: precision below a microsecond, and
	// before 1970.
	stamps := []time.Time{
		time.Unix(1767225600, 123456789),
		time.Unix(1767225600, 1),
		time.Unix(1767225600, 999999999),
		time.Unix(-1, 5),
	}
	for _, enc := range []Encoding{EncodingProtobuf, EncodingJSON} {
		t.Run(enc.String(), func(t *testing.T) {
			srv := simloki.New(simloki.Options{RejectOldSamplesMaxAge: -1, CreationGracePeriod: -1, OutOfOrderWindow: -1})
			c := newClient(t, srv, func(o *Options) { o.Encoding = enc; o.Limits = Limits{MaxAge: -1, CreationGracePeriod: -1} })
			var es []Entry
			for i, ts := range stamps {
				es = append(es, Entry{Timestamp: ts, Labels: lbl("job", "ns"), Line: fmt.Sprint("l", i)})
			}
			if res := c.Push(context.Background(), es); !res.OK() {
				t.Fatalf("push: %+v", res)
			}
			assertStored(t, srv, es)
		})
	}
}
