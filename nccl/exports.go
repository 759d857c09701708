//go:build cgo

package main

/*
#include <stdlib.h>
#include <string.h>
#include "abi.h"

static inline ncclComm_t weft_comm_of(uintptr_t h) { return (ncclComm_t)h; }
static inline void* weft_ptr_of(uintptr_t p) { return (void*)p; }
static inline ncclWindow_t weft_window_of(uintptr_t h) { return (ncclWindow_t)h; }
*/
import "C"

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"sync"
	"unsafe"
)

// guard turns a panic into ncclInternalError with the panic and its stack
// in the last error: no Go panic may unwind into C.
func guard(fn string, rc *C.ncclResult_t) {
	if p := recover(); p != nil {
		setLastError(fmt.Sprintf("%s: internal error (panic in weft): %v\n%s", fn, p, debug.Stack()))
		*rc = C.ncclResult_t(ncclInternalError)
	}
}

func res(r result) C.ncclResult_t { return C.ncclResult_t(r) }

func addr(p unsafe.Pointer) uintptr { return uintptr(p) }

func commOf(c C.ncclComm_t) uintptr { return uintptr(unsafe.Pointer(c)) }

func streamOf(s C.cudaStream_t) uintptr { return uintptr(unsafe.Pointer(s)) }

// cStrings are the static C strings ncclGetErrorString returns, and the
// buffer ncclGetLastError fills (as NCCL's, it is overwritten by later
// failures).
var cStrings struct {
	once    sync.Once
	results [numResults + 1]*C.char
	mu      sync.Mutex
	last    *C.char
}

const lastErrorBytes = 4096

func initCStrings() {
	cStrings.once.Do(func() {
		for i := range numResults + 1 {
			cStrings.results[i] = C.CString(errorString(result(i)))
		}
		cStrings.last = (*C.char)(C.calloc(lastErrorBytes, 1))
	})
}

//export ncclGetVersion
func ncclGetVersion(v *C.int) (rc C.ncclResult_t) {
	defer guard("ncclGetVersion", &rc)
	if v == nil {
		return res(fail(ncclInvalidArgument, "ncclGetVersion: version is NULL (argument version)"))
	}
	*v = version
	return 0
}

//export ncclGetUniqueId
func ncclGetUniqueId(out *C.ncclUniqueId) (rc C.ncclResult_t) {
	defer guard("ncclGetUniqueId", &rc)
	if out == nil {
		return res(fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL (argument uniqueId)"))
	}
	id, err := getUniqueID()
	if err != nil {
		return res(failErr("ncclGetUniqueId", err))
	}
	C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&id[0]), uniqueIDBytes)
	return 0
}

func idBytes(id *C.ncclUniqueId) [uniqueIDBytes]byte {
	var b [uniqueIDBytes]byte
	C.memcpy(unsafe.Pointer(&b[0]), unsafe.Pointer(id), uniqueIDBytes)
	return b
}

// readConfig reads an ncclConfig_t of any NCCL version from 2.14 on:
// blocking is at the same offset in all; minCTAs and maxCTAs from 2.17
// (earlier versions have no such fields, as NCCL reads them), commName,
// each only when the struct is large enough to hold it. minCTAs and
// maxCTAs are checked as NCCL checks them: each NCCL_CONFIG_UNDEF_INT or
// positive, minCTAs ≤ maxCTAs when both are set; else ncclInvalidArgument.
func readConfig(fn string, cfg *C.ncclConfig_t) (config, result) {
	out := config{blocking: true}
	if cfg == nil {
		return out, ncclSuccess
	}
	if cfg.magic != 0xcafebeef || cfg.size < C.size_t(unsafe.Offsetof(cfg.cgaClusterSize)) {
		return out, fail(ncclInvalidArgument, "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (size %d, magic %#x) (argument config)", fn, cfg.size, uint32(cfg.magic))
	}
	if cfg.blocking == 0 {
		out.blocking = false
	}
	if cfg.version >= 21700 && cfg.size >= C.size_t(unsafe.Offsetof(cfg.netName)) {
		const undef = math.MinInt32 // NCCL_CONFIG_UNDEF_INT
		lo, hi := int(cfg.minCTAs), int(cfg.maxCTAs)
		if (lo != undef && lo <= 0) || (hi != undef && hi <= 0) || (lo != undef && hi != undef && lo > hi) {
			show := func(v int) string {
				if v == undef {
					return "undefined"
				}
				return strconv.Itoa(v)
			}
			return out, fail(ncclInvalidArgument, "%s: minCTAs %s, maxCTAs %s: want each positive or NCCL_CONFIG_UNDEF_INT, and minCTAs ≤ maxCTAs (argument config)", fn, show(lo), show(hi))
		}
		if lo != undef {
			out.minCTAs = lo
		}
		if hi != undef {
			out.maxCTAs = hi
		}
	}
	if cfg.size >= C.size_t(unsafe.Offsetof(cfg.collnetEnable)) && cfg.commName != nil {
		out.name = C.GoString(cfg.commName)
	}
	return out, ncclSuccess
}

