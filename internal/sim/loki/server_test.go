package loki

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// The tests build request bodies by hand from the field numbers in
// docs/architecture.md ("Loki facts"), independently of the client package.

type pe struct {
	ts   time.Time
	line string
	md   []Pair
}

func protoEntry(e pe) []byte {
	var ts []byte
	if s := e.ts.Unix(); s != 0 {
		ts = protowire.AppendTag(ts, 1, protowire.VarintType)
		ts = protowire.AppendVarint(ts, uint64(s))
	}
	if n := e.ts.Nanosecond(); n != 0 {
		ts = protowire.AppendTag(ts, 2, protowire.VarintType)
		ts = protowire.AppendVarint(ts, uint64(n))
	}
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, ts)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, e.line)
	for _, p := range e.md {
		var pb []byte
		pb = protowire.AppendTag(pb, 1, protowire.BytesType)
		pb = protowire.AppendString(pb, p.Name)
		pb = protowire.AppendTag(pb, 2, protowire.BytesType)
		pb = protowire.AppendString(pb, p.Value)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, pb)
	}
	return b
}

type ps struct {
	labels  string
	entries []pe
}

func protoPush(streams ...ps) []byte {
	var req []byte
	for _, s := range streams {
		var sb []byte
		sb = protowire.AppendTag(sb, 1, protowire.BytesType)
		sb = protowire.AppendString(sb, s.labels)
		for _, e := range s.entries {
			sb = protowire.AppendTag(sb, 2, protowire.BytesType)
			sb = protowire.AppendBytes(sb, protoEntry(e))
		}
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, sb)
	}
	return req
}

type req struct {
	method, path string
	header       map[string]string
	body         []byte
}

func post(body []byte, header ...string) req {
	h := map[string]string{"Content-Type": "application/x-protobuf"}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return req{method: http.MethodPost, path: PushPath, header: h, body: body}
}

func do(t *testing.T, s *Server, r req) *httptest.ResponseRecorder {
	t.Helper()
	hr := httptest.NewRequest(r.method, r.path, bytes.NewReader(r.body))
	for k, v := range r.header {
		if v == "<unset>" {
			hr.Header.Del(k)
			continue
		}
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, hr)
	return w
}

var clockNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return clockNow }

