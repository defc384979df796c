package salesforce

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const elfPath = "GET /services/data/v60.0/sobjects/EventLogFile/{id}/LogFile"

var csvBody = "\"EVENT_TYPE\",\"TIMESTAMP_DERIVED\",\"QUERY\"\n\"API\",\"2026-06-30T01:00:00.123Z\",\"SELECT a,\nb\"\n"

// writeBody answers with body, gzip-encoded (and labeled so) when gz is set.
func writeBody(w http.ResponseWriter, body string, gz bool) {
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, body)
		_ = zw.Close()
		return
	}
	_, _ = io.WriteString(w, body)
}

func TestDownloadEventLogFilePlainAndGzip(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run("gzip="+strconv.FormatBool(gz), func(t *testing.T) {
			org := newTestOrg(t)
			var acceptEnc string
			org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
				acceptEnc = r.Header.Get("Accept-Encoding")
				if r.PathValue("id") != "0AT5g000000AbCdEAA" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/csv")
				w.Header().Set("Date", "Tue, 30 Jun 2026 02:00:00 GMT")
				writeBody(w, csvBody, gz)
			})
			c := org.client(t)
			d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Close() }()
			got, err := io.ReadAll(d)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != csvBody || d.Compressed != gz || d.ContentType != "text/csv" {
				t.Fatalf("body %q compressed=%v type=%q", got, d.Compressed, d.ContentType)
			}
			if acceptEnc != "gzip" {
				t.Errorf("Accept-Encoding = %q, want gzip", acceptEnc)
			}
			if d.ServerDate.IsZero() || d.ServerDate.UTC().Hour() != 2 {
				t.Errorf("ServerDate = %v", d.ServerDate)
			}
			st := c.Stats()
			if st.Calls[KindEventLogFile] != 1 || st.BytesRead == 0 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestDownloadRejectsBadIDWithoutCall(t *testing.T) {
	org := newTestOrg(t)
	c := org.client(t)
	for _, id := range []string{"", "../../limits", "0AT5g000000AbCdEAA/x"} {
		if _, err := c.DownloadEventLogFile(context.Background(), id); !errors.Is(err, ErrInvalidSOQLValue) {
			t.Errorf("DownloadEventLogFile(%q) = %v", id, err)
		}
		if _, err := c.DownloadApexLog(context.Background(), id, 0); !errors.Is(err, ErrInvalidSOQLValue) {
			t.Errorf("DownloadApexLog(%q) = %v", id, err)
		}
	}
	if n := c.Stats().TotalCalls(); n != 0 {
		t.Fatalf("%d calls for invalid ids", n)
	}
}

func TestDownloadErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantCalls int64
		want      error
	}{
		{"not ready 404", 404, `[{"errorCode":"NOT_FOUND","message":"The requested resource does not exist"}]`, 1, nil},
		{"throttled", 403, `[{"errorCode":"REQUEST_LIMIT_EXCEEDED","message":"TotalRequests Limit exceeded."}]`, 1, ErrRequestLimit},
		{"5xx", 502, `bad gateway`, 4, ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := newTestOrg(t)
			var calls atomic.Int64
			org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			c := org.client(t)
			_, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
			var ae *APIError
			if !errors.As(err, &ae) || ae.StatusCode != tt.status {
				t.Fatalf("err = %v, want APIError %d", err, tt.status)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if calls.Load() != tt.wantCalls {
				t.Errorf("calls = %d, want %d", calls.Load(), tt.wantCalls)
			}
		})
	}
}

func TestDownloadReauthOn401(t *testing.T) {
	org := newTestOrg(t)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		if bearer(r) == "tok-1" {
			writeSFError(w, 401, CodeInvalidSession, "Session expired or invalid")
			return
		}
		_, _ = io.WriteString(w, csvBody)
	})
	c := org.client(t)
	d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	if b, _ := io.ReadAll(d); string(b) != csvBody || org.tokens.Load() != 2 {
		t.Fatalf("body %q after %d token requests", b, org.tokens.Load())
	}
}