func setComm(out *C.ncclComm_t, h uintptr) {
	*out = C.weft_comm_of(C.uintptr_t(h))
}

//export ncclCommInitRankConfig
func ncclCommInitRankConfig(out *C.ncclComm_t, nranks C.int, id C.ncclUniqueId, rank C.int, cfg *C.ncclConfig_t) (rc C.ncclResult_t) {
	const fn = "ncclCommInitRankConfig"
	defer guard(fn, &rc)
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: comm is NULL (argument comm)", fn))
	}
	conf, r := readConfig(fn, cfg)
	if r != ncclSuccess {
		return res(r)
	}
	h, r := initRank(fn, int(nranks), idBytes(&id), int(rank), conf)
	setComm(out, h)
	return res(r)
}

//export ncclCommInitRank
func ncclCommInitRank(out *C.ncclComm_t, nranks C.int, id C.ncclUniqueId, rank C.int) (rc C.ncclResult_t) {
	const fn = "ncclCommInitRank"
	defer guard(fn, &rc)
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: comm is NULL (argument comm)", fn))
	}
	h, r := initRank(fn, int(nranks), idBytes(&id), int(rank), config{blocking: true})
	setComm(out, h)
	return res(r)
}

//export ncclCommInitRankScalable
func ncclCommInitRankScalable(out *C.ncclComm_t, nranks C.int, rank C.int, nID C.int, ids *C.ncclUniqueId, cfg *C.ncclConfig_t) (rc C.ncclResult_t) {
	const fn = "ncclCommInitRankScalable"
	defer guard(fn, &rc)
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: newcomm is NULL (argument newcomm)", fn))
	}
	if nID < 1 || ids == nil {
		return res(fail(ncclInvalidArgument, "%s: need at least one unique id (arguments nId, commIds)", fn))
	}
	conf, r := readConfig(fn, cfg)
	if r != ncclSuccess {
		return res(r)
	}
	// weft's bootstrap needs one root: the first id serves every rank.
	h, r := initRank(fn, int(nranks), idBytes(ids), int(rank), conf)
	setComm(out, h)
	return res(r)
}

//export ncclCommInitAll
func ncclCommInitAll(out *C.ncclComm_t, ndev C.int, devlist *C.int) (rc C.ncclResult_t) {
	const fn = "ncclCommInitAll"
	defer guard(fn, &rc)
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: comm is NULL (argument comm)", fn))
	}
	var devs []int
	if devlist != nil && ndev > 0 {
		for _, d := range unsafe.Slice(devlist, int(ndev)) {
			devs = append(devs, int(d))
		}
	}
	hs, r := initAll(fn, int(ndev), devs)
	if r != ncclSuccess {
		return res(r)
	}
	outs := unsafe.Slice(out, int(ndev))
	for i, h := range hs {
		setComm(&outs[i], h)
	}
	return 0
}

//export ncclCommSplit
func ncclCommSplit(parent C.ncclComm_t, color, key C.int, out *C.ncclComm_t, cfg *C.ncclConfig_t) (rc C.ncclResult_t) {
	const fn = "ncclCommSplit"
	defer guard(fn, &rc)
	c, r := lookup(fn, commOf(parent))
	if r != ncclSuccess {
		return res(r)
	}
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: newcomm is NULL (argument newcomm)", fn))
	}
	conf := config{blocking: c.blocking, name: c.name, minCTAs: c.minCTAs, maxCTAs: c.maxCTAs}
	if cfg != nil {
		if conf, r = readConfig(fn, cfg); r != ncclSuccess {
			return res(r)
		}
	}
	h, r := split(fn, c, int(color), int(key), conf)
	setComm(out, h)
	return res(r)
}

//export ncclCommShrink
func ncclCommShrink(parent C.ncclComm_t, exclude *C.int, n C.int, out *C.ncclComm_t, cfg *C.ncclConfig_t, flags C.int) (rc C.ncclResult_t) {
	const fn = "ncclCommShrink"
	defer guard(fn, &rc)
	if _, r := lookup(fn, commOf(parent)); r != ncclSuccess {
		return res(r)
	}
	return res(fail(ncclInvalidUsage, "%s: weft does not implement ncclCommShrink; use ncclCommSplit", fn))
}

