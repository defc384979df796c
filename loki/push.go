package loki

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/klauspost/compress/gzip"
)

// verdict is the client's reading of one request's final answer.
type verdict int

const (
	vAccepted    verdict = iota
	vSplit               // 413, 400 or repeated 429: split, or reject a single entry
	vUndelivered         // not stored: the push stops, the rest is NotDelivered
)

type answer struct {
	verdict verdict
	status  int
	body    string // the body as read, at most maxBodyBytes
	err     error
	// inDoubt: the receiver may hold entries of the request although the final answer did not
	// accept it: an attempt was written and no answer came (a timeout, a lost connection, the
	// push's context ended), or a 400 answered it whole (Loki stores the valid entries of a
	// request it answers 400).
	inDoubt bool
}

// Bounds on a failed answer's body. A refused entry's reason (and the cutoff Loki states for a
// timestamp) is read from up to maxBodyBytes: Loki names the stream before the reason, and a
// stream's labels take up to about 46 KiB at its default limits (15 names of up to 1 KiB,
// values of up to 2 KiB). Error messages quote the first bodyExcerptBytes.
const (
	maxBodyBytes     = 64 << 10
	bodyExcerptBytes = 1024
)

// encode builds the wire body for items[lo:hi]. The encoding is compressed (or, for plain
// JSON, written to the body) a piece at a time as it is produced, so a push holds its
// compressed body and about one piece of the uncompressed encoding.
func (p *push) encode(lo, hi int) *wireBuf {
	items := p.s.items[lo:hi]
	w := p.c.getWire()
	raw := p.s.raw[:0]
	if cap(raw) < snappyPiece+snappyPiece/8 {
		raw = make([]byte, 0, snappyPiece+snappyPiece/8)
	}
	var size int
	switch {
	case p.c.opts.Encoding == EncodingProtobuf:
		size = p.protoSize(items)
		w.b = binary.AppendUvarint(w.b[:0], uint64(size))
		n := 0
		p.out = func(b []byte) {
			n += len(b)
			w.b = appendSnappyPiece(w.b, b, &p.s.piece)
		}
		raw = p.appendProto(raw, items)
		if len(raw) > 0 {
			p.out(raw)
		}
		if n != size {
			// The block's length must be exact: never send a body that does not decode.
			panic(fmt.Sprintf("loki: protobuf encoding of %d bytes, %d computed", n, size))
		}
	case p.c.opts.Gzip:
		zw := gzipPool.Get().(*gzip.Writer)
		aw := appendWriter{b: w.b[:0]}
		zw.Reset(&aw)
		p.out = func(b []byte) {
			size += len(b)
			_, _ = zw.Write(b) // appendWriter never fails
		}
		raw = p.appendJSON(raw, items)
		p.out(raw)
		_ = zw.Close()
		zw.Reset(io.Discard)
		gzipPool.Put(zw)
		w.b = aw.b
	default: // plain JSON: the encoding is the body
		w.b = p.appendJSON(w.b[:0], items)
		size = len(w.b)
	}
	p.out = nil
	p.s.raw = raw[:0]
	p.res.EncodedBytes += int64(size)
	if size > 0 && (p.c.opts.Encoding == EncodingProtobuf || p.c.opts.Gzip) {
		p.c.storeRatio(0.7*p.c.ratio() + 0.3*float64(len(w.b))/float64(size))
	}
	return w
}