// TestDownloadResetMidStream: the server drops the connection after part of
// the body; Read reports ErrUnavailable (the caller re-downloads).
func TestDownloadResetMidStream(t *testing.T) {
	org := newTestOrg(t)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, _ = io.WriteString(w, strings.Repeat("x", 5000))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	c := org.client(t)
	d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	n, err := io.Copy(io.Discard, d)
	if !errors.Is(err, ErrUnavailable) || n != 5000 {
		t.Fatalf("read %d bytes, err = %v; want 5000 and ErrUnavailable", n, err)
	}
}

// TestDownloadStallIsDetected: the server stops sending mid-body; the idle
// guard (HTTPTimeout) ends the read instead of hanging forever.
func TestDownloadStallIsDetected(t *testing.T) {
	org := newTestOrg(t)
	stop := make(chan struct{})
	defer close(stop)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	})
	c := org.client(t, func(o *Options) { o.HTTPTimeout = 100 * time.Millisecond })
	d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	n, err := io.Copy(io.Discard, d)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errBodyIdle) || n != 1000 {
		t.Fatalf("read %d bytes, err = %v; want 1000 and a stall error", n, err)
	}
}

// TestSlowConsumerIsNotAStall: a caller that takes longer than HTTPTimeout
// between reads must not trip the idle guard (it only times server waits).
func TestSlowConsumerIsNotAStall(t *testing.T) {
	org := newTestOrg(t)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, csvBody)
	})
	c := org.client(t, func(o *Options) { o.HTTPTimeout = 20 * time.Millisecond })
	d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	var got bytes.Buffer
	buf := make([]byte, 8)
	for {
		time.Sleep(30 * time.Millisecond) // slower than the idle timeout
		n, err := d.Read(buf)
		got.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	if got.String() != csvBody {
		t.Fatalf("body = %q", got.String())
	}
}

func TestDownloadApexLogCap(t *testing.T) {
	body := strings.Repeat("DEBUG|line\n", 100) // 1100 bytes
	tests := []struct {
		name      string
		chunked   bool
		max       int64
		wantOpen  error // error from DownloadApexLog
		wantBytes int
		wantRead  error // error from reading
	}{
		{"no cap", false, 0, nil, len(body), nil},
		{"cap above size", false, 5000, nil, len(body), nil},
		{"cap exactly size, chunked", true, int64(len(body)), nil, len(body), nil},
		{"announced too large", false, 1000, ErrBodyTooLarge, 0, nil},
		{"chunked too large", true, 1000, nil, 1000, ErrBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := newTestOrg(t)
			org.handle("GET /services/data/v60.0/tooling/sobjects/ApexLog/{id}/Body", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				for i := 0; i < len(body); i += 100 {
					_, _ = io.WriteString(w, body[i:i+100])
					w.(http.Flusher).Flush()
				}
			})
			c := org.client(t)
			d, err := c.DownloadApexLog(context.Background(), "07L5g000000AbCdEAA", tt.max)
			if tt.wantOpen != nil {
				if !errors.Is(err, tt.wantOpen) {
					t.Fatalf("open = %v, want %v", err, tt.wantOpen)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Close() }()
			got, err := io.ReadAll(d)
			if len(got) != tt.wantBytes || got == nil && tt.wantBytes > 0 || string(got) != body[:tt.wantBytes] {
				t.Errorf("read %d bytes, want %d", len(got), tt.wantBytes)
			}
			if (tt.wantRead == nil) != (err == nil) || (tt.wantRead != nil && !errors.Is(err, tt.wantRead)) {
				t.Errorf("read err = %v, want %v", err, tt.wantRead)
			}
			if n := c.Stats().Calls[KindApexLogBody]; n != 1 {
				t.Errorf("calls = %d", n)
			}
		})
	}
}

// patternReader yields left bytes of a repeating pattern without holding them.
type patternReader struct{ left int64 }

var pattern = bytes.Repeat([]byte("0123456789abcdef\n"), 4096)

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(int64(len(b)), p.left)], pattern)
	p.left -= int64(n)
	return n, nil
}

