package salesforce

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fixtures under the repository's testdata/ are samples of what a real org sends, written
// from Salesforce's documentation independently of the simulated org (testdata/README.md).

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "salesforce", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixtureEventLogFile: the documented Login and ApexCallout files, listed and downloaded in
// LF, CRLF and gzip forms, read back byte for byte, with the listing's LogFileLength (a double)
// equal to the body's size and its field lists usable.
func TestFixtureEventLogFile(t *testing.T) {
	for _, name := range []string{"login", "apexcallout"} {
		listing := fixture(t, "eventlogfile/"+name+".listing.json")
		lf := fixture(t, "eventlogfile/"+name+".csv")
		forms := map[string][]byte{"lf": lf, "crlf": bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n")), "gzip": lf}
		for form, body := range forms {
			t.Run(name+"/"+form, func(t *testing.T) {
				org := newTestOrg(t)
				org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "application/json;charset=UTF-8")
					_, _ = w.Write(listing)
				})
				org.handle(elfPath, func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/csv")
					if form == "gzip" {
						w.Header().Set("Content-Encoding", "gzip")
						zw := gzip.NewWriter(w)
						_, _ = zw.Write(body)
						_ = zw.Close()
						return
					}
					_, _ = w.Write(body)
				})
				c := org.client(t)
				p, err := c.Query(context.Background(), "SELECT Id, LogFileLength, LogFileFieldNames, LogFileFieldTypes FROM EventLogFile")
				if err != nil || len(p.Records) != 1 {
					t.Fatalf("listing: %v, %v", p, err)
				}
				r := p.Records[0]
				id, _ := r.String("Id")
				length, okLen := r.Float64("LogFileLength")
				created, okCreated := r.Time("CreatedDate")
				names, _ := r.String("LogFileFieldNames")
				types, _ := r.String("LogFileFieldTypes")
				if !okLen || int(length) != len(lf) || !okCreated || created.IsZero() {
					t.Fatalf("listing row: LogFileLength %v (%v) for %d bytes, CreatedDate %v (%v)", length, okLen, len(lf), created, okCreated)
				}
				header := strings.TrimSpace(string(lf[:bytes.IndexByte(lf, '\n')]))
				if strings.ReplaceAll(header, `"`, "") != names || strings.Count(types, ",") != strings.Count(names, ",") {
					t.Fatalf("LogFileFieldNames %q do not match the header %q, or types %q", names, header, types)
				}
				d, err := c.DownloadEventLogFile(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = d.Close() }()
				got, err := io.ReadAll(d)
				if err != nil || !bytes.Equal(got, body) || d.Compressed != (form == "gzip") {
					t.Fatalf("download: %d bytes (%v), compressed %v; want the %d bytes of the %s form", len(got), err, d.Compressed, len(body), form)
				}
			})
		}
	}
}

// TestFixtureBigObjectPage: a LoginEvent page as real orgs return it, every row with the empty
// id, parses with its EventDate and EventIdentifier usable and the nulls and doubles kept.
func TestFixtureBigObjectPage(t *testing.T) {
	page := fixture(t, "rest/loginevent_page.json")
	org := newTestOrg(t)
	org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		_, _ = w.Write(page)
	})
	p, err := org.client(t).Query(context.Background(), "SELECT FIELDS(ALL) FROM LoginEvent ORDER BY EventDate DESC LIMIT 200")
	if err != nil || !p.Done || p.NextRecordsURL != "" || len(p.Records) != 3 || p.TotalSize != 3 {
		t.Fatalf("page: %+v, %v", p, err)
	}
	seen := map[string]bool{}
	for _, r := range p.Records {
		id, _ := r.String("Id")
		ident, _ := r.String("EventIdentifier")
		when, ok := r.Time("EventDate")
		if id != "000000000000000AAA" || r.Type() != "LoginEvent" || ident == "" || !ok || seen[ident] {
			t.Fatalf("row: Id %q, type %q, EventIdentifier %q, EventDate %v (%v)", id, r.Type(), ident, when, ok)
		}
		seen[ident] = true
		if v, _ := r.Get("LoginSubType"); v != nil && v != "OAuth Refresh Token" {
			t.Fatalf("LoginSubType %v", v)
		}
		if v, ok := r.Float64("EvaluationTime"); !ok || v != 0 {
			t.Fatalf("EvaluationTime %v (%v)", v, ok)
		}
	}
	if first, _ := p.Records[0].Time("EventDate"); !first.Equal(time.Date(2026, 6, 29, 11, 19, 59, 360e6, time.UTC)) {
		t.Fatalf("EventDate %v", first)
	}
}