// send pushes items[lo:hi], splitting on 413, 400 and repeated 429s. A
// non-nil error means the receiver cannot take more now: the caller stops and
// everything not yet marked stays NotDelivered. doubt says the receiver may
// already hold entries of items[lo:hi] (an attempt of the request they were
// split from may have been stored): those not accepted are then in doubt.
func (p *push) send(ctx context.Context, lo, hi int, doubt bool) error {
	w := p.encode(lo, hi)
	a := p.c.do(ctx, w, hi-lo > 1, p.res)
	w.release()
	doubt = doubt || a.inDoubt
	switch a.verdict {
	case vAccepted:
		for _, it := range p.s.items[lo:hi] {
			p.res.Outcomes[it.idx] = Accepted
		}
		return nil
	case vSplit:
		if hi-lo == 1 {
			reason, detail := ReasonTooLarge, excerpt(a.body)
			if a.status == http.StatusBadRequest {
				// A body naming one of Loki's reasons is its message about this entry, kept
				// whole for the cutoff it states; any other is quoted like an error.
				if reason = ClassifyRejection(a.body); reason != ReasonBadRequest {
					detail = a.body
				}
			}
			p.reject(int(p.s.items[lo].idx), reason, a.status, detail)
			return nil
		}
		p.res.Splits++
		if a.status == http.StatusBadRequest {
			// Loki stored the valid entries of the request and its body does not
			// say which failed: both halves go out again, and what was stored
			// is sent twice (a receiver that does not deduplicate keeps both).
			p.res.Resent += hi - lo
		}
		mid := lo + (hi-lo)/2
		p.c.log.Debug("loki push: splitting request", "status", a.status, "entries", hi-lo)
		if err := p.send(ctx, lo, mid, doubt); err != nil {
			if doubt { // never sent as a half, but maybe stored as part of the whole
				p.inDoubt(mid, hi)
			}
			return err
		}
		return p.send(ctx, mid, hi, doubt)
	default:
		if doubt {
			p.inDoubt(lo, hi)
		}
		p.c.log.Warn("loki push: entries not delivered", "url", p.c.url, "entries", hi-lo, "in_doubt", doubt, "error", a.err)
		return a.err
	}
}

// inDoubt reports the entries of items[lo:hi] that are not delivered as in doubt: the receiver
// may hold them.
func (p *push) inDoubt(lo, hi int) {
	for _, it := range p.s.items[lo:hi] {
		if p.res.Outcomes[it.idx] == NotDelivered {
			p.res.InDoubt++
			p.res.InDoubtIndexes = append(p.res.InDoubtIndexes, int(it.idx))
		}
	}
}

// do sends one request body with the retry policy and classifies the answer. Once an attempt
// may have been stored, every answer but an acceptance leaves the request in doubt.
func (c *Client) do(ctx context.Context, w *wireBuf, splittable bool, res *Result) answer {
	att := c.policy.newAttempt(splittable)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			att.wrote.Store(true)
		}
	}})
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, c.url,
		retryablehttp.ReaderFunc(func() (io.Reader, error) {
			att.body()
			return w.reader(), nil
		}))
	if err != nil {
		return answer{verdict: vUndelivered, err: fmt.Errorf("%w: building request: %w", ErrUnexpectedStatus, err)}
	}
	req.Header = c.headers
	req.ContentLength = int64(len(w.b))
	resp, err := att.client(c.http).Do(req)
	att.settle()
	doubt := att.mayHold
	if resp != nil {
		defer resp.Body.Close() // after drain or readBody read it, for connection reuse
		switch resp.StatusCode {
		case http.StatusOK, http.StatusNoContent, http.StatusBadRequest:
			// The receiver's verdict on the entries: a proxy in front of it writes the others
			// (5xx, 429, 401, 3xx) as often, with its own clock.
			c.readClock(resp, res)
		}
	}
	res.Requests += att.attempts
	res.Retries += att.retries
	res.WireBytes += int64(att.attempts) * int64(len(w.b))
	if err != nil {
		if resp != nil {
			drain(resp.Body)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return answer{verdict: vUndelivered, err: fmt.Errorf("%w: %w", ErrUnavailable, ctxErr), inDoubt: doubt}
		}
		return answer{verdict: vUndelivered, err: fmt.Errorf("%w: %w", ErrUnavailable, err), inDoubt: doubt}
	}
	status := resp.StatusCode
	if status == http.StatusOK || status == http.StatusNoContent {
		drain(resp.Body)
		return answer{verdict: vAccepted, status: status}
	}
	body, berr := readBody(resp.Body)
	se := &StatusError{StatusCode: status, Body: excerpt(body)}
	if status == http.StatusBadRequest && splittable {
		doubt = true // Loki stored the request's valid entries; the body says which were not
	}
	switch {
	case (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge) && berr != nil:
		// A refusal's body names the reason of an entry refused alone; read in part (the
		// context ended or the connection broke while it came), it could name a wrong one,
		// and a too-old entry taken for a bad request is dropped instead of re-stamped.
		return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w: %w (reading the rest of the answer: %w)", ErrUnavailable, se, berr)}
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		return answer{verdict: vSplit, status: status, inDoubt: doubt, body: body}
	case status == http.StatusTooManyRequests && att.split:
		return answer{verdict: vSplit, status: status, inDoubt: doubt, body: body}
	case status >= 200 && status < 300:
		return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w: %w", ErrNotIngested, se)}
	case status == http.StatusTooManyRequests || status >= 500:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w (%w after %d attempts): %w", ErrUnavailable, ctxErr, att.attempts, se)}
		}
		why := "retries exhausted"
		if att.outOfTime {
			why = "no time left for another retry"
		}
		return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w (%s after %d attempts): %w", ErrUnavailable, why, att.attempts, se)}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w: %w", ErrAuth, se)}
	case status >= 300 && status < 400:
		return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w: %w: the receiver redirects the push%s; "+
			"redirects are not followed: point sink.loki.url at the receiver's push endpoint itself", ErrUnexpectedStatus, se, redirectTarget(resp))}
	default:
		return answer{verdict: vUndelivered, status: status, inDoubt: doubt, err: fmt.Errorf("%w: %w", ErrUnexpectedStatus, se)}
	}
}