func snap(b []byte) []byte { return snappy.Encode(nil, b) }

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func TestRequestLevelAnswers(t *testing.T) {
	good := snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a"}}}))
	framed := func() []byte {
		var buf bytes.Buffer
		w := snappy.NewBufferedWriter(&buf)
		_, _ = w.Write(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a"}}}))
		_ = w.Close()
		return buf.Bytes()
	}()
	jsonBody := []byte(fmt.Sprintf(`{"streams":[{"stream":{"job":"x"},"values":[["%d","a",{"k":"v"}]]}]}`, clockNow.UnixNano()))
	cases := []struct {
		name   string
		opts   Options
		req    req
		status int
		body   string
	}{
		{"protobuf snappy", Options{}, post(good, "Content-Encoding", "snappy"), 204, ""},
		{"protobuf without Content-Encoding", Options{}, post(good), 204, ""},
		{"missing Content-Type", Options{}, post(good, "Content-Type", "<unset>"), 400, "Content-Type"},
		{"unknown Content-Encoding", Options{}, post(good, "Content-Encoding", "br"), 400, "not supported"},
		{"Content-Encoding is matched exactly, as Loki does", Options{}, post(good, "Content-Encoding", "Snappy"), 400, `Content-Encoding "Snappy" not supported`},
		{"gzip in capitals is not gzip", Options{}, post(gz(jsonBody), "Content-Type", "application/json", "Content-Encoding", "GZIP"), 400, "not supported"},
		{"framed snappy", Options{}, post(framed), 400, "framed snappy"},
		{"not snappy", Options{}, post([]byte("garbage")), 400, "snappy"},
		{"gzip around snappy protobuf (Loki-exact)", Options{}, post(gz(good), "Content-Encoding", "gzip"), 204, ""},
		{"gzip around protobuf refused in strict mode", Options{RejectCompressedProtobuf: true}, post(gz(good), "Content-Encoding", "gzip"), 400, "snappy-compressed only"},
		{"json", Options{}, post(jsonBody, "Content-Type", "application/json; charset=utf-8"), 204, ""},
		{"json gzip", Options{}, post(gz(jsonBody), "Content-Type", "application/json", "Content-Encoding", "gzip"), 204, ""},
		{"json with snappy encoding", Options{}, post(jsonBody, "Content-Type", "application/json", "Content-Encoding", "snappy"), 204, ""},
		{"json timestamp as number", Options{}, post([]byte(`{"streams":[{"stream":{"job":"x"},"values":[[1,"a"]]}]}`), "Content-Type", "application/json"), 400, "JSON string"},
		{"json four elements", Options{}, post([]byte(`{"streams":[{"stream":{"job":"x"},"values":[["1","a",{},"x"]]}]}`), "Content-Type", "application/json"), 400, "2 or 3"},
		{"json wrong key case", Options{}, post([]byte(`{"Streams":[]}`), "Content-Type", "application/json"), 400, "streams"},
		{"json non-string metadata", Options{}, post([]byte(`{"streams":[{"stream":{"job":"x"},"values":[["1","a",{"k":1}]]}]}`), "Content-Type", "application/json"), 400, "metadata"},
		{"empty push (v3)", Options{}, post(snap(protoPush())), 422, "error at least one valid stream is required for ingestion"},
		{"empty JSON push (v3)", Options{}, post([]byte(`{"streams":[]}`), "Content-Type", "application/json"), 422, "at least one valid stream"},
		{"streams without entries are skipped, as Loki does", Options{}, post(snap(protoPush(ps{`{job="x"}`, nil}, ps{`{}`, nil}))), 204, ""},
		{"empty push (legacy)", Options{EmptyPushStatus: 204}, post(snap(protoPush())), 204, ""},
		{"unparseable labels reject the whole request", Options{}, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a"}}}, ps{`{job=x}`, []pe{{ts: clockNow, line: "b"}}}))), 400, "couldn't parse labels"},
		{"wrong path", Options{}, req{method: "POST", path: "/api/v1/push", body: good, header: map[string]string{"Content-Type": "application/x-protobuf"}}, 404, ""},
		{"wrong method", Options{}, req{method: "GET", path: PushPath}, 405, ""},
		{"tenant required", Options{RequireTenant: true}, post(good), 401, "no org id"},
		{"tenant given", Options{RequireTenant: true}, post(good, "X-Scope-OrgID", "team-a"), 204, ""},
		{"two tenants", Options{}, post(good, "X-Scope-OrgID", "a|b"), 400, "multiple"},
		{"invalid tenant", Options{}, post(good, "X-Scope-OrgID", "a b"), 400, "invalid org id"},
		{"basic auth required", Options{Username: "u", Password: "p"}, post(good), 401, ""},
		{"bearer required", Options{BearerToken: "t"}, post(good, "Authorization", "Bearer t"), 204, ""},
		{"body above the cap", Options{MaxRecvBytes: 10}, post(good), 413, "too large"},
		{"decompressed body above the cap", Options{MaxRecvBytes: len(good) + 1}, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: strings.Repeat("a", 1000)}}}))), 413, "too large"},
		{"parsed field pushed", Options{}, post(snap(append(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendBytes(nil, append(protowire.AppendTag(nil, 2, protowire.BytesType), protowire.AppendBytes(nil, protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), nil))...))...))), 400, "parsed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Now = fixedClock
			s := New(tc.opts)
			w := do(t, s, tc.req)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("answer %d %q, want %d containing %q", w.Code, w.Body.String(), tc.status, tc.body)
			}
			if tc.status != 204 && s.Count() != 0 {
				t.Fatalf("%d entries stored on a %d", s.Count(), tc.status)
			}
			if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Status != tc.status {
				t.Fatalf("request log %+v", reqs)
			}
		})
	}
}

