//go:build !linux

package socket

import (
	"net"
	"time"
)

// detach keeps c elsewhere than on Linux (rawconn_linux.go).
func detach(c net.Conn, spin time.Duration, peek bool) net.Conn { return c }

// writeBuffers writes bufs on c before the deadline.
func writeBuffers(c net.Conn, bufs net.Buffers, dl time.Time) error {
	c.SetWriteDeadline(dl)
	_, err := bufs.WriteTo(c)
	return err
}