//export ncclCommFinalize
func ncclCommFinalize(h C.ncclComm_t) (rc C.ncclResult_t) {
	const fn = "ncclCommFinalize"
	defer guard(fn, &rc)
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	if err := c.usable(); err != nil {
		return res(failErr(fn, err))
	}
	return res(failErr(fn, c.syncStreams()))
}

//export ncclCommDestroy
func ncclCommDestroy(h C.ncclComm_t) (rc C.ncclResult_t) {
	const fn = "ncclCommDestroy"
	defer guard(fn, &rc)
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	forgetComm(c)
	return res(failErr(fn, c.destroy()))
}

//export ncclCommAbort
func ncclCommAbort(h C.ncclComm_t) (rc C.ncclResult_t) {
	const fn = "ncclCommAbort"
	defer guard(fn, &rc)
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	forgetComm(c)
	c.abort()
	return 0
}

//export ncclCommGetAsyncError
func ncclCommGetAsyncError(h C.ncclComm_t, out *C.ncclResult_t) (rc C.ncclResult_t) {
	const fn = "ncclCommGetAsyncError"
	defer guard(fn, &rc)
	if foreignComm(commOf(h)) {
		return C.weft_real_async_error(C.uintptr_t(commOf(h)), out)
	}
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: asyncError is NULL (argument asyncError)", fn))
	}
	code, err := c.asyncError()
	if err != nil {
		setLastError(fn + ": " + err.Error())
	}
	*out = res(code)
	return 0
}

func commInt(fn string, h C.ncclComm_t, out *C.int, arg string, get func(c *comm) int) C.ncclResult_t {
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	if out == nil {
		return res(fail(ncclInvalidArgument, "%s: %s is NULL (argument %s)", fn, arg, arg))
	}
	*out = C.int(get(c))
	return 0
}

//export ncclCommCount
func ncclCommCount(h C.ncclComm_t, count *C.int) (rc C.ncclResult_t) {
	defer guard("ncclCommCount", &rc)
	return commInt("ncclCommCount", h, count, "count", func(c *comm) int { return c.size })
}

//export ncclCommCuDevice
func ncclCommCuDevice(h C.ncclComm_t, dev *C.int) (rc C.ncclResult_t) {
	defer guard("ncclCommCuDevice", &rc)
	return commInt("ncclCommCuDevice", h, dev, "device", func(c *comm) int { return c.ordinal })
}

//export ncclCommUserRank
func ncclCommUserRank(h C.ncclComm_t, rank *C.int) (rc C.ncclResult_t) {
	defer guard("ncclCommUserRank", &rc)
	return commInt("ncclCommUserRank", h, rank, "rank", func(c *comm) int { return c.rank })
}

//export ncclGetErrorString
func ncclGetErrorString(r C.ncclResult_t) (s *C.char) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	initCStrings()
	if r < 0 || r >= numResults {
		return cStrings.results[numResults]
	}
	return cStrings.results[r]
}

//export ncclGetLastError
func ncclGetLastError(h C.ncclComm_t) (s *C.char) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	initCStrings()
	text := getLastError()
	if len(text) >= lastErrorBytes {
		text = text[:lastErrorBytes-1]
	}
	cStrings.mu.Lock()
	defer cStrings.mu.Unlock()
	buf := unsafe.Slice((*byte)(unsafe.Pointer(cStrings.last)), lastErrorBytes)
	n := copy(buf, text)
	buf[n] = 0
	return cStrings.last
}

//export ncclResetDebugInit
func ncclResetDebugInit() {}

//export ncclMemAlloc
func ncclMemAlloc(ptr *unsafe.Pointer, size C.size_t) (rc C.ncclResult_t) {
	const fn = "ncclMemAlloc"
	defer guard(fn, &rc)
	if ptr == nil {
		return res(fail(ncclInvalidArgument, "%s: ptr is NULL (argument ptr)", fn))
	}
	if size == 0 || uint64(size) > 1<<62 {
		return res(fail(ncclInvalidArgument, "%s: size %d (argument size)", fn, uint64(size)))
	}
	p, err := devices.alloc(int64(size))
	if err != nil {
		return res(failErr(fn, err))
	}
	*ptr = C.weft_ptr_of(C.uintptr_t(p))
	return 0
}

