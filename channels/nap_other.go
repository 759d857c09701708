//go:build !linux

package channels

import "time"

// nap sleeps about d (time.Sleep: the runtime may round it up).
func nap(d time.Duration) { time.Sleep(d) }