// TestFixtureToolingPage: Tooling results carry size, queryLocator and entityTypeName besides the
// REST keys; they parse like a REST page, empty ones included.
func TestFixtureToolingPage(t *testing.T) {
	for name, want := range map[string]int{"rest/apexlog_tooling_page.json": 2, "rest/apexlog_tooling_empty.json": 0} {
		t.Run(name, func(t *testing.T) {
			page := fixture(t, name)
			org := newTestOrg(t)
			org.handle("GET /services/data/v60.0/tooling/query", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json;charset=UTF-8")
				_, _ = w.Write(page)
			})
			p, err := org.client(t).ToolingQuery(context.Background(), "SELECT Id, Request FROM ApexLog")
			if err != nil || !p.Done || len(p.Records) != want || p.TotalSize != want {
				t.Fatalf("page: %+v, %v", p, err)
			}
			for _, r := range p.Records {
				req, _ := r.String("Request")
				n, ok := r.Int64("LogLength")
				if (req != "API" && req != "Application") || !ok || n <= 0 {
					t.Fatalf("ApexLog row: Request %q, LogLength %d (%v)", req, n, ok)
				}
			}
		})
	}
}

// TestFixtureErrors: each documented error answer is read as the fixture says: the daily limit
// is ErrRequestLimit and sent once, a concurrent limit is ErrConcurrentLimit and retried, an
// expired session is renewed once, a permanent error is sent once, a transient one is retried.
func TestFixtureErrors(t *testing.T) {
	var cases []struct {
		Name        string          `json:"name"`
		Status      int             `json:"status"`
		ContentType string          `json:"contentType"`
		Body        json.RawMessage `json:"body"`
		Want        string          `json:"want"`
	}
	if err := json.Unmarshal(fixture(t, "rest/errors.json"), &cases); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			org := newTestOrg(t)
			calls := 0
			org.handle("GET /services/data/v60.0/limits", func(w http.ResponseWriter, _ *http.Request) {
				calls++
				w.Header().Set("Content-Type", tc.ContentType)
				w.WriteHeader(tc.Status)
				_, _ = w.Write(tc.Body)
			})
			_, err := org.client(t, func(o *Options) { o.MaxAttempts = 3 }).Limits(context.Background())
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.Status {
				t.Fatalf("err %v, want an APIError with HTTP %d", err, tc.Status)
			}
			var wantCalls int
			switch tc.Want {
			case "daily_limit":
				wantCalls = 1
				if !errors.Is(err, ErrRequestLimit) || errors.Is(err, ErrConcurrentLimit) {
					t.Fatalf("err %v, want ErrRequestLimit only", err)
				}
			case "concurrent_limit":
				wantCalls = 3
				if !errors.Is(err, ErrConcurrentLimit) || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRequestLimit) {
					t.Fatalf("err %v, want ErrConcurrentLimit and ErrUnavailable", err)
				}
			case "reauth":
				wantCalls = 2
				if !errors.Is(err, ErrAuth) || org.tokens.Load() != 2 {
					t.Fatalf("err %v after %d tokens, want ErrAuth after one renewal", err, org.tokens.Load())
				}
			case "permanent":
				wantCalls = 1
				if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRequestLimit) || errors.Is(err, ErrConcurrentLimit) {
					t.Fatalf("err %v, want a plain APIError", err)
				}
			case "transient":
				wantCalls = 3
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err %v, want ErrUnavailable", err)
				}
			default:
				t.Fatalf("unknown expectation %q", tc.Want)
			}
			if calls != wantCalls {
				t.Fatalf("%d requests, want %d", calls, wantCalls)
			}
			var arr []struct{ Message, ErrorCode string }
			_ = json.Unmarshal(tc.Body, &arr)
			if apiErr.ErrorCode != arr[0].ErrorCode || apiErr.Message != arr[0].Message {
				t.Fatalf("APIError %q %q, want the body's %q %q", apiErr.ErrorCode, apiErr.Message, arr[0].ErrorCode, arr[0].Message)
			}
		})
	}
}