//export ncclMemFree
func ncclMemFree(ptr unsafe.Pointer) (rc C.ncclResult_t) {
	const fn = "ncclMemFree"
	defer guard(fn, &rc)
	if ptr == nil {
		return 0
	}
	return res(failErr(fn, devices.free(addr(ptr))))
}

//export ncclCommRegister
func ncclCommRegister(h C.ncclComm_t, buff unsafe.Pointer, size C.size_t, handle *unsafe.Pointer) (rc C.ncclResult_t) {
	const fn = "ncclCommRegister"
	defer guard(fn, &rc)
	if foreignComm(commOf(h)) {
		return C.weft_real_register(C.uintptr_t(commOf(h)), buff, size, handle)
	}
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	if handle == nil {
		return res(fail(ncclInvalidArgument, "%s: handle is NULL (argument handle)", fn))
	}
	if uint64(size) > 1<<62 {
		return res(fail(ncclInvalidArgument, "%s: size %d (argument size)", fn, uint64(size)))
	}
	// Collective in weft: the ncclMemAlloc buffer holding the range is
	// mapped on every peer, for zero-copy receives (register.go).
	rh, err := regs.register(c, addr(buff), int64(size))
	if err != nil {
		return res(failErr(fn, err))
	}
	*handle = C.weft_ptr_of(C.uintptr_t(rh))
	return 0
}

//export ncclCommDeregister
func ncclCommDeregister(h C.ncclComm_t, handle unsafe.Pointer) (rc C.ncclResult_t) {
	const fn = "ncclCommDeregister"
	defer guard(fn, &rc)
	if foreignComm(commOf(h)) {
		return C.weft_real_deregister(C.uintptr_t(commOf(h)), handle)
	}
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	return res(failErr(fn, regs.deregister(c, addr(handle))))
}

//export ncclCommWindowRegister
func ncclCommWindowRegister(h C.ncclComm_t, buff unsafe.Pointer, size C.size_t, win *C.ncclWindow_t, flags C.int) (rc C.ncclResult_t) {
	const fn = "ncclCommWindowRegister"
	defer guard(fn, &rc)
	if foreignComm(commOf(h)) {
		return C.weft_real_window_register(C.uintptr_t(commOf(h)), buff, size, (*unsafe.Pointer)(unsafe.Pointer(win)), flags)
	}
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	if win == nil {
		return res(fail(ncclInvalidArgument, "%s: win is NULL (argument win)", fn))
	}
	if buff == nil && size > 0 {
		return res(fail(ncclInvalidArgument, "%s: buff is NULL (argument buff)", fn))
	}
	if uint64(size) > 1<<62 {
		return res(fail(ncclInvalidArgument, "%s: size %d (argument size)", fn, uint64(size)))
	}
	// Collective, as in NCCL: the window is mapped on every rank
	// (window.go).
	wh, err := windows.register(c, addr(buff), int64(size), int32(flags))
	if err != nil {
		return res(failErr(fn, err))
	}
	*win = C.weft_window_of(C.uintptr_t(wh))
	return 0
}

//export ncclCommWindowDeregister
func ncclCommWindowDeregister(h C.ncclComm_t, win C.ncclWindow_t) (rc C.ncclResult_t) {
	const fn = "ncclCommWindowDeregister"
	defer guard(fn, &rc)
	if foreignComm(commOf(h)) {
		return C.weft_real_window_deregister(C.uintptr_t(commOf(h)), unsafe.Pointer(win))
	}
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	return res(failErr(fn, windows.deregister(c, uintptr(unsafe.Pointer(win)))))
}

//export ncclRedOpCreatePreMulSum
func ncclRedOpCreatePreMulSum(op *C.ncclRedOp_t, scalar unsafe.Pointer, dtype C.ncclDataType_t, residence C.ncclScalarResidence_t, h C.ncclComm_t) (rc C.ncclResult_t) {
	const fn = "ncclRedOpCreatePreMulSum"
	defer guard(fn, &rc)
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	if op == nil {
		return res(fail(ncclInvalidArgument, "%s: op is NULL (argument op)", fn))
	}
	var host []byte
	if residence == 1 {
		if scalar == nil {
			return res(fail(ncclInvalidArgument, "%s: scalar is NULL (argument scalar)", fn))
		}
		size := 8
		if t := int(dtype); t >= 0 && t < 12 {
			size = dtypeSize(int32(dtype))
		}
		host = C.GoBytes(scalar, C.int(size))
	}
	v, r := createPreMulSum(fn, c, int32(dtype), int32(residence), host, addr(scalar))
	if r == ncclSuccess {
		*op = C.ncclRedOp_t(v)
	}
	return res(r)
}

