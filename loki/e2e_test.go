package loki

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestE2EVictoriaLogs pushes through the client to a real VictoriaLogs (a
// Loki-compatible receiver) with both encodings and reads everything back with
// LogsQL: exact entry count per stream, labels, structured metadata and line
// bytes.
func TestE2EVictoriaLogs(t *testing.T) {
	vl := testenv.StartVictoriaLogs(t)
	cases := []struct {
		name string
		enc  Encoding
		gzip bool
	}{
		{"protobuf-snappy", EncodingProtobuf, false},
		{"json-gzip", EncodingJSON, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			c, err := New(Options{URL: vl.PushURL(), Encoding: tc.enc, Gzip: tc.gzip, Logger: quietLogger, MaxEntriesPerRequest: 40})
			if err != nil {
				t.Fatal(err)
			}
			run := "e2e-" + tc.name
			streams := []Labels{
				lbl("org", run, "job", "sf2loki", "event_type", "Login"),
				lbl("org", run, "job", "sf2loki", "event_type", `Quote"Back\slash é日`),
				lbl("org", run, "job", "sf2loki", "event_type", "API", "source", "eventlogfile"),
			}
			lines := []string{
				`{"EVENT_TYPE":"Login","USER_ID":"005xx","n":%d}`, // JSON: must stay unparsed
				"multi\nline \"quoted\" back\\slash\ttab #%d",
				"non-ASCII: é 日本語 🦆 #%d",
				"plain line #%d",
			}
			base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
			var es []Entry
			want := map[string]Entry{} // by stream|ns|line
			perStream := map[string]int{}
			for i := range 150 {
				// Streams get different counts; entries out of order on purpose.
				s := streams[i%len(streams)]
				if i%7 == 0 {
					s = streams[0]
				}
				e := Entry{
					Timestamp: base.Add(time.Duration((i*7919)%150) * time.Second).Add(time.Duration(i*1000+123) * time.Nanosecond),
					Labels:    s,
					Line:      fmt.Sprintf(lines[i%len(lines)], i),
					Metadata:  []Label{{Name: "user_id", Value: fmt.Sprintf("005%06d", i)}, {Name: "client_ip", Value: fmt.Sprintf("10.0.%d.%d", i/200, i%200)}, {Name: "note", Value: `md "quoted" é`}},
					Ref:       uint64(i),
				}
				es = append(es, e)
				et, _ := s.Get("event_type")
				want[key(et)+"|"+fmt.Sprint(e.Timestamp.UnixNano())+"|"+e.Line] = e
				perStream[s.String()]++
			}
			res := c.Push(ctx, es)
			if !res.OK() {
				t.Fatalf("push: accepted %d/%d, rejected %v, err %v", len(res.Accepted), len(es), res.Rejected, res.Err)
			}

			rows := vl.Query(t, fmt.Sprintf(`{org=%q}`, run))
			if len(rows) != len(es) {
				t.Fatalf("VictoriaLogs returned %d rows, want %d", len(rows), len(es))
			}
			gotPerStream := map[string]int{}
			for _, row := range rows {
				str := func(k string) string { v, _ := row[k].(string); return v }
				ts, err := time.Parse(time.RFC3339Nano, str("_time"))
				if err != nil {
					t.Fatalf("row %v: _time: %v", row, err)
				}
				k := key(str("event_type")) + "|" + fmt.Sprint(ts.UnixNano()) + "|" + str("_msg")
				e, ok := want[k]
				if !ok {
					t.Fatalf("row not pushed (or line/time altered): %v", row)
				}
				delete(want, k)
				for i := range e.Labels.Len() {
					l := e.Labels.At(i)
					if str(l.Name) != l.Value {
						t.Errorf("row %v: label %s = %q, want %q", row, l.Name, str(l.Name), l.Value)
					}
				}
				for _, m := range e.Metadata {
					if str(m.Name) != m.Value {
						t.Errorf("row %v: metadata %s = %q, want %q", row, m.Name, str(m.Name), m.Value)
					}
				}
				if _, parsed := row["EVENT_TYPE"]; parsed {
					t.Errorf("row %v: the JSON line was parsed into fields", row)
				}
				gotPerStream[e.Labels.String()]++
			}
			if len(want) != 0 {
				t.Fatalf("%d entries missing", len(want))
			}
			for s, n := range perStream {
				if gotPerStream[s] != n {
					t.Errorf("stream %s: %d rows, want %d", s, gotPerStream[s], n)
				}
			}
			// The receiver's own stream identity agrees on the count.
			stats := vl.Query(t, fmt.Sprintf(`{org=%q} | stats by (_stream) count() as n`, run))
			if len(stats) != len(streams) {
				t.Errorf("VictoriaLogs has %d streams, want %d: %v", len(stats), len(streams), stats)
			}
			total := 0
			for _, r := range stats {
				var n int
				_, _ = fmt.Sscan(fmt.Sprint(r["n"]), &n)
				total += n
			}
			if total != len(es) {
				t.Errorf("stats count %d, want %d", total, len(es))
			}
		})
	}
}

func key(s string) string { return strings.ReplaceAll(s, "|", "¦") }

// maxBody records the largest snappy body a client sent, decoded size.
type maxBody struct {
	next    http.RoundTripper
	decoded int
}

func (m *maxBody) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	if n, err := snappy.DecodedLen(b); err == nil && n > m.decoded {
		m.decoded = n
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return m.next.RoundTrip(req)
}

// TestE2EVictoriaLogsBodyOfSeveralPieces pushes one request whose body is compressed in several
// snappy pieces (the client compresses 1 MiB at a time) to a real VictoriaLogs and reads every
// line back unaltered.
func TestE2EVictoriaLogsBodyOfSeveralPieces(t *testing.T) {
	vl := testenv.StartVictoriaLogs(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tr := &maxBody{next: http.DefaultTransport}
	c, err := New(Options{URL: vl.PushURL(), Logger: quietLogger, TargetCompressedBytes: 8 << 20, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	const run = "e2e-pieces"
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	want := map[string]bool{}
	var es []Entry
	for i := range 3000 {
		line := fmt.Sprintf(`{"n":%d,"URI":"/apex/page%d","pad":"%s"}`, i, i%97, strings.Repeat(string(rune('a'+i%26)), 900+i%50))
		es = append(es, Entry{Timestamp: base.Add(time.Duration(i) * time.Millisecond), Labels: lbl("org", run, "job", "sf2loki"), Line: line, Ref: uint64(i)})
		want[line] = true
	}
	res := c.Push(ctx, es)
	if !res.OK() {
		t.Fatalf("push: accepted %d/%d, rejected %v, err %v", len(res.Accepted), len(es), res.Rejected, res.Err)
	}
	if tr.decoded <= 2*snappyPiece {
		t.Fatalf("largest body %d bytes: not several pieces of %d", tr.decoded, snappyPiece)
	}
	rows := vl.Query(t, fmt.Sprintf(`{org=%q} | limit 10000`, run))
	if len(rows) != len(es) {
		t.Fatalf("VictoriaLogs returned %d rows, want %d", len(rows), len(es))
	}
	for _, row := range rows {
		msg, _ := row["_msg"].(string)
		if !want[msg] {
			t.Fatalf("line not pushed, altered or twice: %.80q", msg)
		}
		delete(want, msg)
	}
}
