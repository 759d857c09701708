package socket

import (
	"runtime"
	"sync"
	"time"
)

// notifier wakes every goroutine waiting for some state to change. A
// waiter takes the channel, checks its condition, and then blocks on the
// channel; notify closes it. It allocates only when somebody waits.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

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
