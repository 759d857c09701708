//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "driver.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weftccl/weft/internal/env"
)

var (
	loadOnce sync.Once
	loadErr  error
	isLoaded atomic.Bool // Load succeeded; guards calls on Device values
)

// Load opens the CUDA driver library, resolves every entry point weft uses
// and calls cuInit. It is safe to call many times; the first call's result
// is kept. Without a driver the error is a *LoadError wrapping
// errkind.ErrNotSupported: "libcuda.so.1: cannot open shared object file: No
// such file or directory: no NVIDIA driver".
func Load() error {
	loadOnce.Do(func() {
		loadErr = load(DriverLibrary())
		isLoaded.Store(loadErr == nil)
	})
	return loadErr
}

func load(lib string) error {
	path := C.CString(lib)
	defer C.free(unsafe.Pointer(path))
	var cu C.CUresult
	switch rc := C.weft_cuda_load(path, &cu); rc {
	case C.WEFT_LOAD_OK:
	case C.WEFT_LOAD_DLOPEN:
		return &LoadError{Library: lib, Detail: C.GoString(C.weft_cuda_load_error()), Hint: "no NVIDIA driver"}
	case C.WEFT_LOAD_NO_GPA:
		return &LoadError{Library: lib, Detail: C.GoString(C.weft_cuda_load_error()), Hint: "NVIDIA driver older than CUDA 12; weft needs a CUDA 12 or newer driver"}
	default:
		return &LoadError{Library: lib, Detail: C.GoString(C.weft_cuda_load_error()), Hint: "NVIDIA driver lacks an entry point weft needs"}
	}
	if err := newError("cuInit", Result(C.weft_cuInit())); err != nil {
		hint := "CUDA driver failed to initialise"
		switch Result(err.(*Error).Code) {
		case ErrorNoDevice:
			hint = "no CUDA devices"
		case ErrorSystemDriverMismatch:
			hint = "the kernel module and libcuda versions differ (reload the driver or reboot)"
		}
		return &LoadError{Library: lib, Detail: lib, Hint: hint, Err: err}
	}
	return nil
}

func loaded() bool { return isLoaded.Load() }

