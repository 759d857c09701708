//go:build !linux

package socket

import "net"

// spinning reports whether c polls for data before it sleeps: only
// Linux detaches connections (rawconn_linux.go).
func spinning(net.Conn) bool { return false }
