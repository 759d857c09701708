package socket

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawConn is a connected TCP socket that moves frames outside Go's
// netpoller: its descriptor, a duplicate of the connection's taken once
// the handshake is over, is read and written with non-blocking system
// calls; a reader that finds nothing polls again for spin, then sleeps
// (wait); a writer whose socket is full sleeps. Deadlines are words read
// when it sleeps, not runtime timers reset per frame.
//
// Why: on the 2×H100 host (a virtual machine) one hop of a 160-byte
// message between two threads on loopback took 4.5–5.0 µs through raw
// descriptors, 5.8–6.9 through net.Conn, and 7.3–9.0 with a deadline set
// before every read and write as the frames' path did
// (docs/bench/2026-11-27-h100x2, call 2): a descriptor registered with the
// netpoller makes every segment that arrives wake the poller's thread
// from the sender's system call, and each SetDeadline resets a runtime
// timer. A frame's write there took 7.2 µs and its delivery to the
// polling reader 3.6 (docs/network.md, the timeline).
type rawConn struct {
	fd   int
	spin time.Duration
	// peek: a Read that found the socket empty takes what comes with
	// MSG_PEEK, and the next Read consumes it (Options.NoPeek). unread is
	// what the last Read peeked; scratch receives nothing (MSG_TRUNC
	// discards) but gives consume a buffer of that length.
	peek          bool
	unread        int
	peeks         int // reads served by peeking (tests)
	scratch       []byte
	local, remote net.Addr
	rdl, wdl      atomic.Int64 // deadlines, Unix nanoseconds; 0: none
	closed        atomic.Bool
	// mu is held shared across every system call on fd and exclusively
	// by Close to close it, so that no call reaches a number the system
	// has given to another file.
	mu sync.RWMutex
}

// detach returns c's socket as a rawConn polling for spin before it
// sleeps (peek: not Options.NoPeek), and closes c; c itself where it is not a
// plain TCP connection (an encrypted one, a test's pipe) or the duplicate
// fails.
func detach(c net.Conn, spin time.Duration, peek bool) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	f, err := tc.File() // a duplicate, in blocking mode, not in the netpoller
	if err != nil {
		return c
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return c
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return c
	}
	rc := &rawConn{fd: fd, spin: spin, peek: peek, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	if peek {
		rc.scratch = make([]byte, peekMax)
	}
	tc.Close() // leaves the netpoller; the socket lives on in fd
	return rc
}

// wait sleeps until fd is ready for reading (or writing) or the
// deadline dl (0: none) passes (os.ErrDeadlineExceeded). It sleeps in
// Go's netpoller on a duplicate of fd registered for the wait only: a
// goroutine asleep in a system call would hold its processor until the
// runtime's monitor takes it back, up to milliseconds later on a machine
// of two cores; registered all the time, the socket would wake the
// netpoller on every segment that arrives, from the sender's system call
// (see rawConn). Four system calls per sleep, which only follows Options.Spin
// without data or a full socket.
func (c *rawConn) wait(write bool, dl int64) error {
	fd, err := unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "socket") // non-blocking: in the netpoller
	defer f.Close()
	events, set := int16(unix.POLLIN), f.SetReadDeadline
	if write {
		events, set = unix.POLLOUT, f.SetWriteDeadline
	}
	if dl != 0 {
		if err := set(time.Unix(0, dl)); err != nil {
			return err
		}
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	ready := func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(p, 0)
		return err == nil && n > 0 || c.closed.Load()
	}
	if write {
		return raw.Write(ready)
	}
	return raw.Read(ready)
}

// peekMax is the largest Read that a rawConn with peek serves by peeking:
// a frame's header and a small payload, what the receiver's buffered
// reads ask for. Larger reads (a payload read straight into its window)
// consume as they read.
const peekMax = 4096

// Read reads what the socket holds, waiting (spin, then wait) until
// something is there, the peer closes (io.EOF) or the read deadline
// passes. With peek, a Read of at most peekMax bytes that found the
// socket empty returns what then comes without taking it from the
// socket's queue, and the next Read takes it first (consume): Linux sends
// the ACK of a connection that carries data one way from the read that
// drains its queue, so the receiver's frame waits for that segment's
// transmission when it is read and consumed at once; consumed on the
// next Read, after the caller has applied it, the ACK leaves off the
// frame's path (a 64 B hop's ACK costs ~2 µs on the 2×H100 host's
// loopback, docs/network.md).
func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.unread > 0 {
		if err := c.consume(); err != nil {
			return 0, c.opError("read", err)
		}
	}
	var spinStart time.Time
	waited := false
	for {
		if c.closed.Load() {
			return 0, net.ErrClosed
		}
		var n int
		var err error
		if waited && c.peek && len(p) <= peekMax {
			n, err = sysRecv(c.fd, p, unix.MSG_PEEK)
			if n > 0 {
				c.unread = n
				c.peeks++
			}
		} else {
			n, err = unix.Read(c.fd, p)
		}
		switch {
		case n > 0:
			return n, nil
		case err == nil:
			return 0, io.EOF
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return 0, c.opError("read", err)
		}
		waited = true
		if c.spin > 0 {
			now := time.Now()
			if spinStart.IsZero() {
				spinStart = now
			}
			if now.Sub(spinStart) < c.spin {
				continue
			}
		}
		if err := c.wait(false, c.rdl.Load()); err != nil {
			return 0, c.opError("read", err)
		}
	}
}