func driverErrorName(r Result) string {
	if !loaded() {
		return ""
	}
	if s := C.weft_cuGetErrorName(C.CUresult(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

func driverErrorString(r Result) string {
	if !loaded() {
		return ""
	}
	if s := C.weft_cuGetErrorString(C.CUresult(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

// ensure loads the driver if needed; Device methods call it because a
// Device value can be made without the driver.
func ensure(call string) error {
	if isLoaded.Load() {
		return nil
	}
	if err := Load(); err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	return nil
}

// DriverVersion returns the CUDA version of the driver (13000 for 13.0).
func DriverVersion() (int, error) {
	if err := ensure("cuDriverGetVersion"); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), newError("cuDriverGetVersion", Result(C.weft_cuDriverGetVersion(&v)))
}

// DeviceCount returns the number of visible CUDA devices.
func DeviceCount() (int, error) {
	if err := ensure("cuDeviceGetCount"); err != nil {
		return 0, err
	}
	var n C.int
	return int(n), newError("cuDeviceGetCount", Result(C.weft_cuDeviceGetCount(&n)))
}

// DeviceGet returns the device of a CUDA ordinal.
func DeviceGet(ordinal int) (Device, error) {
	if err := ensure("cuDeviceGet"); err != nil {
		return 0, err
	}
	var d C.CUdevice
	if err := newError("cuDeviceGet", Result(C.weft_cuDeviceGet(&d, C.int(ordinal)))); err != nil {
		return 0, fmt.Errorf("CUDA device %d: %w", ordinal, err)
	}
	return Device(d), nil
}

// Name returns the marketing name ("NVIDIA H200").
func (d Device) Name() (string, error) {
	if err := ensure("cuDeviceGetName"); err != nil {
		return "", err
	}
	var buf [256]C.char
	if err := newError("cuDeviceGetName", Result(C.weft_cuDeviceGetName(&buf[0], C.int(len(buf)), C.CUdevice(d)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// Attribute returns a device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	if err := ensure("cuDeviceGetAttribute"); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), newError("cuDeviceGetAttribute", Result(C.weft_cuDeviceGetAttribute(&v, C.int(a), C.CUdevice(d))))
}

// UUID returns the device UUID.
func (d Device) UUID() (UUID, error) {
	var u UUID
	if err := ensure("cuDeviceGetUuid"); err != nil {
		return u, err
	}
	err := newError("cuDeviceGetUuid", Result(C.weft_cuDeviceGetUuid(unsafe.Pointer(&u[0]), C.CUdevice(d))))
	return u, err
}

// PCIBusID returns the PCI address, "0000:18:00.0".
func (d Device) PCIBusID() (string, error) {
	if err := ensure("cuDeviceGetPCIBusId"); err != nil {
		return "", err
	}
	var buf [64]C.char
	if err := newError("cuDeviceGetPCIBusId", Result(C.weft_cuDeviceGetPCIBusId(&buf[0], C.int(len(buf)), C.CUdevice(d)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// TotalMem returns the device memory size in bytes.
func (d Device) TotalMem() (int64, error) {
	if err := ensure("cuDeviceTotalMem"); err != nil {
		return 0, err
	}
	var n C.size_t
	return int64(n), newError("cuDeviceTotalMem", Result(C.weft_cuDeviceTotalMem(&n, C.CUdevice(d))))
}

// CanAccessPeer reports whether d can map memory of peer (cuDeviceCanAccessPeer).
func CanAccessPeer(d, peer Device) (bool, error) {
	if err := ensure("cuDeviceCanAccessPeer"); err != nil {
		return false, err
	}
	var can C.int
	err := newError("cuDeviceCanAccessPeer", Result(C.weft_cuDeviceCanAccessPeer(&can, C.CUdevice(d), C.CUdevice(peer))))
	return can != 0, err
}

// P2PNativeAtomics reports whether the link from d to peer performs
// atomic operations natively (cuDeviceGetP2PAttribute,
// CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED): NVLink does, PCIe
// peer-to-peer does not, which is how weft tells an NVLink peer from a
// PCIe one through the driver alone.
func P2PNativeAtomics(d, peer Device) (bool, error) {
	if err := ensure("cuDeviceGetP2PAttribute"); err != nil {
		return false, err
	}
	const nativeAtomicSupported = 0x03 // CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED (cuda.h)
	var v C.int
	err := newError("cuDeviceGetP2PAttribute", Result(C.weft_cuDeviceGetP2PAttribute(&v, nativeAtomicSupported, C.CUdevice(d), C.CUdevice(peer))))
	return v != 0, err
}

// PrimaryCtxRetain retains the device's primary context; release it with
// PrimaryCtxRelease.
func (d Device) PrimaryCtxRetain() (Context, error) {
	if err := ensure("cuDevicePrimaryCtxRetain"); err != nil {
		return 0, err
	}
	var c C.CUcontext
	if err := newError("cuDevicePrimaryCtxRetain", Result(C.weft_cuDevicePrimaryCtxRetain(&c, C.CUdevice(d)))); err != nil {
		return 0, err
	}
	return Context(uintptr(unsafe.Pointer(c))), nil
}

// PrimaryCtxRelease releases a reference taken by PrimaryCtxRetain.
func (d Device) PrimaryCtxRelease() error {
	if err := ensure("cuDevicePrimaryCtxRelease"); err != nil {
		return err
	}
	return newError("cuDevicePrimaryCtxRelease", Result(C.weft_cuDevicePrimaryCtxRelease(C.CUdevice(d))))
}

// The handle conversions below reinterpret the uintptr in place: the
// handles are driver pointers, never Go memory.

func (c Context) c() C.CUcontext { return *(*C.CUcontext)(unsafe.Pointer(&c)) }

// Synchronize waits for all work of the context (cuCtxSynchronize).
func (c Context) Synchronize() error {
	return newError("cuCtxSynchronize", Result(C.weft_cuCtxSynchronize(c.c())))
}

// EnablePeerAccess lets kernels of c access memory of peer's device. Access
// that is already enabled is not an error.
func (c Context) EnablePeerAccess(peer Context) error {
	r := Result(C.weft_cuCtxEnablePeerAccess(c.c(), peer.c()))
	if r == ErrorPeerAccessAlready {
		return nil
	}
	return newError("cuCtxEnablePeerAccess", r)
}

// MemAlloc allocates bytes of device memory (not zeroed).
func (c Context) MemAlloc(bytes int64) (DevicePtr, error) {
	var p C.CUdeviceptr
	err := newError("cuMemAlloc", Result(C.weft_cuMemAlloc(c.c(), &p, C.size_t(bytes))))
	return DevicePtr(p), err
}

// MemFree frees memory from MemAlloc.
func (c Context) MemFree(p DevicePtr) error {
	return newError("cuMemFree", Result(C.weft_cuMemFree(c.c(), C.CUdeviceptr(p))))
}

// MemGetInfo returns the device memory of c's device that is free and its
// total, in bytes (cuMemGetInfo).
func (c Context) MemGetInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = newError("cuMemGetInfo", Result(C.weft_cuMemGetInfo(c.c(), &f, &t)))
	return int64(f), int64(t), err
}

// MemHostAlloc allocates pinned host memory (cuMemHostAlloc with flags such
// as MemHostAllocDeviceMap|MemHostAllocPortable).
func (c Context) MemHostAlloc(bytes int64, flags uint) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := newError("cuMemHostAlloc", Result(C.weft_cuMemHostAlloc(c.c(), &p, C.size_t(bytes), C.uint(flags))))
	return p, err
}

// MemHostGetDevicePointer returns the device address of mapped host memory.
func (c Context) MemHostGetDevicePointer(p unsafe.Pointer) (DevicePtr, error) {
	var d C.CUdeviceptr
	err := newError("cuMemHostGetDevicePointer", Result(C.weft_cuMemHostGetDevicePointer(c.c(), &d, p)))
	return DevicePtr(d), err
}

// MemFreeHost frees memory from MemHostAlloc.
func (c Context) MemFreeHost(p unsafe.Pointer) error {
	return newError("cuMemFreeHost", Result(C.weft_cuMemFreeHost(c.c(), p)))
}

// MemcpyHtoD copies src to device address dst, synchronously.
func (c Context) MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return newError("cuMemcpyHtoD", Result(C.weft_cuMemcpyHtoD(c.c(), C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))))
}

// MemcpyDtoH copies len(dst) bytes from device address src, synchronously.
func (c Context) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return newError("cuMemcpyDtoH", Result(C.weft_cuMemcpyDtoH(c.c(), unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst)))))
}

// MemcpyDtoD copies bytes between device addresses, synchronously.
func (c Context) MemcpyDtoD(dst, src DevicePtr, bytes int64) error {
	return newError("cuMemcpyDtoD", Result(C.weft_cuMemcpyDtoD(c.c(), C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes))))
}

// MemHostRegister page-locks host memory that Go did not allocate (an
// mmap of a shared-memory file) and maps it for the device (flags such as
// MemHostRegisterPortable|MemHostRegisterDeviceMap); undo it with
// MemHostUnregister before unmapping.
func (c Context) MemHostRegister(p unsafe.Pointer, bytes int64, flags uint) error {
	return newError("cuMemHostRegister", Result(C.weft_cuMemHostRegister(c.c(), p, C.size_t(bytes), C.uint(flags))))
}

// MemHostUnregister undoes MemHostRegister.
func (c Context) MemHostUnregister(p unsafe.Pointer) error {
	return newError("cuMemHostUnregister", Result(C.weft_cuMemHostUnregister(c.c(), p)))
}

// MemsetD8 sets n bytes at dst to v.
func (c Context) MemsetD8(dst DevicePtr, v byte, n int64) error {
	return newError("cuMemsetD8", Result(C.weft_cuMemsetD8(c.c(), C.CUdeviceptr(dst), C.uchar(v), C.size_t(n))))
}

// MemGetAddressRange returns the base and size of the allocation holding p.
func (c Context) MemGetAddressRange(p DevicePtr) (base DevicePtr, size int64, err error) {
	var b C.CUdeviceptr
	var n C.size_t
	err = newError("cuMemGetAddressRange", Result(C.weft_cuMemGetAddressRange(c.c(), &b, &n, C.CUdeviceptr(p))))
	return DevicePtr(b), int64(n), err
}

// PointerDeviceOrdinal returns the ordinal of the device that owns p
// (cuPointerGetAttribute with CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL).
func (c Context) PointerDeviceOrdinal(p DevicePtr) (int, error) {
	var v C.int
	err := newError("cuPointerGetAttribute", Result(C.weft_cuPointerGetAttribute(c.c(), unsafe.Pointer(&v), C.int(PointerAttrDeviceOrdinal), C.CUdeviceptr(p))))
	return int(v), err
}

// IPCGetMemHandle returns the IPC handle of the allocation holding p (p must
// be the base of a cuMemAlloc allocation).
func (c Context) IPCGetMemHandle(p DevicePtr) (IPCMemHandle, error) {
	var h IPCMemHandle
	err := newError("cuIpcGetMemHandle", Result(C.weft_cuIpcGetMemHandle(c.c(), unsafe.Pointer(&h[0]), C.CUdeviceptr(p))))
	return h, err
}

// IPCOpenMemHandle maps memory that another process exported, with
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS; returns its base address here.
func (c Context) IPCOpenMemHandle(h IPCMemHandle) (DevicePtr, error) {
	var p C.CUdeviceptr
	err := newError("cuIpcOpenMemHandle", Result(C.weft_cuIpcOpenMemHandle(c.c(), &p, unsafe.Pointer(&h[0]), C.uint(IPCMemLazyEnablePeerAccess))))
	return DevicePtr(p), err
}

// IPCCloseMemHandle unmaps memory opened with IPCOpenMemHandle.
func (c Context) IPCCloseMemHandle(p DevicePtr) error {
	return newError("cuIpcCloseMemHandle", Result(C.weft_cuIpcCloseMemHandle(c.c(), C.CUdeviceptr(p))))
}

// StreamCreate creates a stream (flags: StreamNonBlocking).
func (c Context) StreamCreate(flags uint) (Stream, error) {
	var s C.CUstream
	if err := newError("cuStreamCreate", Result(C.weft_cuStreamCreate(c.c(), &s, C.uint(flags)))); err != nil {
		return Stream{}, err
	}
	return Stream{Ctx: c, Handle: uintptr(unsafe.Pointer(s))}, nil
}

func (s Stream) c() C.CUstream { return *(*C.CUstream)(unsafe.Pointer(&s.Handle)) }

// RecordUnlessCapturing records e on s, unless s is capturing a graph:
// work captured does not run, so there is nothing to wait for. It reports
// whether e was recorded. One cgo call.
func (e Event) RecordUnlessCapturing(s Stream) (recorded bool, err error) {
	var r C.int
	err = newError("cuEventRecord", Result(C.weft_record_unless_capturing(e.Ctx.c(), e.c(), s.c(), &r)))
	return r != 0, err
}

// After makes the work queued on s from now on wait for the work queued on
// prev so far (cuEventRecord on prev, cuStreamWaitEvent on s, with an
// event the driver frees once the wait is done), unless either stream is
// capturing a graph. It reports whether it ordered them. One cgo call.
func (s Stream) After(prev Stream) (ordered bool, err error) {
	var r C.int
	err = newError("cuStreamWaitEvent", Result(C.weft_stream_after(s.Ctx.c(), s.c(), prev.c(), 0, &r)))
	return r != 0, err
}

// Join makes the work queued on s from now on wait for the work queued on
// prev so far, when both streams capture a graph or neither does (a wait
// between two capturing streams becomes a dependency of the graph); it
// reports whether it ordered them. One cgo call.
func (s Stream) Join(prev Stream) (ordered bool, err error) {
	var r C.int
	err = newError("cuStreamWaitEvent", Result(C.weft_stream_after(s.Ctx.c(), s.c(), prev.c(), 1, &r)))
	return r != 0, err
}

// WaitUnlessCapturing makes the work queued on s from now on wait for e
// (cuStreamWaitEvent), unless s is capturing a graph; it reports whether
// it waited. One cgo call.
func (s Stream) WaitUnlessCapturing(e Event) (waited bool, err error) {
	var r C.int
	err = newError("cuStreamWaitEvent", Result(C.weft_wait_unless_capturing(s.Ctx.c(), s.c(), e.c(), &r)))
	return r != 0, err
}

// IsCapturing reports whether s is capturing a graph
// (cuStreamIsCapturing). One cgo call.
func (s Stream) IsCapturing() (bool, error) {
	var r C.int
	err := newError("cuStreamIsCapturing", Result(C.weft_stream_is_capturing(s.Ctx.c(), s.c(), &r)))
	return r != 0, err
}

// Query reports whether all work on s is done. A failed kernel is an error.
func (s Stream) Query() (done bool, err error) {
	r := Result(C.weft_cuStreamQuery(s.Ctx.c(), s.c()))
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, newError("cuStreamQuery", r)
}

// Synchronize blocks until all work on s is done (cuStreamSynchronize).
func (s Stream) Synchronize() error {
	return newError("cuStreamSynchronize", Result(C.weft_cuStreamSynchronize(s.Ctx.c(), s.c())))
}

// Destroy destroys s.
func (s Stream) Destroy() error {
	return newError("cuStreamDestroy", Result(C.weft_cuStreamDestroy(s.Ctx.c(), s.c())))
}

// MemcpyAsync queues a copy of bytes from src to dst on s. Both are
// unified addresses (device memory, peer memory mapped by IPC, mapped host
// memory); the driver infers the direction. It is one cgo call.
func (s Stream) MemcpyAsync(dst, src DevicePtr, bytes int64) error {
	return newError("cuMemcpyAsync", Result(C.weft_cuMemcpyAsync(s.Ctx.c(), C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes), s.c())))
}

// MemcpyDtoHAsync queues a copy of bytes from device address src to host
// memory dst on s. dst must stay valid until the copy has run: page-locked
// memory (MemHostAlloc, MemHostRegister) that is not Go's.
func (s Stream) MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int64) error {
	return newError("cuMemcpyDtoHAsync", Result(C.weft_cuMemcpyDtoHAsync(s.Ctx.c(), dst, C.CUdeviceptr(src), C.size_t(bytes), s.c())))
}

// MemcpyHtoDAsync queues a copy of bytes from host memory src to device
// address dst on s; src as for MemcpyDtoHAsync.
func (s Stream) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int64) error {
	return newError("cuMemcpyHtoDAsync", Result(C.weft_cuMemcpyHtoDAsync(s.Ctx.c(), C.CUdeviceptr(dst), src, C.size_t(bytes), s.c())))
}

// WaitEvent makes later work on s wait for e (cuStreamWaitEvent).
func (s Stream) WaitEvent(e Event) error {
	return newError("cuStreamWaitEvent", Result(C.weft_cuStreamWaitEvent(s.Ctx.c(), s.c(), e.c())))
}

// WriteValue64 queues a store of v at the 64-bit word addr on s
// (cuStreamWriteValue64_v2). With flags 0 the store follows a memory
// barrier, so it is ordered after the writes of earlier work on s. The
// device must report AttrCanUse64BitStreamMemOps.
func (s Stream) WriteValue64(addr DevicePtr, v uint64, flags uint) error {
	return newError("cuStreamWriteValue64", Result(C.weft_cuStreamWriteValue64(s.Ctx.c(), s.c(), C.CUdeviceptr(addr), C.cuuint64_t(v), C.uint(flags))))
}

// StreamWaitValueEq is CU_STREAM_WAIT_VALUE_EQ, the flag of WaitValue64
// that waits until the word equals the value.
const StreamWaitValueEq = 0x1

// WaitValue64 queues on s a wait until the 64-bit word at addr satisfies
// flags against v (StreamWaitValueEq: equals it), cuStreamWaitValue64_v2.
// Work queued on s after it runs once it passes; the wait has no timeout.
// The device must report AttrCanUse64BitStreamMemOps.
func (s Stream) WaitValue64(addr DevicePtr, v uint64, flags uint) error {
	return newError("cuStreamWaitValue64", Result(C.weft_cuStreamWaitValue64(s.Ctx.c(), s.c(), C.CUdeviceptr(addr), C.cuuint64_t(v), C.uint(flags))))
}

// Signal64 queues, in one cgo call, WriteValue64(addr0, v0, 0) (skipped
// when addr0 is 0) and then WriteValue64(addr1, v1, 0): the two stores of
// a port-channel signal.
func (s Stream) Signal64(addr0 DevicePtr, v0 uint64, addr1 DevicePtr, v1 uint64) error {
	return newError("cuStreamWriteValue64", Result(C.weft_signal64(s.Ctx.c(), s.c(), C.CUdeviceptr(addr0), C.cuuint64_t(v0), C.CUdeviceptr(addr1), C.cuuint64_t(v1))))
}

// QueueOps queues ops in list order, each on streams[op.Lane], in one cgo
// call (weft_queue_ops): copies by cuMemcpyAsync, waits (equal) by
// cuStreamWaitValue64, writes by cuStreamWriteValue64, kernels by
// cuLaunchKernel; with batch,
// consecutive waits and writes on one lane go in one cuStreamBatchMemOp
// where the driver has it. The streams share ctx. On failure it returns
// the index of the operation whose call failed.
func QueueOps(ctx Context, streams []Stream, ops []StreamOp, batch bool) (failed int, err error) {
	if len(ops) == 0 {
		return -1, nil
	}
	cs := make([]C.CUstream, len(streams))
	for i, s := range streams {
		cs[i] = s.c()
	}
	cops := make([]C.weft_stream_op, len(ops))
	for i, op := range ops {
		if int(op.Lane) >= len(streams) || op.Kind < OpCopy || op.Kind > OpKernel {
			return i, fmt.Errorf("stream operation %d: kind %d on lane %d of %d streams: %w", i, op.Kind, op.Lane, len(streams), errInvalidOp)
		}
		if op.Kind == OpKernel && (op.Func.Handle == 0 || op.Func.Ctx != ctx || op.Grid == 0 || op.Block == 0) {
			return i, fmt.Errorf("stream operation %d: kernel launch without a function of this context or with an empty shape (%d × %d): %w", i, op.Grid, op.Block, errInvalidOp)
		}
		cops[i] = C.weft_stream_op{kind: C.int(op.Kind), lane: C.int(op.Lane), dst: C.ulonglong(op.Dst), src: C.ulonglong(op.Src), bytes: C.longlong(op.Bytes), value: C.ulonglong(op.Value),
			src2: C.ulonglong(op.Src2), fn: unsafe.Pointer(op.Func.c()), grid: C.uint(op.Grid), block: C.uint(op.Block)}
	}
	b := C.int(0)
	if batch {
		b = 1
	}
	var f C.int
	r := Result(C.weft_queue_ops(ctx.c(), &cs[0], &cops[0], C.int(len(cops)), b, &f))
	return int(f), newError("stream operations", r)
}

// BeginCapture starts capturing s into a graph (mode: StreamCaptureMode*).
func (s Stream) BeginCapture(mode int) error {
	return newError("cuStreamBeginCapture", Result(C.weft_cuStreamBeginCapture(s.Ctx.c(), s.c(), C.int(mode))))
}

// EndCapture ends the capture of s and returns the graph.
func (s Stream) EndCapture() (Graph, error) {
	var g C.CUgraph
	if err := newError("cuStreamEndCapture", Result(C.weft_cuStreamEndCapture(s.Ctx.c(), s.c(), &g))); err != nil {
		return Graph{}, err
	}
	return Graph{Ctx: s.Ctx, Handle: uintptr(unsafe.Pointer(g))}, nil
}

func (g Graph) c() C.CUgraph { return *(*C.CUgraph)(unsafe.Pointer(&g.Handle)) }

// Instantiate makes an executable graph (cuGraphInstantiateWithFlags).
func (g Graph) Instantiate(flags uint64) (GraphExec, error) {
	var e C.CUgraphExec
	if err := newError("cuGraphInstantiateWithFlags", Result(C.weft_cuGraphInstantiateWithFlags(g.Ctx.c(), &e, g.c(), C.ulonglong(flags)))); err != nil {
		return GraphExec{}, err
	}
	return GraphExec{Ctx: g.Ctx, Handle: uintptr(unsafe.Pointer(e))}, nil
}

// Destroy destroys g.
func (g Graph) Destroy() error {
	return newError("cuGraphDestroy", Result(C.weft_cuGraphDestroy(g.Ctx.c(), g.c())))
}

func (e GraphExec) c() C.CUgraphExec { return *(*C.CUgraphExec)(unsafe.Pointer(&e.Handle)) }

// Launch enqueues one replay of e on s.
func (e GraphExec) Launch(s Stream) error {
	return newError("cuGraphLaunch", Result(C.weft_cuGraphLaunch(e.Ctx.c(), e.c(), s.c())))
}

// Destroy destroys e.
func (e GraphExec) Destroy() error {
	return newError("cuGraphExecDestroy", Result(C.weft_cuGraphExecDestroy(e.Ctx.c(), e.c())))
}

// EventCreate creates an event (flags: EventDefault for timing events).
func (c Context) EventCreate(flags uint) (Event, error) {
	var e C.CUevent
	if err := newError("cuEventCreate", Result(C.weft_cuEventCreate(c.c(), &e, C.uint(flags)))); err != nil {
		return Event{}, err
	}
	return Event{Ctx: c, Handle: uintptr(unsafe.Pointer(e))}, nil
}

func (e Event) c() C.CUevent { return *(*C.CUevent)(unsafe.Pointer(&e.Handle)) }

// Record places e in s.
func (e Event) Record(s Stream) error {
	return newError("cuEventRecord", Result(C.weft_cuEventRecord(e.Ctx.c(), e.c(), s.c())))
}

// Query reports whether the work before e is done.
func (e Event) Query() (done bool, err error) {
	r := Result(C.weft_cuEventQuery(e.Ctx.c(), e.c()))
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, newError("cuEventQuery", r)
}

// Synchronize blocks until e completes.
func (e Event) Synchronize() error {
	return newError("cuEventSynchronize", Result(C.weft_cuEventSynchronize(e.Ctx.c(), e.c())))
}

// ElapsedMillis returns the time from start to e in milliseconds.
func (e Event) ElapsedMillis(start Event) (float32, error) {
	var ms C.float
	err := newError("cuEventElapsedTime", Result(C.weft_cuEventElapsedTime(e.Ctx.c(), &ms, start.c(), e.c())))
	return float32(ms), err
}

// Destroy destroys e.
func (e Event) Destroy() error {
	return newError("cuEventDestroy", Result(C.weft_cuEventDestroy(e.Ctx.c(), e.c())))
}

var lazyOnce sync.Once

// ModuleLoadData loads a cubin (or PTX) image and every function in it
// (cuModuleEnumerateFunctions and cuFuncLoad, CUDA 12.4+), so that no
// later launch loads code lazily: a lazy load can wait for kernels already
// running, and weft's kernels spin until their peers' kernels run.
func (c Context) ModuleLoadData(image []byte) (Module, error) {
	if len(image) == 0 {
		return Module{}, newError("cuModuleLoadData", ErrorInvalidValue)
	}
	// The driver reads the image during the call only; a C copy keeps the
	// Go buffer free of any pinning concern.
	img := C.CBytes(image)
	defer C.free(img)
	var m C.CUmodule
	var eager C.int
	if err := newError("cuModuleLoadData", Result(C.weft_cuModuleLoadData(c.c(), &m, img, &eager))); err != nil {
		return Module{}, err
	}
	if eager == 0 {
		lazyOnce.Do(func() {
			env.Logger("HAL").Warn("driver before CUDA 12.4: kernels load lazily at first launch, which can wait for running kernels")
		})
	}
	return Module{Ctx: c, Handle: uintptr(unsafe.Pointer(m))}, nil
}

func (m Module) c() C.CUmodule { return *(*C.CUmodule)(unsafe.Pointer(&m.Handle)) }

// Function returns the kernel called name (its extern "C" name).
func (m Module) Function(name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	if err := newError("cuModuleGetFunction", Result(C.weft_cuModuleGetFunction(m.Ctx.c(), &f, m.c(), cname))); err != nil {
		return Function{}, fmt.Errorf("kernel %q: %w", name, err)
	}
	return Function{Ctx: m.Ctx, Handle: uintptr(unsafe.Pointer(f))}, nil
}

// Unload unloads m; its functions become invalid.
func (m Module) Unload() error {
	return newError("cuModuleUnload", Result(C.weft_cuModuleUnload(m.Ctx.c(), m.c())))
}

func (f Function) c() C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&f.Handle)) }

