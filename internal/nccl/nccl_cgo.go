//go:build cgo

package nccl

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "weft_nccl.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens NCCL (see Library) once and keeps the result. It also sets
// NCCL_NVLS_ENABLE=0 unless the environment sets it: NVLink SHARP
// multicast can take a shared host's GPUs out of service
// (architecture.md §8).
func Load() error {
	loadOnce.Do(func() {
		if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
			os.Setenv("NCCL_NVLS_ENABLE", "0")
		}
		lib := Library()
		p := C.CString(lib)
		defer C.free(unsafe.Pointer(p))
		if C.weft_nccl_load(p) != 0 {
			loadErr = &LoadError{Library: lib, Detail: C.GoString(C.weft_nccl_load_error())}
			return
		}
		env.Logger("BENCH").Info("NCCL loaded", "lib", lib)
	})
	return loadErr
}

func check(call string, r C.ncclResult_t, comm uintptr) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: Result(r)}
	if s := C.weft_ncclGetErrorString(r); s != nil {
		e.Text = C.GoString(s)
	}
	if s := C.weft_ncclGetLastError(C.uintptr_t(comm)); s != nil {
		if last := C.GoString(s); last != "" {
			e.Text += ": " + last
		}
	}
	return e
}

func ensure(call string) error {
	if err := Load(); err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	return nil
}

// Version returns NCCL's version code (22803 for 2.28.3).
func Version() (int, error) {
	if err := ensure("ncclGetVersion"); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), check("ncclGetVersion", C.weft_ncclGetVersion(&v), 0)
}

// GetUniqueID makes the id that all ranks pass to CommInitRank.
func GetUniqueID() (UniqueID, error) {
	var id UniqueID
	if err := ensure("ncclGetUniqueId"); err != nil {
		return id, err
	}
	return id, check("ncclGetUniqueId", C.weft_ncclGetUniqueId(unsafe.Pointer(&id[0])), 0)
}

// Comm is an NCCL communicator.
type Comm struct {
	h      uintptr
	ctx    uintptr
	rank   int
	nranks int
}

// CommInitRank joins rank of an nranks communicator on the GPU of ctx, a
// CUcontext (hal/nvlink's (*Device).Context()), which is made current on
// the calling thread within the same call. Between GroupStart and GroupEnd
// one thread may initialise several ranks, one per GPU.
func CommInitRank(ctx uintptr, nranks int, id UniqueID, rank int) (*Comm, error) {
	if err := ensure("ncclCommInitRank"); err != nil {
		return nil, err
	}
	if err := cuda.Load(); err != nil {
		return nil, fmt.Errorf("ncclCommInitRank: %w", err)
	}
	var h C.uintptr_t
	var cu C.int
	r := C.weft_ncclCommInitRank(C.uintptr_t(cuda.SetCurrentProc()), C.uintptr_t(ctx), &h, C.int(nranks),
		unsafe.Pointer(&id[0]), C.int(rank), &cu)
	if cu != 0 {
		return nil, fmt.Errorf("ncclCommInitRank rank %d of %d: %w", rank, nranks, cuda.ResultError("cuCtxSetCurrent", cuda.Result(cu)))
	}
	if err := check("ncclCommInitRank", r, 0); err != nil {
		return nil, fmt.Errorf("rank %d of %d: %w", rank, nranks, err)
	}
	return &Comm{h: uintptr(h), ctx: ctx, rank: rank, nranks: nranks}, nil
}

// Rank and Size are the communicator's rank and number of ranks.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

func (c *Comm) ch() C.uintptr_t { return C.uintptr_t(c.h) }

// Destroy frees the communicator after its operations complete.
func (c *Comm) Destroy() error { return check("ncclCommDestroy", C.weft_ncclCommDestroy(c.ch()), 0) }

// Abort frees the communicator at once, abandoning pending operations.
func (c *Comm) Abort() error { return check("ncclCommAbort", C.weft_ncclCommAbort(c.ch()), 0) }

// AsyncError returns the communicator's asynchronous error, if any
// (ncclInProgress while a non-blocking init is still running).
func (c *Comm) AsyncError() error {
	var a C.ncclResult_t
	if err := check("ncclCommGetAsyncError", C.weft_ncclCommGetAsyncError(c.ch(), &a), c.h); err != nil {
		return err
	}
	return check("ncclCommGetAsyncError (async)", a, c.h)
}

// AllReduce reduces count elements of send across ranks into recv. send,
// recv are device addresses, stream a CUstream.
func (c *Comm) AllReduce(send, recv uint64, count int, dt DataType, op RedOp, stream uintptr) error {
	return check("ncclAllReduce", C.weft_ncclAllReduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
		C.int(dt), C.int(op), c.ch(), C.uintptr_t(stream)), c.h)
}

// AllGather gathers sendcount elements from every rank into recv
// (sendcount × Size elements).
func (c *Comm) AllGather(send, recv uint64, sendcount int, dt DataType, stream uintptr) error {
	return check("ncclAllGather", C.weft_ncclAllGather(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(sendcount),
		C.int(dt), c.ch(), C.uintptr_t(stream)), c.h)
}

// ReduceScatter reduces recvcount × Size elements of send and leaves this
// rank's recvcount elements in recv.
func (c *Comm) ReduceScatter(send, recv uint64, recvcount int, dt DataType, op RedOp, stream uintptr) error {
	return check("ncclReduceScatter", C.weft_ncclReduceScatter(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(recvcount),
		C.int(dt), C.int(op), c.ch(), C.uintptr_t(stream)), c.h)
}

// Broadcast copies count elements of root's send into every rank's recv.
func (c *Comm) Broadcast(send, recv uint64, count int, dt DataType, root int, stream uintptr) error {
	return check("ncclBroadcast", C.weft_ncclBroadcast(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
		C.int(dt), C.int(root), c.ch(), C.uintptr_t(stream)), c.h)
}

// Send sends count elements to peer (pair it with the peer's Recv, inside
// a group when both directions are used).
func (c *Comm) Send(send uint64, count int, dt DataType, peer int, stream uintptr) error {
	return check("ncclSend", C.weft_ncclSend(C.uintptr_t(send), C.size_t(count), C.int(dt), C.int(peer), c.ch(),
		C.uintptr_t(stream)), c.h)
}

// Recv receives count elements from peer.
func (c *Comm) Recv(recv uint64, count int, dt DataType, peer int, stream uintptr) error {
	return check("ncclRecv", C.weft_ncclRecv(C.uintptr_t(recv), C.size_t(count), C.int(dt), C.int(peer), c.ch(),
		C.uintptr_t(stream)), c.h)
}

// GroupStart starts a group of NCCL calls issued together by GroupEnd.
func GroupStart() error {
	if err := ensure("ncclGroupStart"); err != nil {
		return err
	}
	return check("ncclGroupStart", C.weft_ncclGroupStart(), 0)
}

// GroupEnd issues the calls since GroupStart.
func GroupEnd() error {
	if err := ensure("ncclGroupEnd"); err != nil {
		return err
	}
	return check("ncclGroupEnd", C.weft_ncclGroupEnd(), 0)
}
