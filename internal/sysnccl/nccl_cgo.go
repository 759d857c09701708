//go:build cgo

package sysnccl

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "weft_nccl.h"
*/
import "C"

import (
	"fmt"
	"math"
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

// missing is what nccl.c's wrappers of optional entry points return when
// the library lacks them (WEFT_NCCL_MISSING).
const missing = -1

func check(call string, r C.ncclResult_t, comm uintptr) error {
	if r == 0 {
		return nil
	}
	if r == missing {
		return &MissingError{Call: call, Library: Library()}
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

// Has reports whether the loaded NCCL exports the optional entry point
// name: ncclAlltoAll, ncclCommInitRankConfig, ncclRedOpCreatePreMulSum,
// ncclRedOpDestroy or ncclGetLastError. It is false when NCCL is not
// loaded (call Load first) and for any other name.
func Has(name string) bool {
	if Load() != nil {
		return false
	}
	p := C.CString(name)
	defer C.free(unsafe.Pointer(p))
	return C.weft_nccl_has(p) != 0
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
// the calling thread within the same call; ctx 0 uses the thread's current
// context (as a C caller of ncclCommInitRank does). Between GroupStart and
// GroupEnd one thread may initialise several ranks, one per GPU.
func CommInitRank(ctx uintptr, nranks int, id UniqueID, rank int) (*Comm, error) {
	return commInit("ncclCommInitRank", ctx, nranks, id, rank, nil)
}

// CommInitRankConfig is CommInitRank with the attributes of cfg. With
// cfg.NonBlocking the call may return before the communicator is ready:
// AsyncError then reports ncclInProgress (see IsInProgress) until it is.
// Returns an error wrapping hal.ErrNotSupported when NCCL lacks
// ncclCommInitRankConfig (before 2.14).
func CommInitRankConfig(ctx uintptr, nranks int, id UniqueID, rank int, cfg Config) (*Comm, error) {
	return commInit("ncclCommInitRankConfig", ctx, nranks, id, rank, &cfg)
}

// undef is NCCL_CONFIG_UNDEF_INT: the attribute keeps NCCL's default.
const undef = math.MinInt32

func orUndef(v int) C.int {
	if v == 0 {
		return undef
	}
	return C.int(v)
}

func commInit(call string, ctx uintptr, nranks int, id UniqueID, rank int, cfg *Config) (*Comm, error) {
	if err := ensure(call); err != nil {
		return nil, err
	}
	setCurrent := uintptr(0)
	if ctx != 0 {
		if err := cuda.Load(); err != nil {
			return nil, fmt.Errorf("%s: %w", call, err)
		}
		setCurrent = cuda.SetCurrentProc()
	}
	var h C.uintptr_t
	var cu C.int
	var r C.ncclResult_t
	if cfg == nil {
		r = C.weft_ncclCommInitRank(C.uintptr_t(setCurrent), C.uintptr_t(ctx), &h, C.int(nranks),
			unsafe.Pointer(&id[0]), C.int(rank), &cu)
	} else {
		c := (*C.weft_ncclConfig)(C.calloc(1, C.sizeof_weft_ncclConfig))
		defer C.free(unsafe.Pointer(c))
		c.size = C.sizeof_weft_ncclConfig
		c.magic = 0xcafebeef // NCCL_API_MAGIC
		c.version = 21800    // NCCL_VERSION(2,18,0): the layout of weft_ncclConfig
		c.blocking = undef
		if cfg.NonBlocking {
			c.blocking = 0
		}
		c.cgaClusterSize, c.minCTAs, c.maxCTAs = orUndef(cfg.CGAClusterSize), orUndef(cfg.MinCTAs), orUndef(cfg.MaxCTAs)
		c.splitShare = undef
		if cfg.SplitShare {
			c.splitShare = 1
		}
		if cfg.NetName != "" {
			c.netName = C.CString(cfg.NetName)
			defer C.free(unsafe.Pointer(c.netName))
		}
		r = C.weft_ncclCommInitRankConfig(C.uintptr_t(setCurrent), C.uintptr_t(ctx), &h, C.int(nranks),
			unsafe.Pointer(&id[0]), C.int(rank), c, &cu)
	}
	if cu != 0 {
		return nil, fmt.Errorf("%s rank %d of %d: %w", call, rank, nranks, cuda.ResultError("cuCtxSetCurrent", cuda.Result(cu)))
	}
	// A non-blocking init returns ncclInProgress with a usable handle.
	if err := check(call, r, uintptr(h)); err != nil && !(r == C.ncclResult_t(InProgress) && h != 0) {
		return nil, fmt.Errorf("rank %d of %d: %w", rank, nranks, err)
	}
	return &Comm{h: uintptr(h), ctx: ctx, rank: rank, nranks: nranks}, nil
}

// Rank and Size are the communicator's rank and number of ranks.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.nranks }

func (c *Comm) ch() C.uintptr_t { return C.uintptr_t(c.h) }

// Handle is the ncclComm_t, for C code that calls NCCL itself.
func (c *Comm) Handle() uintptr { return c.h }

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

// Reduce reduces count elements of send across ranks into recv of rank
// root (recv is not used on other ranks). In place when send == recv.
func (c *Comm) Reduce(send, recv uint64, count int, dt DataType, op RedOp, root int, stream uintptr) error {
	return check("ncclReduce", C.weft_ncclReduce(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
		C.int(dt), C.int(op), C.int(root), c.ch(), C.uintptr_t(stream)), c.h)
}

// AlltoAll sends block j (count elements at send + j×count×size) to rank j
// and receives rank i's block into recv + i×count×size; both buffers hold
// count × Size elements and must not overlap. It calls ncclAlltoAll where
// NCCL exports it (2.28 and later) and otherwise issues one group of a
// Send and a Recv per peer, as nccl-tests does. The group form may itself
// be called between GroupStart and GroupEnd (NCCL groups nest).
func (c *Comm) AlltoAll(send, recv uint64, count int, dt DataType, stream uintptr) error {
	if Has("ncclAlltoAll") {
		return check("ncclAlltoAll", C.weft_ncclAlltoAll(C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
			C.int(dt), c.ch(), C.uintptr_t(stream)), c.h)
	}
	if dt.Size() == 0 {
		return &Error{Call: "ncclAlltoAll (grouped send/recv)", Code: InvalidArgument, Text: fmt.Sprintf("data type %d", dt)}
	}
	return check("ncclAlltoAll (grouped send/recv)", C.weft_ncclAlltoAllGrouped(C.uintptr_t(send), C.uintptr_t(recv),
		C.size_t(count), C.int(dt), C.size_t(dt.Size()), C.int(c.nranks), c.ch(), C.uintptr_t(stream)), c.h)
}

// RedOpCreatePreMulSum makes a PreMulSum operator of the communicator:
// every contribution is multiplied by a scalar of type dt before the sum.
// With ScalarHostImmediate, scalar is the element's bits (little-endian,
// in the low bytes: math.Float32bits for float, a half's 16 bits for
// half); with ScalarDevice, scalar is the device address of the element.
// Free the operator with RedOpDestroy. Returns an error wrapping
// hal.ErrNotSupported when NCCL lacks PreMulSum (before 2.11).
func (c *Comm) RedOpCreatePreMulSum(scalar uint64, dt DataType, residence ScalarResidence) (RedOp, error) {
	var op C.int
	err := check("ncclRedOpCreatePreMulSum", C.weft_ncclRedOpCreatePreMulSum(&op, C.uintptr_t(scalar), C.int(dt),
		C.int(residence), c.ch()), c.h)
	return RedOp(op), err
}

// RedOpDestroy frees an operator made by RedOpCreatePreMulSum.
func (c *Comm) RedOpDestroy(op RedOp) error {
	return check("ncclRedOpDestroy", C.weft_ncclRedOpDestroy(C.int(op), c.ch()), c.h)
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