// SetAttribute sets a function attribute (FuncAttrMaxDynamicSharedSizeBytes
// to use more than 48 KiB of dynamic shared memory).
func (f Function) SetAttribute(a FunctionAttribute, v int) error {
	return newError("cuFuncSetAttribute", Result(C.weft_cuFuncSetAttribute(f.Ctx.c(), f.c(), C.int(a), C.int(v))))
}

// Attribute returns a function attribute.
func (f Function) Attribute(a FunctionAttribute) (int, error) {
	var v C.int
	err := newError("cuFuncGetAttribute", Result(C.weft_cuFuncGetAttribute(f.Ctx.c(), &v, C.int(a), f.c())))
	return int(v), err
}

// MaxActiveBlocksPerMultiprocessor returns how many blocks of threads
// threads, with sharedBytes of dynamic shared memory each, fit on one
// multiprocessor at once given the kernel's registers and static shared
// memory (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (f Function) MaxActiveBlocksPerMultiprocessor(threads, sharedBytes int) (int, error) {
	var n C.int
	err := newError("cuOccupancyMaxActiveBlocksPerMultiprocessor", Result(C.weft_cuOccupancyMaxActiveBlocksPerMultiprocessor(f.Ctx.c(), &n, f.c(), C.int(threads), C.size_t(sharedBytes))))
	return int(n), err
}