// redirectTarget names where a redirect points, without its query and user info (an auth
// proxy's login URL may carry a state token), or "" when it names none.
func redirectTarget(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return ""
	}
	loc.User, loc.RawQuery, loc.Fragment = nil, "", ""
	return " to " + loc.String()
}

func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4096))
	_ = body.Close()
}

// readBody reads at most maxBodyBytes of a failed answer's body, as valid UTF-8, and the error
// that stopped it short of its end or of the bound.
func readBody(body io.ReadCloser) (string, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxBodyBytes))
	drain(body)
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD")), err
}

// excerpt is the start of a body for an error message.
func excerpt(body string) string {
	s, _ := CapLine(body, bodyExcerptBytes)
	return strings.TrimSpace(s)
}

func (p *push) reject(idx int, reason Reason, status int, detail string) {
	p.res.Outcomes[idx] = Rejected
	p.res.Rejected = append(p.res.Rejected, Rejection{Index: idx, Ref: p.entries[idx].Ref, Reason: reason, Status: status, Detail: detail})
}

// finish fills the per-outcome slices in input order.
func (p *push) finish() {
	r := p.res
	na, nn := 0, 0
	for _, o := range r.Outcomes {
		switch o {
		case Accepted:
			na++
		case NotDelivered:
			nn++
		}
	}
	if na > 0 {
		r.Accepted = make([]uint64, 0, na)
	}
	if nn > 0 {
		r.NotDelivered = make([]uint64, 0, nn)
	}
	for i, o := range r.Outcomes {
		switch o {
		case Accepted:
			r.Accepted = append(r.Accepted, p.entries[i].Ref)
		case NotDelivered:
			r.NotDelivered = append(r.NotDelivered, p.entries[i].Ref)
		}
	}
	if len(r.Rejected) > 1 {
		sortRejections(r.Rejected)
	}
	slices.Sort(r.InDoubtIndexes) // the items of a request are in stream order
	if nn == 0 {
		r.Err = nil
	} else if r.Err == nil {
		r.Err = fmt.Errorf("%w: push ended before every entry was sent", ErrUnavailable)
	}
}
