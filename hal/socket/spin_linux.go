package socket

import (
	"net"
	"syscall"
	"time"
)

// spinner returns, for a plain TCP connection, a function that polls the
// socket without blocking until data (or EOF, or an error) is there or d
// has passed; nil for other connections (encrypted ones, tests' pipes)
// or d of 0. A receiver calls it before it parks between frames: a frame
// that arrives while it polls is read without a wake-up of the parked
// goroutine through the netpoller, as NCCL's proxy threads poll
// non-blocking sockets (docs/network.md).
func spinner(c net.Conn, d time.Duration) func() {
	tc, ok := c.(*net.TCPConn)
	if !ok || d <= 0 {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var b [1]byte
	return func() {
		deadline := time.Now().Add(d)
		for {
			ready := false
			err := raw.Read(func(fd uintptr) bool {
				n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				// Data, EOF (0 bytes, no error) or an error other than
				// "nothing yet": the blocking read that follows reports it.
				ready = n > 0 || rerr != syscall.EAGAIN
				return true
			})
			if err != nil || ready || time.Now().After(deadline) {
				return
			}
		}
	}
}
