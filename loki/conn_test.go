package loki

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// writeCount counts the writes to the sockets of a client's transport, and their bytes.
type writeCount struct{ writes, bytes atomic.Int64 }

type countingConn struct {
	net.Conn
	n *writeCount
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.n.writes.Add(1)
	c.n.bytes.Add(int64(len(p)))
	return c.Conn.Write(p)
}

// countWrites makes the client's own transport count what its connections write to their
// sockets, beneath the client's wholeBodyConn.
func countWrites(t *testing.T, c *Client) *writeCount {
	t.Helper()
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", c.http.Transport)
	}
	n := &writeCount{}
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		w, ok := conn.(*wholeBodyConn)
		if !ok {
			t.Errorf("the transport dialled a %T, want *wholeBodyConn", conn)
			return conn, nil
		}
		w.Conn = &countingConn{Conn: w.Conn, n: n}
		return conn, nil
	}
	return n
}

// bulkyBatch is about 600 KiB of lines snappy cannot shrink.
func bulkyBatch() []Entry {
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Now()
	es := make([]Entry, 300)
	for i := range es {
		line := make([]byte, 0, 2048)
		for len(line) < 2048 {
			line = fmt.Appendf(line, "%016x", rng.Uint64())
		}
		es[i] = Entry{Timestamp: now.Add(time.Duration(i-len(es)) * time.Millisecond), Labels: lbl("job", "sf2loki"),
			Line: string(line), Ref: uint64(i + 1)}
	}
	return es
}

// Over plain HTTP a push's body goes to the socket in one write, not in net/http's 32 KiB
// pieces (a copy and a system call each).
func TestPushBodyWrittenWhole(t *testing.T) {
	run := simloki.Start(t, simloki.Options{})
	c := newClient(t, run.Server, func(o *Options) { o.URL, o.Transport = run.PushURL(), nil })
	n := countWrites(t, c)
	es := bulkyBatch()
	res := c.Push(context.Background(), es)
	wantAllAccepted(t, res, run.Server, es)
	if res.Requests != 1 {
		t.Fatalf("%d requests, want 1", res.Requests)
	}
	if n.bytes.Load() < 256<<10 {
		t.Fatalf("%d bytes written, want a body of at least 256 KiB", n.bytes.Load())
	}
	// The headers and the start of the body fill the write buffer once, the rest goes whole.
	if w := n.writes.Load(); w > 3 {
		t.Errorf("%d bytes written in %d writes, want at most 3", n.bytes.Load(), w)
	}
}

// recordConn is a connection that keeps what is written to it.
type recordConn struct {
	net.Conn
	buf    bytes.Buffer
	writes int
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.writes++
	return r.buf.Write(p)
}

// Only a body held in memory that fits its limit is written whole; a longer one and any other
// reader are copied as io.Copy would, up to the limit.
func TestWholeBodyConnReadFrom(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 10000)
	for _, tc := range []struct {
		name       string
		r          io.Reader
		want       []byte
		wantWrites int // 0: any number
	}{
		{"slice within its limit", &io.LimitedReader{R: bytes.NewReader(data), N: int64(len(data))}, data, 1},
		{"slice under a larger limit", &io.LimitedReader{R: bytes.NewReader(data), N: int64(len(data)) + 5}, data, 1},
		{"slice over its limit", &io.LimitedReader{R: bytes.NewReader(data), N: 1000}, data[:1000], 0},
		{"another reader", &io.LimitedReader{R: iotest.HalfReader(bytes.NewReader(data)), N: int64(len(data))}, data, 0},
		{"no limit", bytes.NewReader(data), data, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lr, limited := tc.r.(*io.LimitedReader)
			var limit int64
			if limited {
				limit = lr.N
			}
			rc := &recordConn{}
			n, err := (&wholeBodyConn{Conn: rc}).ReadFrom(tc.r)
			if err != nil || n != int64(len(tc.want)) || !bytes.Equal(rc.buf.Bytes(), tc.want) {
				t.Fatalf("ReadFrom = %d, %v; wrote %d bytes, want %d, equal %v", n, err, rc.buf.Len(), len(tc.want), bytes.Equal(rc.buf.Bytes(), tc.want))
			}
			if tc.wantWrites > 0 && rc.writes != tc.wantWrites {
				t.Errorf("%d writes, want %d", rc.writes, tc.wantWrites)
			}
			if limited && lr.N != limit-n {
				t.Errorf("the limit left is %d, want %d", lr.N, limit-n)
			}
		})
	}
}
