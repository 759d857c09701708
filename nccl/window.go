//go:build cgo

package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/hal"
)

// Memory windows (ncclCommWindowRegister / ncclCommWindowDeregister, NCCL
// 2.27 and later): a collective registration, in the same order on every
// rank, of the ncclMemAlloc memory that holds [buff, buff+size), through
// weft.Comm.RegisterWindow. Every rank maps every other rank's window:
// receives into a window are stored by the sender directly, and with
// NCCL_WIN_COLL_SYMMETRIC (the caller promises the same offset from the
// window's head on every rank for a collective's buffers) a large
// AllReduce into a window runs zero-copy on the copy engines (weft's
// window.go). Memory that is not ncclMemAlloc'd takes part with nothing:
// the call succeeds, the window serves no zero-copy collective on any rank
// and its receives take the scratch path. Unlike ncclCommRegister (local
// in NCCL, so opt-in here: register.go) the window calls are collective in
// NCCL too, so weft honours them by default.

// winSymmetric is NCCL_WIN_COLL_SYMMETRIC (nccl.h); the other flag bits
// (NCCL_WIN_STRICT_ORDERING, NCCL_WIN_CFT_COUNTED) concern NCCL's own
// device API and change nothing here.
const winSymmetric = 0x01

// windows are the live window handles, by handle.
type windowTable struct {
	mu   sync.Mutex
	wins map[uintptr]winHandle
}

type winHandle struct {
	comm uintptr
	w    *weft.Window // nil: every call of the communicator is forwarded
}

var windows = &windowTable{wins: map[uintptr]winHandle{}}

// register is ncclCommWindowRegister for communicator c.
func (wt *windowTable) register(c *comm, p uintptr, n int64, flags int32) (uintptr, error) {
	if n < 0 {
		return 0, fmt.Errorf("size %d (argument size): %w", n, hal.ErrInvalidArgument)
	}
	if err := c.usable(); err != nil {
		return 0, err
	}
	h := newHandle()
	var w *weft.Window
	if c.w != nil {
		buf := devices.containing(p, n)
		if buf == nil {
			slog.Debug("weft: ncclCommWindowRegister: range not inside ncclMemAlloc memory; the window serves no zero-copy call",
				"rank", c.rank, "ptr", fmt.Sprintf("%#x", p), "bytes", n)
		}
		var err error
		if w, err = c.w.RegisterWindow(uint64(p), n, buf, flags&winSymmetric != 0); err != nil {
			return 0, err
		}
	}
	wt.mu.Lock()
	wt.wins[h] = winHandle{comm: c.handle, w: w}
	wt.mu.Unlock()
	return h, nil
}

// deregister is ncclCommWindowDeregister: window h of communicator c is
// unmapped from its peers.
func (wt *windowTable) deregister(c *comm, h uintptr) error {
	wt.mu.Lock()
	wh, ok := wt.wins[h]
	if ok && wh.comm == c.handle {
		delete(wt.wins, h)
	}
	wt.mu.Unlock()
	if !ok || wh.comm != c.handle {
		return fmt.Errorf("window %#x is not a live window of this communicator (argument win): %w", h, hal.ErrInvalidArgument)
	}
	if wh.w == nil || c.w == nil {
		return nil
	}
	return c.w.DeregisterWindow(wh.w)
}

// forget drops the handles of communicator c's windows (at destroy,
// where weft.Comm.Close has unmapped them).
func (wt *windowTable) forget(c *comm) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	for h, wh := range wt.wins {
		if wh.comm == c.handle {
			delete(wt.wins, h)
		}
	}
}
