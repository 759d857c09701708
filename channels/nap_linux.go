//go:build linux

package channels

import (
	"syscall"
	"time"
)

// nap blocks the calling goroutine's thread in the kernel for about d
// (nanosleep). Unlike time.Sleep, whose sub-millisecond sleeps an idle Go
// runtime rounds up to a millisecond (its poller waits in whole
// milliseconds), it returns after d plus the kernel's timer slack (50 µs
// by default).
func nap(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Nanosleep(&ts, nil) // an early return (EINTR) is a shorter nap
}
