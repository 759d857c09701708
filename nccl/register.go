//go:build cgo

package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Buffer registration (ncclCommRegister / ncclCommDeregister) for
// zero-copy point-to-point: a receive into a registered buffer is stored
// by the sender directly (weft.Comm.Register; docs/collectives.md,
// "Zero-copy point-to-point").
//
// weft registers the whole ncclMemAlloc buffer that holds [buff,
// buff+size): that is the memory its backends can export to the peers
// (hal.MemoryMapped). Other memory (plain cudaMalloc) is not registered;
// the call still succeeds and its receives take the scratch path, as
// before. NCCL's ncclCommRegister is local, and clients rely on it
// (PyTorch's allocator hook registers each segment as one rank's caching
// allocator makes it, in an order other ranks need not share), while
// weft's exchange of mappings is collective. So by default weft's call is
// local too: it returns a handle and registers nothing (receives take the
// scratch path). WEFT_NCCL_REGISTER=collective turns on the zero-copy
// registration for clients that register the same buffers in the same
// order on every rank (nccl-tests -R 1, examples/cbench -R 1): then a rank
// whose range is not ncclMemAlloc'd takes part with nothing, and a rank
// that never calls makes the others' call fail after the communicator's
// timeout.

// registrations are the handles ncclCommRegister gave out, by
// communicator, with the buffer each names (nil: nothing registered) and
// how many live handles name each buffer.
type registrations struct {
	mu      sync.Mutex
	handles map[uintptr]regHandle
	refs    map[hal.Buffer]int
}

type regHandle struct {
	comm uintptr
	buf  hal.Buffer
}

var regs = &registrations{handles: map[uintptr]regHandle{}, refs: map[hal.Buffer]int{}}

// register is ncclCommRegister for comm c: it registers the ncclMemAlloc
// buffer holding [p, p+n) with c's peers (collective) and returns the
// handle to give back.
func (rt *registrations) register(c *comm, p uintptr, n int64) (uintptr, error) {
	if n < 0 {
		return 0, fmt.Errorf("size %d: %w", n, hal.ErrInvalidArgument)
	}
	if err := c.usable(); err != nil {
		return 0, err
	}
	h := newHandle()
	if c.w == nil || env.String("WEFT_NCCL_REGISTER") != "collective" {
		// Every call is forwarded (nothing of weft's to register), or
		// registration is local, as NCCL's: a handle and nothing more.
		rt.mu.Lock()
		rt.handles[h] = regHandle{comm: c.handle}
		rt.mu.Unlock()
		return h, nil
	}
	buf := devices.containing(p, n)
	var offer hal.Buffer
	if buf != nil {
		offer = buf
	} else {
		slog.Debug("weft: ncclCommRegister: range not inside ncclMemAlloc memory; its receives take the scratch path",
			"rank", c.rank, "ptr", fmt.Sprintf("%#x", p), "bytes", n)
	}
	if err := c.w.Register(offer); err != nil {
		return 0, err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.handles[h] = regHandle{comm: c.handle, buf: buf}
	if buf != nil {
		rt.refs[buf]++
	}
	return h, nil
}

// deregister is ncclCommDeregister: the buffer's registration ends with
// the last handle that names it (not collective).
func (rt *registrations) deregister(c *comm, h uintptr) error {
	rt.mu.Lock()
	rh, ok := rt.handles[h]
	if !ok || rh.comm != c.handle {
		rt.mu.Unlock()
		return fmt.Errorf("handle %#x is not a live registration of this communicator: %w", h, hal.ErrInvalidArgument)
	}
	delete(rt.handles, h)
	last := false
	if rh.buf != nil {
		rt.refs[rh.buf]--
		if last = rt.refs[rh.buf] == 0; last {
			delete(rt.refs, rh.buf)
		}
	}
	rt.mu.Unlock()
	if last && c.w != nil {
		return c.w.Deregister(rh.buf)
	}
	return nil
}
