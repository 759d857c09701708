//go:build cgo

package main

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "abi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// realError is a failed call of the real NCCL; it keeps NCCL's code.
type realError struct {
	call string
	code result
	text string
}

func (e *realError) Error() string {
	s := fmt.Sprintf("NCCL %s: %s", e.call, errorString(e.code))
	if e.text != "" {
		s += ": " + e.text
	}
	return s
}

func realCheck(call string, r C.ncclResult_t, comm uintptr) error {
	if r == 0 {
		return nil
	}
	e := &realError{call: call, code: result(r)}
	if p := C.weft_real_last_error(C.uintptr_t(comm)); p != nil {
		e.text = C.GoString(p)
	}
	return e
}

// realCandidates are the libraries tried for the real NCCL: WEFT_NCCL_LIB
// alone when set, else libnccl.so.2 on the loader's path and the usual
// install locations.
func realCandidates() []string {
	if p := env.String("WEFT_NCCL_LIB"); p != "" {
		return []string{p}
	}
	return []string{"libnccl.so.2",
		"/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
		"/usr/lib64/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/nccl/lib/libnccl.so.2"}
}

var real struct {
	once sync.Once
	err  error
	path string
	ver  int
}

// loadReal opens the real NCCL once. The error wraps hal.ErrNotSupported.
// realSeen: a real NCCL was found mapped into the process (realMapped).
var realSeen atomic.Bool

// realMapped reports whether NVIDIA's NCCL (a candidate of
// realCandidates that is not weft itself) is mapped into the process —
// loaded by the program, as PyTorch loads it, or by weft for forwarding —
// and loadable for forwarding. It does not load one. Once true it stays
// true (libraries are not unloaded from under a running job).
func realMapped() bool {
	if realSeen.Load() {
		return true
	}
	for _, cand := range realCandidates() {
		p := C.CString(cand)
		mapped := C.weft_real_mapped(p) != 0
		C.free(unsafe.Pointer(p))
		if mapped && loadReal() == nil {
			realSeen.Store(true)
			return true
		}
	}
	return false
}

func loadReal() error {
	real.once.Do(func() {
		var why []string
		for _, cand := range realCandidates() {
			p := C.CString(cand)
			rc := C.weft_real_load(p)
			C.free(unsafe.Pointer(p))
			if rc == 0 {
				real.path = C.GoString(C.weft_real_path())
				real.ver = int(C.weft_real_version())
				return
			}
			why = append(why, C.GoString(C.weft_real_error()))
		}
		real.err = fmt.Errorf("no NVIDIA NCCL to forward to (set WEFT_NCCL_LIB): %s: %w", strings.Join(why, "; "), hal.ErrNotSupported)
	})
	return real.err
}

func realDescription() string {
	return fmt.Sprintf("%s (NCCL %d)", filepath.Base(real.path), real.ver)
}

func realGetUniqueID() ([uniqueIDBytes]byte, error) {
	var id [uniqueIDBytes]byte
	err := realCheck("ncclGetUniqueId", C.weft_real_get_unique_id(unsafe.Pointer(&id[0])), 0)
	return id, err
}

func realInit(ctx uintptr, nranks int, id [uniqueIDBytes]byte, rank int) (uintptr, error) {
	var h C.uintptr_t
	err := realCheck("ncclCommInitRankConfig", C.weft_real_init(C.uintptr_t(ctx), &h, C.int(nranks), unsafe.Pointer(&id[0]), C.int(rank), 1), 0)
	return uintptr(h), err
}

func realDestroy(ctx, comm uintptr) error {
	return realCheck("ncclCommDestroy", C.weft_real_destroy(C.uintptr_t(ctx), C.uintptr_t(comm)), 0)
}

func realAbort(ctx, comm uintptr) error {
	return realCheck("ncclCommAbort", C.weft_real_abort(C.uintptr_t(ctx), C.uintptr_t(comm)), 0)
}

// realAsyncError returns the communicator's asynchronous error.
func realAsyncError(comm uintptr) error {
	var async C.ncclResult_t
	if err := realCheck("ncclCommGetAsyncError", C.weft_real_async_error(C.uintptr_t(comm), &async), comm); err != nil {
		return err
	}
	return realCheck("ncclCommGetAsyncError (asynchronous error)", async, comm)
}

func realPreMulSum(ctx uintptr, scalar uint64, scalarPtr uintptr, dtype int32, residence int32, comm uintptr) (int32, error) {
	var op C.int
	err := realCheck("ncclRedOpCreatePreMulSum", C.weft_real_premulsum(C.uintptr_t(ctx), &op, C.uint64_t(scalar), C.uintptr_t(scalarPtr), C.int(dtype), C.int(residence), C.uintptr_t(comm)), comm)
	return int32(op), err
}

func realOpDestroy(ctx uintptr, op int32, comm uintptr) error {
	return realCheck("ncclRedOpDestroy", C.weft_real_op_destroy(C.uintptr_t(ctx), C.int(op), C.uintptr_t(comm)), comm)
}

// realKind is the kind argument of weft_real_coll.
func realKind(k kind) (C.int, bool) {
	switch k {
	case kAllReduce:
		return 0, true
	case kAllGather:
		return 1, true
	case kReduceScatter:
		return 2, true
	case kBroadcast:
		return 3, true
	case kReduce:
		return 4, true
	case kAllToAll:
		return 5, true
	}
	return 0, false
}

func realColl(ctx uintptr, k kind, send, recv uintptr, count uint64, dtype, op int32, root int, comm, stream uintptr) error {
	rk, ok := realKind(k)
	if !ok {
		return fmt.Errorf("%v cannot be forwarded as one NCCL call: %w", k, hal.ErrInternal)
	}
	return realCheck("nccl"+k.String(), C.weft_real_coll(C.uintptr_t(ctx), rk, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(count),
		C.int(dtype), C.int(op), C.int(root), C.uintptr_t(comm), C.uintptr_t(stream)), comm)
}

// p2pEntry is one send or receive of bytes bytes.
type p2pEntry struct {
	peer  int
	send  bool
	buf   uintptr
	bytes int64
}

func realP2P(ctx uintptr, ops []p2pEntry, comm, stream uintptr) error {
	if len(ops) == 0 {
		return nil
	}
	n := len(ops)
	// C memory: the arrays are read by C only during the call, but keeping
	// them out of Go memory keeps the cgo pointer rules trivially met.
	mem := C.malloc(C.size_t(n * (2*C.sizeof_int + C.sizeof_uintptr_t + C.sizeof_size_t)))
	defer C.free(mem)
	peers := unsafe.Slice((*C.int)(mem), n)
	sends := unsafe.Slice((*C.int)(unsafe.Add(mem, n*C.sizeof_int)), n)
	bufs := unsafe.Slice((*C.uintptr_t)(unsafe.Add(mem, 2*n*C.sizeof_int)), n)
	sizes := unsafe.Slice((*C.size_t)(unsafe.Add(mem, 2*n*C.sizeof_int+n*C.sizeof_uintptr_t)), n)
	for i, o := range ops {
		peers[i] = C.int(o.peer)
		if o.send {
			sends[i] = 1
		} else {
			sends[i] = 0
		}
		bufs[i] = C.uintptr_t(o.buf)
		sizes[i] = C.size_t(o.bytes)
	}
	return realCheck("ncclSend/ncclRecv group", C.weft_real_p2p(C.uintptr_t(ctx), C.int(n), &peers[0], &sends[0], &bufs[0], &sizes[0],
		C.uintptr_t(comm), C.uintptr_t(stream)), comm)
}

var _ = errors.New