func TestValidationLikeLoki(t *testing.T) {
	sixteen := "{" + func() string {
		var parts []string
		for i := range 16 {
			parts = append(parts, fmt.Sprintf("l%d=\"v\"", i))
		}
		return strings.Join(parts, ", ")
	}() + "}"
	fifteenPlusService := strings.Replace(sixteen, `l15="v"`, `service_name="s"`, 1)
	md := []Pair{{"trace_id", "abc"}}
	cases := []struct {
		name   string
		opts   Options
		stream ps
		reason string // "" = accepted
	}{
		{"ok", Options{}, ps{`{job="x"}`, []pe{{ts: clockNow, line: "a", md: md}}}, ""},
		{"spaces and escapes in labels", Options{}, ps{` { job = "a\"b\\c\nd" ,org="é" } `, []pe{{ts: clockNow, line: "a"}}}, ""},
		{"missing labels", Options{}, ps{`{}`, []pe{{ts: clockNow, line: "a"}}}, "missing_labels"},
		{"only empty values", Options{}, ps{`{job=""}`, []pe{{ts: clockNow, line: "a"}}}, "missing_labels"},
		{"16 labels", Options{}, ps{sixteen, []pe{{ts: clockNow, line: "a"}}}, "max_label_names_per_series"},
		{"15 labels plus service_name", Options{}, ps{fifteenPlusService, []pe{{ts: clockNow, line: "a"}}}, ""},
		{"duplicate label names", Options{}, ps{`{job="a", job="b"}`, []pe{{ts: clockNow, line: "a"}}}, "duplicate_label_names"},
		{"reserved label name", Options{}, ps{`{__name__="a"}`, []pe{{ts: clockNow, line: "a"}}}, "invalid_labels"},
		{"value too long", Options{}, ps{`{job="` + strings.Repeat("v", 2049) + `"}`, []pe{{ts: clockNow, line: "a"}}}, "label_value_too_long"},
		{"too old", Options{}, ps{`{job="x"}`, []pe{{ts: clockNow.Add(-7*24*time.Hour - time.Second), line: "a"}}}, "greater_than_max_sample_age"},
		{"missing timestamp is too old", Options{}, ps{`{job="x"}`, []pe{{ts: time.Unix(0, 0), line: "a"}}}, "greater_than_max_sample_age"},
		{"too new", Options{}, ps{`{job="x"}`, []pe{{ts: clockNow.Add(11 * time.Minute), line: "a"}}}, "too_far_in_future"},
		{"line too long", Options{}, ps{`{job="x"}`, []pe{{ts: clockNow, line: strings.Repeat("a", 256<<10+1)}}}, "line_too_long"},
		{"line at the limit", Options{}, ps{`{job="x"}`, []pe{{ts: clockNow, line: strings.Repeat("a", 256<<10)}}}, ""},
		{"metadata disallowed", Options{DisallowStructuredMetadata: true}, ps{`{job="x"}`, []pe{{ts: clockNow, line: "a", md: md}}}, "disallowed_structured_metadata"},
		{"metadata too large", Options{MaxMetadataBytes: 10}, ps{`{job="x"}`, []pe{{ts: clockNow, line: "a", md: []Pair{{"k", "0123456789"}}}}}, "structured_metadata_too_large"},
		{"metadata too many", Options{MaxMetadataEntries: 1}, ps{`{job="x"}`, []pe{{ts: clockNow, line: "a", md: []Pair{{"a", "1"}, {"b", "2"}}}}}, "structured_metadata_too_many"},
		{"newest first beyond the window", Options{}, ps{`{job="x"}`, []pe{{ts: clockNow, line: "new"}, {ts: clockNow.Add(-61 * time.Minute), line: "old"}}}, "too_far_behind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Now = fixedClock
			s := New(tc.opts)
			w := do(t, s, post(snap(protoPush(tc.stream))))
			rej := s.Rejected()
			if tc.reason == "" {
				if w.Code != 204 || len(rej) != 0 || s.Count() != len(tc.stream.entries) {
					t.Fatalf("answer %d %q, rejected %+v; want all accepted", w.Code, w.Body.String(), rej)
				}
				return
			}
			if w.Code != 400 || len(rej) == 0 || rej[len(rej)-1].Reason != tc.reason {
				t.Fatalf("answer %d %q, rejected %+v; want 400 with reason %s", w.Code, w.Body.String(), rej, tc.reason)
			}
			if s.Count()+len(rej) != len(tc.stream.entries) {
				t.Fatalf("stored %d + rejected %d != sent %d", s.Count(), len(rej), len(tc.stream.entries))
			}
		})
	}
}

