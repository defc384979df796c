package loki

import (
	"context"
	"io"
	"net"
)

// dialer is the signature of http.Transport.DialContext.
type dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// wholeBodies makes the connections dial returns write a request body held in memory with one
// Write (see wholeBodyConn).
func wholeBodies(dial dialer) dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &wholeBodyConn{Conn: c}, nil
	}
}

// wholeBodyConn hands a push's body to the socket in one Write. Over plain HTTP, net/http
// passes a body of known length to the connection's ReadFrom inside an io.LimitedReader, which
// hides the body's WriterTo, and a TCP connection then copies it through a 32 KiB buffer: one
// copy and one system call per 32 KiB. A body that is a byte slice (a bytes.Reader, as the
// client's are) and fits the limit goes out whole instead; anything else goes to the
// connection's own ReadFrom, as before. Over TLS the connection is beneath crypto/tls, which
// writes a record at a time whatever this does.
type wholeBodyConn struct{ net.Conn }

// sliceBody is a body held in memory: what is left of it, written with one Write.
type sliceBody interface {
	io.WriterTo
	Len() int
}

// ReadFrom implements io.ReaderFrom, which net/http's writer of a request body looks for.
func (c *wholeBodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if b, ok := lr.R.(sliceBody); ok && int64(b.Len()) <= lr.N {
			n, err := b.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
