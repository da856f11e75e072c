package attach

import (
	"bufio"
	"net"
)

// Buffered is c read through r: a connection taken over from an HTTP
// server (or client) whose reader already holds bytes of the stream.
func Buffered(c net.Conn, r *bufio.Reader) net.Conn { return &bufferedConn{Conn: c, r: r} }

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