func TestPartialAcceptanceStoresValidEntries(t *testing.T) {
	s := New(Options{Now: fixedClock})
	body := snap(protoPush(
		ps{`{job="a"}`, []pe{{ts: clockNow, line: "ok1"}, {ts: clockNow.Add(time.Hour), line: "future"}, {ts: clockNow, line: "ok2"}}},
		ps{`{job="b", bad="` + strings.Repeat("v", 3000) + `"}`, []pe{{ts: clockNow, line: "bad stream"}}},
		ps{`{job="c"}`, []pe{{ts: clockNow, line: "ok3"}}},
	))
	w := do(t, s, post(body))
	if w.Code != 400 || !strings.Contains(w.Body.String(), "timestamp too new") || !strings.Contains(w.Body.String(), "label value too long") {
		t.Fatalf("answer %d %q", w.Code, w.Body.String())
	}
	var lines []string
	for _, e := range s.Entries() {
		lines = append(lines, e.Line)
	}
	if strings.Join(lines, ",") != "ok1,ok2,ok3" {
		t.Fatalf("stored %v, want ok1,ok2,ok3", lines)
	}
	if s.RejectedCount("") != 2 {
		t.Fatalf("rejections %+v", s.Rejected())
	}
}

func TestOutOfOrderWindowSpansRequests(t *testing.T) {
	s := New(Options{Now: fixedClock})
	do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "now"}}}))))
	w := do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow.Add(-59 * time.Minute), line: "ok"}, {ts: clockNow.Add(-61 * time.Minute), line: "late"}}}))))
	if w.Code != 400 || s.Count() != 2 || s.RejectedCount("too_far_behind") != 1 {
		t.Fatalf("answer %d, stored %d, rejected %+v", w.Code, s.Count(), s.Rejected())
	}
	// Another stream has its own window.
	if w := do(t, s, post(snap(protoPush(ps{`{job="y"}`, []pe{{ts: clockNow.Add(-3 * time.Hour), line: "own window"}}})))); w.Code != 204 {
		t.Fatalf("other stream: %d %s", w.Code, w.Body.String())
	}
}

