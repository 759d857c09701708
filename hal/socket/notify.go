package socket

import (
	"runtime"
	"time"

	"github.com/weftccl/weft/hal/netcore"
)

// notifier is netcore's: it wakes every goroutine waiting for some state
// to change. The poll policy below (spin, then sleep) is this transport's
// own: a device copy that stages a chunk completes in tens to hundreds of
// microseconds, so it yields rather than sleeps (hal/netplugin, which
// polls a plugin with no blocking wait, sleeps sooner).
type notifier = netcore.Notifier

// spinFor is how long a poll of a device engine yields the processor
// between polls before it starts sleeping. Go rounds sleeps shorter than a
// millisecond up to about one when the runtime is idle, while staging a
// chunk takes tens to hundreds of microseconds: sleeping at once would
// stall every chunk for a millisecond.
const spinFor = 2 * time.Millisecond

// handoffSpin is how long a goroutine that waits for another one's next
// step (a sender for the completer's word that its chunk is staged) polls
// before it blocks: a small message's staging takes a few microseconds,
// less than a block and a wake-up through the scheduler cost.
const handoffSpin = 50 * time.Microsecond

// spinUntil polls ready, yielding the processor between polls, for at
// most handoffSpin, and reports whether it held.
func spinUntil(ready func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if i%16 == 15 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > handoffSpin {
				return false
			}
		}
		runtime.Gosched()
	}
}

// backoff pauses between two polls of a device engine that has not
// finished yet, waiting started at start: yield while the wait is shorter
// than spinFor, then sleep 100 µs (about 1 ms in practice).
func backoff(start time.Time) {
	if time.Since(start) < spinFor {
		runtime.Gosched()
		return
	}
	time.Sleep(100 * time.Microsecond)
}