func dim(v uint32) C.uint {
	if v == 0 {
		return 1
	}
	return C.uint(v)
}

// Launch enqueues f on s with one kernel parameter, the struct whose bytes
// are params (nil for a kernel without parameters). The driver copies the
// parameter bytes before Launch returns. It is one cgo call.
func (f Function) Launch(grid, block Dim3, sharedBytes int, s Stream, params []byte) error {
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	return newError("cuLaunchKernel", Result(C.weft_cuLaunchKernel(f.Ctx.c(), f.c(),
		dim(grid.X), dim(grid.Y), dim(grid.Z), dim(block.X), dim(block.Y), dim(block.Z),
		C.uint(sharedBytes), s.c(), p)))
}

// ---- virtual memory management (cuMem*) ------------------------------------

// MemGetAllocationGranularity returns the granularity of pinned device
// allocations on device ordinal dev with the given shareable handle types.
func (c Context) MemGetAllocationGranularity(dev int, handleTypes int, option int) (int64, error) {
	var g C.size_t
	err := newError("cuMemGetAllocationGranularity", Result(C.weft_cuMemGetAllocationGranularity(c.c(), &g, C.int(dev), C.int(handleTypes), C.int(option))))
	return int64(g), err
}

// MemCreate creates a physical allocation of size bytes on device ordinal
// dev, exportable as handleTypes.
func (c Context) MemCreate(size int64, dev int, handleTypes int) (MemGenericAllocationHandle, error) {
	var h C.CUmemGenericAllocationHandle
	err := newError("cuMemCreate", Result(C.weft_cuMemCreate(c.c(), &h, C.size_t(size), C.int(dev), C.int(handleTypes))))
	return MemGenericAllocationHandle(h), err
}

