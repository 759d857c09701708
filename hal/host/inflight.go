package host

import (
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
)

// A user is work that touches mapped memory while it runs: a launch queued
// or running on a stream, a request of a port-channel engine. abort asks it
// to stop early; it must return without waiting.
type user interface {
	abort(why string)
}

// guard keeps a mapping (a buffer, a multicast group's copies) alive while
// users hold it: retire, the first step of every unmap, refuses new users,
// aborts the current ones and waits for them to let go. Nothing unmaps
// memory that work in flight can still touch.
type guard struct {
	mu      sync.Mutex
	cond    *sync.Cond
	users   map[user]int
	retired bool
}

// acquire makes u a user of the mapping; it fails with ErrInvalidUsage
// once the mapping is being, or has been, unmapped.
func (g *guard) acquire(u user, what string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return fmt.Errorf("host: %s was freed (or is being freed): %w", what, hal.ErrInvalidUsage)
	}
	if g.users == nil {
		g.users = map[user]int{}
	}
	g.users[u]++
	return nil
}

// release undoes one acquire of u.
func (g *guard) release(u user) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.users[u]--; g.users[u] <= 0 {
		delete(g.users, u)
	}
	if len(g.users) == 0 && g.cond != nil {
		g.cond.Broadcast()
	}
}

// retire refuses new users, aborts the current ones with why, and waits
// until none is left or deadline passes. It returns how many users it
// aborted. At the deadline the guard accepts users again and the error
// wraps hal.ErrTimeout: the caller must leave the memory mapped.
func (g *guard) retire(deadline time.Time, what, why string) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return 0, fmt.Errorf("host: %s: already freed or being freed: %w", what, hal.ErrInvalidUsage)
	}
	g.retired = true
	n := len(g.users)
	if n == 0 {
		return 0, nil
	}
	for u := range g.users {
		u.abort(why)
	}
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	stop := time.AfterFunc(time.Until(deadline), func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop.Stop()
	for len(g.users) > 0 {
		if !time.Now().Before(deadline) {
			g.retired = false
			return n, fmt.Errorf("host: %s: %d of %d aborted launches or engine requests still use it at the deadline; left mapped: %w",
				what, len(g.users), n, hal.ErrTimeout)
		}
		g.cond.Wait()
	}
	return n, nil
}

// pinSet acquires guards for u, all or none.
func pinSet(u user, gs []*guard, what string) error {
	for i, g := range gs {
		if err := g.acquire(u, what); err != nil {
			for _, h := range gs[:i] {
				h.release(u)
			}
			return err
		}
	}
	return nil
}

// unpinSet releases guards acquired by pinSet.
func unpinSet(u user, gs []*guard) {
	for _, g := range gs {
		g.release(u)
	}
}

// addGuard appends g to gs unless it is nil or already there.
func addGuard(gs []*guard, g *guard) []*guard {
	if g == nil {
		return gs
	}
	for _, x := range gs {
		if x == g {
			return gs
		}
	}
	return append(gs, g)
}

// noAbort is a user that cannot stop early (an engine's copy is short);
// retire waits for it.
type noAbort struct{ _ byte }

func (*noAbort) abort(string) {}
