package netplugin

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// authConn carries the challenge–response of internal/auth over a link's
// two plugin comms: what the handshake writes goes out as auth messages
// on the send comm, auth messages received are what it reads. The
// progress goroutine moves the bytes; the handshake runs on a goroutine
// of its own, blocked in Read between messages.
type authConn struct {
	peer int
	in   chan []byte   // received payloads
	out  chan []byte   // payloads to send
	dead chan struct{} // closed when the link is reset or fails
	kick func()

	mu       sync.Mutex
	buf      []byte
	deadline time.Time
}

func newAuthConn(peer int, kick func()) *authConn {
	return &authConn{peer: peer, in: make(chan []byte, 16), out: make(chan []byte, 16), dead: make(chan struct{}), kick: kick}
}

func (c *authConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if len(c.buf) > 0 {
		n := copy(b, c.buf)
		c.buf = c.buf[n:]
		c.mu.Unlock()
		return n, nil
	}
	d := c.deadline
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case p := <-c.in:
		n := copy(b, p)
		c.mu.Lock()
		c.buf = p[n:]
		c.mu.Unlock()
		return n, nil
	case <-c.dead:
		return 0, io.EOF
	case <-timeout:
		return 0, os.ErrDeadlineExceeded
	}
}

func (c *authConn) Write(b []byte) (int, error) {
	select {
	case c.out <- append([]byte(nil), b...):
		c.kick()
		return len(b), nil
	case <-c.dead:
		return 0, io.ErrClosedPipe
	default:
		return 0, fmt.Errorf("net plugin handshake with rank %d: more than %d messages queued", c.peer, cap(c.out))
	}
}

func (c *authConn) Close() error                       { return nil }
func (c *authConn) LocalAddr() net.Addr                { return pluginAddr(-1) }
func (c *authConn) RemoteAddr() net.Addr               { return pluginAddr(c.peer) }
func (c *authConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *authConn) SetWriteDeadline(t time.Time) error { return nil }
func (c *authConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// pluginAddr names the far end of a link in the handshake's messages.
type pluginAddr int

func (a pluginAddr) Network() string { return "ncclnet" }
func (a pluginAddr) String() string {
	if a < 0 {
		return "this rank"
	}
	return fmt.Sprintf("the net plugin connection claiming rank %d", int(a))
}
