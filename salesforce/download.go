package salesforce

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Download is a streamed response body (an EventLogFile CSV or an ApexLog
// debug log). Read it to the end and Close it; nothing is buffered beyond
// the transport's and gzip's windows (64 KiB each). A read error mid-stream
// (the connection broke off, the server stalled for Options.HTTPTimeout) is
// ErrUnavailable; the caller may download again. A 2xx answer that is an HTML
// page is no Download: it is ErrBadResponse (see htmlPage).
type Download struct {
	body io.Reader
	raw  io.ReadCloser
	gz   *gzip.Reader
	url  string
	ctx  context.Context

	// ContentLength is the length of the (possibly compressed) body as
	// announced, or -1.
	ContentLength int64
	// ContentType is the response Content-Type (text/csv, text/plain, …).
	ContentType string
	// Compressed reports that the body came gzip-encoded and is decompressed
	// on the fly.
	Compressed bool
	// ServerDate is the response's Date header (Salesforce's clock), zero if
	// absent.
	ServerDate time.Time
}

// Read reads the decompressed body.
func (d *Download) Read(p []byte) (int, error) {
	n, err := d.body.Read(p)
	switch {
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, ErrBodyTooLarge) || errors.Is(err, ErrUnavailable):
	case d.ctx.Err() != nil:
		// The caller gave up: that is not the org being unavailable.
		err = fmt.Errorf("salesforce: reading %s: %w", d.url, d.ctx.Err())
	default:
		err = unavailable(fmt.Errorf("salesforce: reading %s: %w", d.url, err))
	}
	return n, err
}

// Close releases the connection.
func (d *Download) Close() error {
	if d.gz != nil {
		_ = d.gz.Close()
	}
	return d.raw.Close()
}

// DownloadEventLogFile opens the CSV blob of the EventLogFile with the given
// id as a stream (one API call). It asks for gzip and decompresses
// transparently when the server honors it.
func (c *Client) DownloadEventLogFile(ctx context.Context, id string) (*Download, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	return c.download(ctx, KindEventLogFile, c.dataPath("sobjects/EventLogFile/"+id+"/LogFile"), -1)
}

// DownloadApexLog opens the debug log body of the ApexLog with the given id
// (Tooling API) as a stream. With maxBytes > 0, a body announced larger is
// refused with ErrBodyTooLarge before reading, and a body that turns out
// larger yields its first maxBytes bytes and then ErrBodyTooLarge.
func (c *Client) DownloadApexLog(ctx context.Context, id string, maxBytes int64) (*Download, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	return c.download(ctx, KindApexLogBody, c.dataPath("tooling/sobjects/ApexLog/"+id+"/Body"), maxBytes)
}

func (c *Client) download(ctx context.Context, kind Kind, path string, maxBytes int64) (*Download, error) {
	// Setting Accept-Encoding ourselves turns off the transport's transparent
	// decompression, so BytesRead counts what crossed the network.
	hdr := http.Header{"Accept-Encoding": {"gzip"}}
	resp, err := c.authorizedStream(ctx, kind, path, hdr)
	if err != nil {
		return nil, err
	}
	u := *resp.Request.URL
	u.RawQuery = ""
	d := &Download{
		body:          resp.Body,
		raw:           resp.Body,
		url:           u.String(),
		ctx:           ctx,
		ContentLength: resp.ContentLength,
		ContentType:   resp.Header.Get("Content-Type"),
	}
	if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		d.ServerDate = t
	}
	if strings.EqualFold(strings.TrimSpace(resp.Header.Get("Content-Encoding")), "gzip") {
		// gzip reads through a bufio.Reader of 4 KiB when given a plain reader: one read of
		// the socket (and one wake-up) per 4 KiB of compressed body. bodyReadSize does the same
		// in a sixteenth of the reads.
		gz, err := gzip.NewReader(bufio.NewReaderSize(resp.Body, bodyReadSize))
		if err != nil {
			_ = resp.Body.Close()
			return nil, unavailable(fmt.Errorf("salesforce: %s: gzip header: %w", d.url, err))
		}
		d.gz, d.body, d.Compressed = gz, gz, true
	}
	if maxBytes > 0 {
		if !d.Compressed && resp.ContentLength > maxBytes {
			_ = d.Close()
			return nil, fmt.Errorf("%w: %s is %d bytes, cap %d", ErrBodyTooLarge, d.url, resp.ContentLength, maxBytes)
		}
		d.body = &cappedReader{r: d.body, left: maxBytes, max: maxBytes}
	}
	return d, nil
}

// htmlPage refuses a 2xx stream (a download) answered with an HTML page — a
// proxy's sign-in page, Salesforce's maintenance page — in place of the body
// asked for: read as one, its lines would become an EventLogFile's CSV header
// and rows, or a debug log. Like a JSON answer that does not decode, it is a
// *BadResponseError (retried; the page is quoted, and the body closed). The
// Content-Type is the rule: no download asked for is HTML, and a body is not
// guessed at, which could misread a real file.
func htmlPage(resp *http.Response) error {
	ct := resp.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "text/html" && mt != "application/xhtml+xml" {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	var page io.Reader = resp.Body
	if strings.EqualFold(strings.TrimSpace(resp.Header.Get("Content-Encoding")), "gzip") {
		if gz, err := gzip.NewReader(resp.Body); err == nil {
			page = gz // quoted as it reads
		}
	}
	b, _ := io.ReadAll(io.LimitReader(page, excerptLen))
	return badResponse(resp, b, false, errors.New("an HTML page instead of the body asked for (a proxy's or a maintenance page)"))
}

// bodyReadSize is how much of a compressed body is read from the connection at a time, and
// the size of the connection's read buffer (both 4 KiB by default).
const bodyReadSize = 64 << 10

// cappedReader yields at most max bytes, then ErrBodyTooLarge if more follow.
type cappedReader struct {
	r    io.Reader
	left int64
	max  int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// Probe for one more byte to tell "exactly max" from "more".
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, c.max)
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