// consume takes the unread bytes the last Read peeked out of the
// socket's queue: recv with MSG_TRUNC, which discards TCP data instead of
// copying it (tcp(7)). They are in the queue, so it does not wait.
func (c *rawConn) consume() error {
	for c.unread > 0 {
		n, err := sysRecv(c.fd, c.scratch[:c.unread], unix.MSG_TRUNC)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n <= 0 || n > c.unread:
			return fmt.Errorf("discarding %d peeked bytes took %d: %w", c.unread, n, io.ErrUnexpectedEOF)
		}
		c.unread -= n
	}
	return nil
}

// Write writes all of p (see writev).
func (c *rawConn) Write(p []byte) (int, error) {
	n, err := c.writev([][]byte{p})
	return int(n), err
}

// writev writes every byte of bufs with writev(2), waiting (wait) while the
// socket is full, until the write deadline.
func (c *rawConn) writev(bufs [][]byte) (int64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var total int64
	for len(bufs) > 0 {
		if c.closed.Load() {
			return total, net.ErrClosed
		}
		n, err := sysWritev(c.fd, bufs)
		if n > 0 {
			total += int64(n)
			for n > 0 && len(bufs) > 0 {
				k := min(n, len(bufs[0]))
				bufs[0] = bufs[0][k:]
				n -= k
				if len(bufs[0]) == 0 {
					bufs = bufs[1:]
				}
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		switch {
		case err == nil || err == unix.EINTR:
		case err == unix.EAGAIN:
			if err := c.wait(true, c.wdl.Load()); err != nil {
				return total, c.opError("write", err)
			}
		default:
			return total, c.opError("write", err)
		}
	}
	return total, nil
}

func (c *rawConn) opError(op string, err error) error {
	if err == unix.EPIPE || err == unix.ECONNRESET {
		err = os.NewSyscallError(op, err)
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// Close shuts the socket down (which wakes a reader or writer asleep in
// wait) and closes the descriptor once no call is under way.
func (c *rawConn) Close() error {
	if c.closed.Swap(true) {
		return net.ErrClosed
	}
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
	c.mu.Lock()
	defer c.mu.Unlock()
	return unix.Close(c.fd)
}

func (c *rawConn) LocalAddr() net.Addr  { return c.local }
func (c *rawConn) RemoteAddr() net.Addr { return c.remote }

func deadline(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (c *rawConn) SetDeadline(t time.Time) error {
	c.rdl.Store(deadline(t))
	c.wdl.Store(deadline(t))
	return nil
}
func (c *rawConn) SetReadDeadline(t time.Time) error  { c.rdl.Store(deadline(t)); return nil }
func (c *rawConn) SetWriteDeadline(t time.Time) error { c.wdl.Store(deadline(t)); return nil }

// sysRecv is recv(2) of a connected socket into p (len(p) > 0) with flags:
// unix.Recvfrom allocates the sender's address on every call, which a
// reader polling an empty socket makes thousands of times a second.
func sysRecv(fd int, p []byte, flags int) (int, error) {
	n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// writevMax is how many buffers sysWritev passes from an array on the stack:
// a frame's header, payload and trailer. More take unix.Writev.
const writevMax = 4

// sysWritev is writev(2) of bufs without the allocation of unix.Writev's
// vector (one per frame written).
func sysWritev(fd int, bufs [][]byte) (int, error) {
	if len(bufs) > writevMax {
		return unix.Writev(fd, bufs)
	}
	var iov [writevMax]unix.Iovec
	n := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		iov[n].Base = &b[0]
		iov[n].SetLen(len(b))
		n++
	}
	if n == 0 {
		return 0, nil
	}
	w, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(n))
	if e != 0 {
		return 0, e
	}
	return int(w), nil
}

// writeBuffers writes bufs on c before the deadline: one writev(2) call
// on a rawConn (no timer), else net.Buffers' WriteTo after
// SetWriteDeadline.
func writeBuffers(c net.Conn, bufs net.Buffers, dl time.Time) error {
	if rc, ok := c.(*rawConn); ok {
		rc.wdl.Store(deadline(dl))
		_, err := rc.writev(bufs)
		return err
	}
	c.SetWriteDeadline(dl)
	b := bufs // WriteTo's receiver goes to the heap: only on this path
	_, err := b.WriteTo(c)
	return err
}
