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

// backoff is the pause between two polls of a device engine that has not
// finished yet: yield for the first rounds (a host copy of a chunk takes
// tens of microseconds), then sleep, doubling up to 200 µs.
func backoff(round int) {
	if round < 64 {
		runtime.Gosched()
		return
	}
	d := time.Microsecond << min(round-64, 8)
	time.Sleep(min(d, 200*time.Microsecond))
}
