//go:build !linux

package socket

import (
	"net"
	"time"
)

// spinner polls sockets only on Linux (spin_linux.go); elsewhere the
// receiver parks between frames at once.
func spinner(net.Conn, time.Duration) func() { return nil }