// MemRelease releases an allocation handle.
func (c Context) MemRelease(h MemGenericAllocationHandle) error {
	return newError("cuMemRelease", Result(C.weft_cuMemRelease(c.c(), C.CUmemGenericAllocationHandle(h))))
}

// MemExportToFD exports an allocation as a POSIX file descriptor, which the
// caller owns.
func (c Context) MemExportToFD(h MemGenericAllocationHandle) (int, error) {
	var fd C.int
	err := newError("cuMemExportToShareableHandle", Result(C.weft_cuMemExportToShareableHandleFD(c.c(), &fd, C.CUmemGenericAllocationHandle(h))))
	return int(fd), err
}

// MemImportFromFD imports an allocation from a POSIX file descriptor.
func (c Context) MemImportFromFD(fd int) (MemGenericAllocationHandle, error) {
	var h C.CUmemGenericAllocationHandle
	err := newError("cuMemImportFromShareableHandle", Result(C.weft_cuMemImportFromShareableHandleFD(c.c(), &h, C.int(fd))))
	return MemGenericAllocationHandle(h), err
}

// MemAddressReserve reserves size bytes of virtual address space.
func (c Context) MemAddressReserve(size, align int64) (DevicePtr, error) {
	var p C.CUdeviceptr
	err := newError("cuMemAddressReserve", Result(C.weft_cuMemAddressReserve(c.c(), &p, C.size_t(size), C.size_t(align))))
	return DevicePtr(p), err
}