// TestDownloadStreamsWithFlatMemory downloads 200 MiB plain and 64 MiB gzip
// (compressing is slow under -race) and
// asserts, by sampling the Go heap during the transfer, that the client
// never holds more than a small, size-independent amount of it.
func TestDownloadStreamsWithFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("200 MiB transfer")
	}
	for _, gz := range []bool{false, true} {
		size := int64(200 << 20)
		if gz {
			size = 64 << 20
		}
		t.Run("gzip="+strconv.FormatBool(gz), func(t *testing.T) {
			org := newTestOrg(t)
			org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/csv")
				src := &patternReader{left: size}
				if gz {
					w.Header().Set("Content-Encoding", "gzip")
					zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
					_, _ = io.Copy(zw, src)
					_ = zw.Close()
					return
				}
				w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
				_, _ = io.Copy(w, src)
			})
			c := org.client(t)
			peak := measureHeapPeak(t, func() {
				d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = d.Close() }()
				n, err := io.Copy(io.Discard, d)
				if err != nil || n != size {
					t.Fatalf("copied %d, %v", n, err)
				}
			})
			t.Logf("peak heap growth during a %d MiB download: %.1f MiB", size>>20, float64(peak)/(1<<20))
			if peak > 24<<20 {
				t.Fatalf("heap grew by %d MiB while streaming %d MiB: the body is being buffered", peak>>20, size>>20)
			}
		})
	}
}

// measureHeapPeak runs f while sampling runtime.MemStats.HeapAlloc and
// returns the peak growth over the baseline taken after a GC.
func measureHeapPeak(t *testing.T, f func()) uint64 {
	t.Helper()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak.Load()
}

func TestDownloadCanceledIsNotUnavailable(t *testing.T) {
	org := newTestOrg(t)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := org.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := c.DownloadEventLogFile(ctx, "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(d, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = d.Read(buf)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("read after cancel = %v, want context.Canceled and not ErrUnavailable", err)
	}
}

// TestCloseDuringReadIsSafe closes a download from another goroutine while a
// Read waits for data (run with -race).
func TestCloseDuringReadIsSafe(t *testing.T) {
	org := newTestOrg(t)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := org.client(t)
	d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := d.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // let Read block (not an assertion)
	_ = d.Close()
	if err := <-errc; err == nil {
		t.Fatal("Read after Close returned no error")
	}
}

// askingBody records the sizes the reads of a response body ask for.
type askingBody struct {
	io.ReadCloser
	c *askedSizes
}

func (b askingBody) Read(p []byte) (int, error) {
	b.c.mu.Lock()
	b.c.sizes = append(b.c.sizes, len(p))
	b.c.mu.Unlock()
	return b.ReadCloser.Read(p)
}

type askedSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (c *askedSizes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = askingBody{resp.Body, c}
	}
	return resp, err
}

// TestGzipBodyReadInLargeReads: a compressed body is read from the connection bodyReadSize at
// a time, not in gzip's own 4 KiB (one socket read and wake-up each).
func TestGzipBodyReadInLargeReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var body []byte
	for len(body) < 4<<20 { // rows gzip compresses (Huffman blocks, which flate reads a byte at a time)
		body = fmt.Appendf(body, "\"API\",\"2026-06-30T01:00:00.123Z\",\"%x\"\n", rng.Uint64())
	}
	var wire atomic.Int64
	org := newTestOrg(t)
	org.handle(elfPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
		_, _ = zw.Write(body)
		_ = zw.Close()
		wire.Store(int64(z.Len()))
		_, _ = w.Write(z.Bytes())
	})
	asked := &askedSizes{}
	c := org.client(t, func(o *Options) { o.HTTPClient = &http.Client{Transport: asked} })
	d, err := c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	got, err := io.ReadAll(d)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes (%v), want the %d sent", len(got), err, len(body))
	}
	// What a read asks for, not what it gets (the socket's share of the moment): gzip's own
	// buffer would ask for 4 KiB each time. The client's first look at a body asks for less.
	asked.mu.Lock()
	defer asked.mu.Unlock()
	small := 0
	for _, n := range asked.sizes {
		if n < bodyReadSize/2 {
			small++
		}
	}
	if len(asked.sizes) < 4 || small > 1 {
		t.Errorf("%d of the %d reads of the %d-byte compressed body asked for under %d bytes (the first: %v)",
			small, len(asked.sizes), wire.Load(), bodyReadSize/2, asked.sizes[:min(8, len(asked.sizes))])
	}
}