// TestErrorBodyIsLokisIncompleteAccount: the 400 body has Loki's shapes and caps. When the
// ingester refused entries of several streams, only the last failing stream is named, with at
// most MaxReturnedErrors of its entries, and the distributor's validation errors of the same
// request are not mentioned at all; validation errors alone are grouped by message. A client
// cannot learn from it which entries failed.
func TestErrorBodyIsLokisIncompleteAccount(t *testing.T) {
	s := New(Options{Now: fixedClock})
	do(t, s, post(snap(protoPush(ps{`{job="a"}`, []pe{{ts: clockNow, line: "head a"}}}, ps{`{job="b"}`, []pe{{ts: clockNow, line: "head b"}}}))))
	var lateA, lateB []pe
	for i := range 12 {
		lateA = append(lateA, pe{ts: clockNow.Add(-2*time.Hour + time.Duration(i)*time.Second), line: fmt.Sprint("a", i)})
		lateB = append(lateB, pe{ts: clockNow.Add(-3*time.Hour + time.Duration(i)*time.Second), line: fmt.Sprint("b", i)})
	}
	lateB = append(lateB, pe{ts: clockNow, line: "b ok"})
	w := do(t, s, post(snap(protoPush(
		ps{`{job="a"}`, lateA},
		ps{`{job="c"}`, []pe{{ts: clockNow.Add(time.Hour), line: "future"}}},
		ps{`{job="b"}`, lateB},
	))))
	body := w.Body.String()
	if w.Code != 400 || s.RejectedCount("too_far_behind") != 24 || s.RejectedCount("too_far_in_future") != 1 {
		t.Fatalf("answer %d, rejected %+v", w.Code, s.Rejected())
	}
	if strings.Contains(body, `{job="a"}`) || strings.Contains(body, "too new") {
		t.Fatalf("body names more than the last failing stream: %q", body)
	}
	if n := strings.Count(body, "ignored, reason: 'entry too far behind"); n != 10 {
		t.Fatalf("body names %d entries, want the cap of 10: %q", n, body)
	}
	if !strings.HasSuffix(body, "user 'fake', total ignored: 12 out of 13 for stream: {job=\"b\"}\n") {
		t.Fatalf("body %q: want Loki's ingester summary line", body)
	}
	first := lateB[0].ts.UTC()
	if !strings.HasPrefix(body, "entry with timestamp "+first.String()+" ignored, reason: 'entry too far behind, entry timestamp is: "+first.Format(time.RFC3339)) {
		t.Fatalf("body %q: want Loki's per-entry line", body)
	}

	// Validation errors alone are grouped by message.
	same := pe{ts: clockNow.Add(-8 * 24 * time.Hour), line: "old"}
	w = do(t, s, post(snap(protoPush(ps{`{job="d"}`, []pe{same, same, {ts: clockNow.Add(time.Hour), line: "new"}}}))))
	if body := w.Body.String(); w.Code != 400 || !strings.HasPrefix(body, "2 errors like: entry for stream '{job=\"d\"}' has timestamp too old") ||
		!strings.Contains(body, "; 1 errors like: entry for stream '{job=\"d\"}' has timestamp too new") {
		t.Fatalf("answer %d %q", w.Code, body)
	}
}

// TestDuplicatesAreCountedNotStored: as Loki's head block, an entry with the timestamp and line
// of a stored one is skipped whatever its structured metadata; another line, timestamp or
// stream is stored.
func TestDuplicatesAreCountedNotStored(t *testing.T) {
	s := New(Options{Now: fixedClock})
	body := snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a", md: []Pair{{"k", "1"}}}}}))
	for range 3 {
		if w := do(t, s, post(body)); w.Code != 204 {
			t.Fatalf("answer %d", w.Code)
		}
	}
	// Same timestamp and line, different metadata: a duplicate all the same.
	do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a", md: []Pair{{"k", "2"}}}}}))))
	if s.Count() != 1 || len(s.Duplicates()) != 3 {
		t.Fatalf("stored %d duplicates %d, want 1 and 3", s.Count(), len(s.Duplicates()))
	}
	do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "b"}, {ts: clockNow.Add(1), line: "a"}}}))))
	do(t, s, post(snap(protoPush(ps{`{job="y"}`, []pe{{ts: clockNow, line: "a"}}}))))
	if s.Count() != 4 || len(s.Duplicates()) != 3 {
		t.Fatalf("stored %d duplicates %d, want 4 and 3", s.Count(), len(s.Duplicates()))
	}
}