// MemAddressFree frees a reservation.
func (c Context) MemAddressFree(p DevicePtr, size int64) error {
	return newError("cuMemAddressFree", Result(C.weft_cuMemAddressFree(c.c(), C.CUdeviceptr(p), C.size_t(size))))
}

// MemMap maps allocation h at p.
func (c Context) MemMap(p DevicePtr, size int64, h MemGenericAllocationHandle) error {
	return newError("cuMemMap", Result(C.weft_cuMemMap(c.c(), C.CUdeviceptr(p), C.size_t(size), C.CUmemGenericAllocationHandle(h))))
}

// MemUnmap unmaps a range mapped by MemMap.
func (c Context) MemUnmap(p DevicePtr, size int64) error {
	return newError("cuMemUnmap", Result(C.weft_cuMemUnmap(c.c(), C.CUdeviceptr(p), C.size_t(size))))
}

// MemSetAccess grants read-write access to the range for the given device
// ordinals.
func (c Context) MemSetAccess(p DevicePtr, size int64, devices []int) error {
	if len(devices) == 0 {
		return nil
	}
	ds := make([]C.int, len(devices))
	for i, d := range devices {
		ds[i] = C.int(d)
	}
	return newError("cuMemSetAccess", Result(C.weft_cuMemSetAccess(c.c(), C.CUdeviceptr(p), C.size_t(size), &ds[0], C.int(len(ds)))))
}

// SetCurrentProc returns the address of the driver's cuCtxSetCurrent
// (CUresult (*)(CUcontext)), or 0 before Load. C code of other packages
// calls it to make a context current in the same cgo call as a library
// call that needs one.
func SetCurrentProc() uintptr {
	if !loaded() {
		return 0
	}
	return uintptr(C.weft_cuCtxSetCurrent_addr())
}