// TestTransportReadBufferHoldsManyChunks: the client's own transport reads a connection
// bodyReadSize at a time. A chunked body's framing is read through that buffer, so with the
// default 4 KiB an EventLogFile took a socket read for every chunk.
func TestTransportReadBufferHoldsManyChunks(t *testing.T) {
	hc, err := Options{HTTPTimeout: time.Minute}.httpClient()
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := hc.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", hc.Transport)
	}
	if tr.ReadBufferSize < bodyReadSize {
		t.Errorf("ReadBufferSize %d, want at least %d", tr.ReadBufferSize, bodyReadSize)
	}
}

// TestDownloadAnsweredWithAnHTMLPage: a download answered 200 with an HTML page (a proxy's
// sign-in page, Salesforce's maintenance page) is not the body asked for — read as one, its
// lines would be a CSV header and rows, or a debug log. Whatever is downloaded (an EventLogFile,
// an ApexLog body), it is a bad response: retried like any, then ErrBadResponse (and
// ErrUnavailable), naming the page's type and first bytes. The rule is the Content-Type: a body
// typed as anything else, or not typed, is handed over, even when it starts with '<'.
func TestDownloadAnsweredWithAnHTMLPage(t *testing.T) {
	const page = "<!DOCTYPE html>\n<html><head><title>Down for maintenance</title></head><body>Sign in</body></html>\n"
	downloads := []struct {
		name    string
		pattern string
		open    func(*Client) (*Download, error)
	}{
		{"EventLogFile", elfPath, func(c *Client) (*Download, error) {
			return c.DownloadEventLogFile(context.Background(), "0AT5g000000AbCdEAA")
		}},
		{"ApexLog", "GET /services/data/v60.0/tooling/sobjects/ApexLog/{id}/Body", func(c *Client) (*Download, error) {
			return c.DownloadApexLog(context.Background(), "07L5g000000AbCdEAA", 1<<20)
		}},
	}
	for _, dl := range downloads {
		for _, tt := range []struct {
			ctype    string
			gzip     bool // the page comes gzip-encoded
			wantBody bool // the body is handed over as it is; else every answer is refused
		}{
			{ctype: "text/html; charset=utf-8"},
			{ctype: "TEXT/HTML", gzip: true},
			{ctype: "application/xhtml+xml"},
			{ctype: "text/plain", wantBody: true},
			{ctype: "text/csv", wantBody: true},
			{ctype: "", wantBody: true},
		} {
			t.Run(fmt.Sprintf("%s/%s/gzip=%v", dl.name, tt.ctype, tt.gzip), func(t *testing.T) {
				org := newTestOrg(t)
				var calls atomic.Int64
				org.handle(dl.pattern, func(w http.ResponseWriter, r *http.Request) {
					calls.Add(1)
					w.Header()["Content-Type"] = nil // no sniffing: the type is the test's
					if tt.ctype != "" {
						w.Header().Set("Content-Type", tt.ctype)
					}
					writeBody(w, page, tt.gzip)
				})
				c := org.client(t)
				d, err := dl.open(c)
				if tt.wantBody {
					if err != nil {
						t.Fatalf("open: %v", err)
					}
					defer func() { _ = d.Close() }()
					if b, err := io.ReadAll(d); err != nil || string(b) != page {
						t.Fatalf("body %q (%v), want the page as it came", b, err)
					}
					return
				}
				if d != nil {
					_ = d.Close()
				}
				if !errors.Is(err, ErrBadResponse) || !errors.Is(err, ErrUnavailable) ||
					!strings.Contains(err.Error(), "HTML page") || !strings.Contains(err.Error(), "Down for maintenance") {
					t.Fatalf("err = %v, want ErrBadResponse and ErrUnavailable naming the HTML page and quoting it", err)
				}
				if calls.Load() != 4 {
					t.Errorf("calls = %d, want 4: retried like any bad response", calls.Load())
				}
			})
		}
		t.Run(dl.name+"/once", func(t *testing.T) {
			org := newTestOrg(t)
			var calls atomic.Int64
			org.handle(dl.pattern, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Content-Type", "text/html")
					_, _ = io.WriteString(w, page)
					return
				}
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, csvBody)
			})
			d, err := dl.open(org.client(t))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer func() { _ = d.Close() }()
			if b, err := io.ReadAll(d); err != nil || string(b) != csvBody || calls.Load() != 2 {
				t.Fatalf("body %q (%v) after %d calls, want the body of the second", b, err, calls.Load())
			}
		})
	}
}
