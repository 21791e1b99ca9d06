package httpd

import (
	"io"
	"net"
	"time"
)

// Lingering close. When the server answers before reading a whole request
// (413 for a body over server.max_body) and closes the connection, unread
// bytes in the socket make the kernel send a reset, which can destroy the
// answer before the client reads it. As net/http does, a closing
// connection first shuts down its write side and drains what the client is
// still sending, for a bounded time and size, so the client sees the 413.
//
// The bounds: up to 2 s and 16 MiB per closing connection, enough for a
// client that sends a 10 MB body without "Expect: 100-continue" to finish
// writing and read its 413; what sends more, or slower, is cut off.
const (
	lingerTimeout = 2 * time.Second
	lingerMax     = 16 << 20
)

// lingerListener wraps accepted TCP connections with a lingering Close.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return &lingerConn{TCPConn: tc}, nil
	}
	return c, nil
}

type lingerConn struct{ *net.TCPConn }

// Close shuts the write side at once and finishes closing in the
// background, after the peer stopped sending or the bounds ran out.
func (c *lingerConn) Close() error {
	if err := c.TCPConn.CloseWrite(); err != nil {
		return c.TCPConn.Close()
	}
	go func() {
		_ = c.TCPConn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, c.TCPConn, lingerMax)
		_ = c.TCPConn.Close()
	}()
	return nil
}