func TestStoredEntryFields(t *testing.T) {
	s := New(Options{Now: fixedClock})
	ts := clockNow.Add(-time.Minute).Add(123456789)
	do(t, s, post(snap(protoPush(ps{`{source="s", job="x", environment=""}`, []pe{{ts: ts, line: "l\n\"", md: []Pair{{"z", "1"}, {"a", "2"}}}}})), "X-Scope-OrgID", "t1"))
	es := s.Stream(`{job="x",source="s"}`)
	if len(es) != 1 {
		t.Fatalf("stream lookup: %+v (all: %+v)", es, s.Entries())
	}
	e := es[0]
	if e.Tenant != "t1" || e.Stream != `{job="x", source="s"}` || !e.Timestamp.Equal(ts) || e.Line != "l\n\"" ||
		len(e.Metadata) != 2 || e.Metadata[0] != (Pair{"a", "2"}) || e.Label("source") != "s" || e.MetadataValue("z") != "1" {
		t.Fatalf("entry %+v", e)
	}
	if got := s.Streams(); len(got) != 1 || got[0] != e.Stream {
		t.Fatalf("streams %v", got)
	}
}

func TestFaultKnobs(t *testing.T) {
	body := snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a"}, {ts: clockNow, line: "poison"}}}))
	t.Run("FailNext queues statuses and stores nothing", func(t *testing.T) {
		s := New(Options{Now: fixedClock})
		s.FailNext(2, 429, "3")
		s.FailNext(1, 260, "")
		want := []int{429, 429, 260, 204}
		for i, code := range want {
			w := do(t, s, post(body))
			if w.Code != code {
				t.Fatalf("request %d: %d, want %d", i, w.Code, code)
			}
			if code == 429 && w.Header().Get("Retry-After") != "3" {
				t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
			}
		}
		if s.Count() != 2 {
			t.Fatalf("stored %d", s.Count())
		}
	})
	t.Run("FailNext forever until cleared", func(t *testing.T) {
		s := New(Options{Now: fixedClock})
		s.FailNext(-1, 503, "")
		for range 3 {
			if w := do(t, s, post(body)); w.Code != 503 {
				t.Fatalf("%d", w.Code)
			}
		}
		s.ClearFaults()
		if w := do(t, s, post(body)); w.Code != 204 {
			t.Fatalf("%d after ClearFaults", w.Code)
		}
	})
	t.Run("RejectEntries partially accepts", func(t *testing.T) {
		s := New(Options{Now: fixedClock})
		s.RejectEntries(func(e Entry) bool { return e.Line == "poison" }, "bad_line")
		w := do(t, s, post(body))
		if w.Code != 400 || s.Count() != 1 || s.RejectedCount("bad_line") != 1 {
			t.Fatalf("answer %d stored %d rejected %+v", w.Code, s.Count(), s.Rejected())
		}
	})
	t.Run("ingestion burst", func(t *testing.T) {
		s := New(Options{Now: fixedClock})
		s.SetIngestionLimit(0, 5)
		if w := do(t, s, post(body)); w.Code != 429 || s.Count() != 0 {
			t.Fatalf("over burst: %d, stored %d", w.Code, s.Count())
		}
		s.SetIngestionLimit(0, 100)
		if w := do(t, s, post(body)); w.Code != 204 {
			t.Fatalf("within burst: %d", w.Code)
		}
	})
	t.Run("ingestion rate refills over time", func(t *testing.T) {
		now := clockNow
		s := New(Options{Now: func() time.Time { return now }})
		s.SetIngestionLimit(7, 7) // the body's two lines are 7 bytes
		if w := do(t, s, post(body)); w.Code != 204 {
			t.Fatalf("first: %d", w.Code)
		}
		if w := do(t, s, post(body)); w.Code != 429 {
			t.Fatalf("bucket empty: %d", w.Code)
		}
		now = now.Add(time.Second)
		if w := do(t, s, post(body)); w.Code != 204 {
			t.Fatalf("after refill: %d", w.Code)
		}
	})
	t.Run("success status", func(t *testing.T) {
		s := New(Options{Now: fixedClock})
		s.SetSuccessStatus(200)
		if w := do(t, s, post(body)); w.Code != 200 {
			t.Fatalf("%d", w.Code)
		}
	})
}