//export ncclRedOpDestroy
func ncclRedOpDestroy(op C.ncclRedOp_t, h C.ncclComm_t) (rc C.ncclResult_t) {
	const fn = "ncclRedOpDestroy"
	defer guard(fn, &rc)
	c, r := lookup(fn, commOf(h))
	if r != ncclSuccess {
		return res(r)
	}
	return res(destroyOp(fn, c, int32(op)))
}

func coll(a collArgs) C.ncclResult_t { return res(collective(a)) }

//export ncclAllReduce
func ncclAllReduce(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, op C.ncclRedOp_t, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclAllReduce", &rc)
	return coll(collArgs{fn: "ncclAllReduce", kind: kAllReduce, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), op: int32(op), comm: commOf(h), stream: streamOf(s)})
}

//export ncclAllGather
func ncclAllGather(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclAllGather", &rc)
	return coll(collArgs{fn: "ncclAllGather", kind: kAllGather, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), comm: commOf(h), stream: streamOf(s)})
}

//export ncclReduceScatter
func ncclReduceScatter(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, op C.ncclRedOp_t, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclReduceScatter", &rc)
	return coll(collArgs{fn: "ncclReduceScatter", kind: kReduceScatter, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), op: int32(op), comm: commOf(h), stream: streamOf(s)})
}

//export ncclBroadcast
func ncclBroadcast(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, root C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclBroadcast", &rc)
	return coll(collArgs{fn: "ncclBroadcast", kind: kBroadcast, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), root: int(root), comm: commOf(h), stream: streamOf(s)})
}

//export ncclBcast
func ncclBcast(buff unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, root C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclBcast", &rc)
	return coll(collArgs{fn: "ncclBcast", kind: kBroadcast, send: addr(buff), recv: addr(buff), count: uint64(count), dtype: int32(dt), root: int(root), comm: commOf(h), stream: streamOf(s)})
}

//export ncclReduce
func ncclReduce(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, op C.ncclRedOp_t, root C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclReduce", &rc)
	return coll(collArgs{fn: "ncclReduce", kind: kReduce, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), op: int32(op), root: int(root), comm: commOf(h), stream: streamOf(s)})
}

//export ncclAlltoAll
func ncclAlltoAll(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclAlltoAll", &rc)
	return coll(collArgs{fn: "ncclAlltoAll", kind: kAllToAll, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), comm: commOf(h), stream: streamOf(s)})
}

//export ncclGather
func ncclGather(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, root C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclGather", &rc)
	return coll(collArgs{fn: "ncclGather", kind: kGather, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), root: int(root), comm: commOf(h), stream: streamOf(s)})
}

//export ncclScatter
func ncclScatter(send, recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, root C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclScatter", &rc)
	return coll(collArgs{fn: "ncclScatter", kind: kScatter, send: addr(send), recv: addr(recv), count: uint64(count), dtype: int32(dt), root: int(root), comm: commOf(h), stream: streamOf(s)})
}

//export ncclSend
func ncclSend(send unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, peer C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclSend", &rc)
	return coll(collArgs{fn: "ncclSend", kind: kSend, send: addr(send), count: uint64(count), dtype: int32(dt), root: int(peer), comm: commOf(h), stream: streamOf(s)})
}

//export ncclRecv
func ncclRecv(recv unsafe.Pointer, count C.size_t, dt C.ncclDataType_t, peer C.int, h C.ncclComm_t, s C.cudaStream_t) (rc C.ncclResult_t) {
	defer guard("ncclRecv", &rc)
	return coll(collArgs{fn: "ncclRecv", kind: kRecv, recv: addr(recv), count: uint64(count), dtype: int32(dt), root: int(peer), comm: commOf(h), stream: streamOf(s)})
}

//export ncclGroupStart
func ncclGroupStart() (rc C.ncclResult_t) {
	defer guard("ncclGroupStart", &rc)
	return res(groupStart())
}

//export ncclGroupEnd
func ncclGroupEnd() (rc C.ncclResult_t) {
	defer guard("ncclGroupEnd", &rc)
	return res(groupEnd("ncclGroupEnd", false))
}

//export ncclGroupSimulateEnd
func ncclGroupSimulateEnd(info *C.ncclSimInfo_t) (rc C.ncclResult_t) {
	defer guard("ncclGroupSimulateEnd", &rc)
	r := groupEnd("ncclGroupSimulateEnd", true)
	if info != nil && info.size >= C.size_t(unsafe.Sizeof(*info)) {
		info.estimatedTime = 0 // weft has no cost model to report
	}
	return res(r)
}
