package netcore

import (
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
)

// Notifier wakes every goroutine waiting for some state to change. A
// waiter takes the channel with Wait, checks its condition, and then
// blocks on the channel (with a deadline of its own); Notify closes it.
// It allocates only when somebody waits. The zero value is ready to use.
//
// How a backend polls between notifications (spin, then sleep) is its
// own policy and stays in the backend: hal/socket yields for 2 ms while
// a device copy completes, hal/netplugin sleeps between polls of a plugin
// that has no blocking wait.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns the channel the next Notify closes.
func (n *Notifier) Wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes every goroutine blocked on a channel Wait returned.
func (n *Notifier) Notify() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// Wait is what Await waits for, and on what it gives up.
type Wait struct {
	Describe func() string   // names the waiter in a timeout (called only then)
	What     string          // names the wait
	Timeout  time.Duration   // the most time without a notification
	Ready    func() bool     // the condition
	Err      func() error    // the waiter's failure, checked on every wake
	Dead     <-chan struct{} // closed once the waiter failed: return Err() (nil: none)
	Stop     <-chan struct{} // closed once the waiter stops: return Stopped (nil: none)
	Stopped  error
}

// Await waits until w.Ready holds, checking it and w.Err each time n is
// notified. It returns w.Err's failure, w.Stopped once w.Stop closes, or,
// when nothing is notified for w.Timeout, an error wrapping
// hal.ErrTimeout: "<Describe()>: <What>: no progress within <Timeout>".
func (n *Notifier) Await(w Wait) error {
	if w.Ready() {
		return nil
	}
	timer := time.NewTimer(w.Timeout)
	defer timer.Stop()
	for {
		ch := n.Wait()
		if w.Ready() {
			return nil
		}
		if err := w.Err(); err != nil {
			return err
		}
		select {
		case <-ch:
			timer.Reset(w.Timeout)
		case <-w.Dead:
			return w.Err()
		case <-w.Stop:
			return w.Stopped
		case <-timer.C:
			return fmt.Errorf("%s: %s: no progress within %v: %w", w.Describe(), w.What, w.Timeout, hal.ErrTimeout)
		}
	}
}