func TestLostAnswerOverRealHTTP(t *testing.T) {
	r := Start(t, Options{Now: fixedClock})
	r.DropResponses(1)
	body := snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a"}}}))
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, r.PushURL(), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		return http.DefaultClient.Do(req)
	}
	if resp, err := send(); err == nil {
		resp.Body.Close()
		t.Fatalf("lost answer: got %d, want a transport error", resp.StatusCode)
	}
	if r.Count() != 1 {
		t.Fatalf("stored %d, want the request processed", r.Count())
	}
	resp, err := send()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || len(r.Duplicates()) != 1 {
		t.Fatalf("resend: %d, duplicates %d", resp.StatusCode, len(r.Duplicates()))
	}
}

func TestInProcessTransportLosesAnswer(t *testing.T) {
	s := New(Options{Now: fixedClock})
	s.DropResponses(1)
	c := &http.Client{Transport: s.Transport()}
	body := snap(protoPush(ps{`{job="x"}`, []pe{{ts: clockNow, line: "a"}}}))
	resp, err := c.Post("http://sim"+PushPath, "application/x-protobuf", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close()
		t.Fatal("want ErrLostResponse")
	}
	if s.Count() != 1 {
		t.Fatalf("stored %d", s.Count())
	}
}

func TestKnobsAreGoroutineSafe(t *testing.T) {
	r := Start(t, Options{})
	body := snap(protoPush(ps{`{job="x"}`, []pe{{ts: time.Now(), line: "a"}}}))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				req, _ := http.NewRequest(http.MethodPost, r.PushURL(), bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-protobuf")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				switch (i + j) % 5 {
				case 0:
					r.FailNext(1, 500, "")
				case 1:
					r.SetAllowStructuredMetadata(j%2 == 0)
				case 2:
					r.SetMaxBodyBytes(j)
				case 3:
					_ = r.Entries()
					_ = r.Requests()
				case 4:
					r.ClearFaults()
				}
			}
		})
	}
	wg.Wait()
	if len(r.Requests()) != 80 {
		t.Fatalf("%d requests logged, want 80", len(r.Requests()))
	}
}

// TestIngesterAnswersForTheLastStreamOnly: Loki's ingester pushes the streams of a request one
// by one and answers with what happened to the last of them (pkg/ingester/instance.go: "the
// returned error only reflects what happened to the last stream in the request"). Entries of an
// earlier stream it refused (too_far_behind) are not stored, yet the request is answered 204
// when the last stream was stored whole; when the last stream has refusals, only it is named.
func TestIngesterAnswersForTheLastStreamOnly(t *testing.T) {
	s := New(Options{Now: fixedClock})
	heads := snap(protoPush(ps{`{job="a"}`, []pe{{ts: clockNow, line: "head a"}}}, ps{`{job="b"}`, []pe{{ts: clockNow, line: "head b"}}}))
	if w := do(t, s, post(heads)); w.Code != 204 {
		t.Fatalf("heads: %d %s", w.Code, w.Body.String())
	}
	late := pe{ts: clockNow.Add(-2 * time.Hour), line: "late a"}
	w := do(t, s, post(snap(protoPush(
		ps{`{job="a"}`, []pe{late, {ts: clockNow.Add(time.Second), line: "ok a"}}},
		ps{`{job="b"}`, []pe{{ts: clockNow.Add(time.Second), line: "ok b"}}},
	))))
	if w.Code != 204 || w.Body.String() != "" {
		t.Fatalf("answer %d %q: the last stream was stored whole, Loki answers 204", w.Code, w.Body.String())
	}
	if s.RejectedCount("too_far_behind") != 1 || len(s.Stream(`{job="a"}`)) != 2 || len(s.Stream(`{job="b"}`)) != 2 {
		t.Fatalf("rejected %+v, stored %+v", s.Rejected(), s.Entries())
	}
	if reqs := s.Requests(); reqs[len(reqs)-1].Accepted != 2 {
		t.Fatalf("request log says %d accepted, want 2", reqs[len(reqs)-1].Accepted)
	}

	// The same refusal in the last stream is answered 400, naming that stream only.
	w = do(t, s, post(snap(protoPush(
		ps{`{job="b"}`, []pe{{ts: clockNow.Add(2 * time.Second), line: "ok b2"}}},
		ps{`{job="a"}`, []pe{{ts: clockNow.Add(-3 * time.Hour), line: "late a2"}}},
	))))
	if body := w.Body.String(); w.Code != 400 || !strings.HasSuffix(body, "total ignored: 1 out of 1 for stream: {job=\"a\"}\n") {
		t.Fatalf("answer %d %q", w.Code, body)
	}

	// A stream the distributor refused whole never reaches the ingester: the last stream that
	// does decides, and the distributor's errors are then the answer.
	w = do(t, s, post(snap(protoPush(
		ps{`{job="a"}`, []pe{{ts: clockNow.Add(-4 * time.Hour), line: "late a3"}}},
		ps{`{job="b"}`, []pe{{ts: clockNow.Add(3 * time.Second), line: "ok b3"}}},
		ps{`{job="c"}`, []pe{{ts: clockNow.Add(time.Hour), line: "future c"}}},
	))))
	if body := w.Body.String(); w.Code != 400 || !strings.Contains(body, "timestamp too new") || strings.Contains(body, "too far behind") {
		t.Fatalf("answer %d %q: want the distributor's errors only", w.Code, body)
	}
	if s.RejectedCount("too_far_behind") != 3 {
		t.Fatalf("rejected %+v", s.Rejected())
	}
}

// TestTimestampRefusalsStateTimesToTheSecond: Loki's distributor writes the entry's time and
// the oldest acceptable time of a too-old or too-new entry with time.RFC3339 (whole seconds,
// pkg/distributor/validator.go), so the cutoff it states can be up to a second before the one it
// applies. A client that re-stamps at the stated cutoff is refused again.
func TestTimestampRefusalsStateTimesToTheSecond(t *testing.T) {
	now := clockNow.Add(700 * time.Millisecond)
	s := New(Options{Now: func() time.Time { return now }})
	old := now.Add(-8 * 24 * time.Hour).Add(300 * time.Millisecond)
	w := do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: old, line: "old"}}}))))
	cutoff := now.Add(-7 * 24 * time.Hour)
	want := fmt.Sprintf("has timestamp too old: %s, oldest acceptable timestamp is: %s", old.UTC().Format(time.RFC3339), cutoff.UTC().Format(time.RFC3339))
	if w.Code != 400 || !strings.Contains(w.Body.String(), want) {
		t.Fatalf("answer %d %q, want it to contain %q", w.Code, w.Body.String(), want)
	}
	// At the stated cutoff (to the second, below the applied one) the entry is refused again.
	stated := cutoff.Truncate(time.Second)
	if w := do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: stated, line: "at the stated cutoff"}}})))); w.Code != 400 {
		t.Fatalf("entry at the stated cutoff %s: %d, want 400 (the applied cutoff is %s)", stated, w.Code, cutoff)
	}
	future := now.Add(11*time.Minute + 200*time.Millisecond)
	w = do(t, s, post(snap(protoPush(ps{`{job="x"}`, []pe{{ts: future, line: "new"}}}))))
	if want := "has timestamp too new: " + future.UTC().Format(time.RFC3339) + "\n"; w.Code != 400 || !strings.HasSuffix(w.Body.String(), want) {
		t.Fatalf("answer %d %q, want it to end with %q", w.Code, w.Body.String(), want)
	}
}
