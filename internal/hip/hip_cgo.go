//go:build cgo

package hip

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "hip.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weftccl/weft/internal/errkind"
)

var (
	libMu    sync.Mutex
	libTried bool
	libErr   error
	libPath  string
	isLoaded atomic.Bool // a library is loaded and hipInit succeeded
)

// Load opens the HIP runtime (the first of Candidates that loads),
// resolves every entry point weft uses and calls hipInit. The first call's
// result is kept (unless LoadFrom replaces it). Without ROCm the error is a
// *LoadError with NotFound set, wrapping errkind.ErrNotSupported:
// "libamdhip64.so: cannot open shared object file: …: no ROCm: …".
func Load() error {
	libMu.Lock()
	defer libMu.Unlock()
	if !libTried {
		libPath, libErr = loadFirst(Candidates())
		libTried = true
		isLoaded.Store(libErr == nil)
	}
	return libErr
}

// LoadFrom loads the first of paths that opens as a HIP runtime and makes
// it the library every call uses, replacing the one loaded before (whose
// objects must not be used afterwards); later Load calls return its
// result. It is for tests (a fake runtime) and for callers that know the
// library's path. It must not run concurrently with other calls.
func LoadFrom(paths ...string) error {
	libMu.Lock()
	defer libMu.Unlock()
	libPath, libErr = loadFirst(paths)
	libTried = true
	isLoaded.Store(libErr == nil)
	return libErr
}

func loadFirst(paths []string) (string, error) {
	if len(paths) == 0 {
		return "", &LoadError{Detail: "no library to load", NotFound: true, Hint: "no ROCm"}
	}
	var last string
	for _, p := range paths {
		cp := C.CString(p)
		rc := C.weft_hip_load(cp)
		C.free(unsafe.Pointer(cp))
		switch rc {
		case C.WEFT_LOAD_OK:
			if err := newError("hipInit", Result(C.weft_hipInit())); err != nil {
				hint := "HIP runtime failed to initialise"
				switch {
				case IsResult(err, ErrorNoDevice):
					hint = "no AMD GPU"
				case IsResult(err, ErrorInsufficientDriver):
					hint = "the amdgpu kernel driver is older than the HIP runtime"
				}
				return p, &LoadError{Library: p, Detail: p, Hint: hint, Err: err}
			}
			return p, nil
		case C.WEFT_LOAD_DLOPEN:
			last = C.GoString(C.weft_hip_load_error())
		default:
			return p, &LoadError{Library: p, Detail: C.GoString(C.weft_hip_load_error()), Hint: "HIP runtime lacks an entry point weft needs (ROCm older than 5?)"}
		}
	}
	return paths[0], &LoadError{
		Library:  paths[0],
		Detail:   last,
		NotFound: true,
		Hint:     "no ROCm: libamdhip64.so not found (tried " + strings.Join(paths, ", ") + ")",
	}
}

// LibraryPath returns the runtime library that was loaded, or "".
func LibraryPath() string {
	if !isLoaded.Load() {
		return ""
	}
	libMu.Lock()
	defer libMu.Unlock()
	return libPath
}

func runtimeErrorName(r Result) string {
	if s := C.weft_hip_error_name(C.hipError_t(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

func runtimeErrorString(r Result) string {
	if s := C.weft_hip_error_string(C.hipError_t(r)); s != nil {
		return C.GoString(s)
	}
	return ""
}

// ensure loads the runtime if needed; Device methods call it because a
// Device value can be made without it.
func ensure(call string) error {
	if isLoaded.Load() {
		return nil
	}
	if err := Load(); err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	return nil
}

func call(name string, r C.hipError_t) error { return newError(name, Result(r)) }

// DriverVersion returns hipDriverGetVersion's number (see FormatVersion).
func DriverVersion() (int, error) {
	if err := ensure("hipDriverGetVersion"); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), call("hipDriverGetVersion", C.weft_hipDriverGetVersion(&v))
}

// RuntimeVersion returns hipRuntimeGetVersion's number (see FormatVersion).
func RuntimeVersion() (int, error) {
	if err := ensure("hipRuntimeGetVersion"); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), call("hipRuntimeGetVersion", C.weft_hipRuntimeGetVersion(&v))
}

// DeviceCount returns the number of visible AMD GPUs.
func DeviceCount() (int, error) {
	if err := ensure("hipGetDeviceCount"); err != nil {
		return 0, err
	}
	var n C.int
	err := call("hipGetDeviceCount", C.weft_hipGetDeviceCount(&n))
	if IsResult(err, ErrorNoDevice) {
		return 0, nil
	}
	return int(n), err
}

// Name returns the marketing name ("AMD Instinct MI300X").
func (d Device) Name() (string, error) {
	if err := ensure("hipDeviceGetName"); err != nil {
		return "", err
	}
	var buf [256]C.char
	if err := call("hipDeviceGetName", C.weft_hipDeviceGetName(&buf[0], C.int(len(buf)), C.int(d))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// Attribute returns a device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	if err := ensure("hipDeviceGetAttribute"); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), call("hipDeviceGetAttribute", C.weft_hipDeviceGetAttribute(&v, C.int(a), C.int(d)))
}

// PCIBusID returns the PCI address, "0000:0c:00.0".
func (d Device) PCIBusID() (string, error) {
	if err := ensure("hipDeviceGetPCIBusId"); err != nil {
		return "", err
	}
	var buf [64]C.char
	if err := call("hipDeviceGetPCIBusId", C.weft_hipDeviceGetPCIBusId(&buf[0], C.int(len(buf)), C.int(d))); err != nil {
		return "", err
	}
	return strings.ToLower(C.GoString(&buf[0])), nil
}

// TotalMem returns the device memory size in bytes.
func (d Device) TotalMem() (int64, error) {
	if err := ensure("hipDeviceTotalMem"); err != nil {
		return 0, err
	}
	var n C.size_t
	return int64(n), call("hipDeviceTotalMem", C.weft_hipDeviceTotalMem(&n, C.int(d)))
}

// UUID returns the device UUID; ok is false when the runtime lacks
// hipDeviceGetUuid.
func (d Device) UUID() (u UUID, ok bool, err error) {
	if err := ensure("hipDeviceGetUuid"); err != nil {
		return u, false, err
	}
	var have C.int
	err = call("hipDeviceGetUuid", C.weft_hipDeviceGetUuid(unsafe.Pointer(&u[0]), C.int(d), &have))
	return u, have != 0, err
}

// ArchName returns the device's offload target, gcnArchName of its
// properties ("gfx942:sramecc+:xnack-"): from hipGetDevicePropertiesR0600
// (ROCm 6 and later), else ROCm 5's hipGetDeviceProperties. A runtime
// with neither gives an error wrapping errkind.ErrNotSupported; properties
// without a "gfx" name, one wrapping errkind.ErrDevice.
func (d Device) ArchName() (string, error) {
	if err := ensure("hipGetDeviceProperties"); err != nil {
		return "", err
	}
	var buf [C.WEFT_HIP_ARCH_NAME_BYTES]C.char
	var which C.int
	r := C.weft_hip_arch_name(C.int(d), &buf[0], C.int(len(buf)), &which)
	name := [...]string{"hipGetDevicePropertiesR0600", "hipGetDeviceProperties", "hipGetDeviceProperties (not exported)"}[which]
	if err := call(name, r); err != nil {
		return "", err
	}
	s := C.GoString(&buf[0])
	if s == "" {
		return "", fmt.Errorf("%s: no gfx architecture name in the properties of device %d: %w", name, d, errkind.ErrDevice)
	}
	return s, nil
}

// CanAccessPeer reports whether d can map memory of peer
// (hipDeviceCanAccessPeer).
func CanAccessPeer(d, peer Device) (bool, error) {
	if err := ensure("hipDeviceCanAccessPeer"); err != nil {
		return false, err
	}
	var can C.int
	err := call("hipDeviceCanAccessPeer", C.weft_hipDeviceCanAccessPeer(&can, C.int(d), C.int(peer)))
	return can != 0, err
}

// EnablePeerAccess lets kernels and copies of d access memory of peer.
// Access that is already enabled is not an error.
func (d Device) EnablePeerAccess(peer Device) error {
	r := Result(C.weft_hipDeviceEnablePeerAccess(C.int(d), C.int(peer)))
	if r == ErrorPeerAccessAlreadyEnabled {
		return nil
	}
	return newError("hipDeviceEnablePeerAccess", r)
}

// Malloc allocates bytes of device memory (not zeroed) with
// hipExtMallocWithFlags (flags: MallocDefault, MallocFinegrained, …).
func (d Device) Malloc(bytes int64, flags uint) (DevicePtr, error) {
	var p C.uint64_t
	err := call("hipExtMallocWithFlags", C.weft_hipExtMallocWithFlags(C.int(d), &p, C.size_t(bytes), C.uint(flags)))
	return DevicePtr(p), err
}

// Free frees memory from Malloc.
func (d Device) Free(p DevicePtr) error {
	return call("hipFree", C.weft_hipFree(C.int(d), C.uint64_t(p)))
}

// HostMalloc allocates pinned host memory (hipHostMalloc, or hipHostAlloc
// where the runtime names it so, with flags such as
// HostMallocMapped|HostMallocCoherent|HostMallocPortable).
func (d Device) HostMalloc(bytes int64, flags uint) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := call("hipHostMalloc", C.weft_hipHostMalloc(C.int(d), &p, C.size_t(bytes), C.uint(flags)))
	return p, err
}

// HostGetDevicePointer returns the device address of mapped host memory.
func (d Device) HostGetDevicePointer(p unsafe.Pointer) (DevicePtr, error) {
	var v C.uint64_t
	err := call("hipHostGetDevicePointer", C.weft_hipHostGetDevicePointer(C.int(d), &v, p))
	return DevicePtr(v), err
}

// HostFree frees memory from HostMalloc.
func (d Device) HostFree(p unsafe.Pointer) error {
	return call("hipHostFree", C.weft_hipHostFree(C.int(d), p))
}

func syncCall(name string, which C.int) string {
	if which == 1 {
		return "hipStreamSynchronize (after " + name + ")"
	}
	return name
}

// MemcpyHtoD copies src to device address dst and waits until the data is
// visible to work on any stream (hipMemcpy, then the null stream).
func (d Device) MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	var which C.int
	r := C.weft_hip_memcpy_htod(C.int(d), C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), &which)
	return call(syncCall("hipMemcpy", which), r)
}

// MemcpyDtoH copies len(dst) bytes from device address src, synchronously.
func (d Device) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	var which C.int
	r := C.weft_hip_memcpy_dtoh(C.int(d), unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst)), &which)
	return call(syncCall("hipMemcpy", which), r)
}

// Memset sets n bytes at dst to v and waits for it (hipMemset, then the
// null stream).
func (d Device) Memset(dst DevicePtr, v byte, n int64) error {
	var which C.int
	r := C.weft_hip_memset_sync(C.int(d), C.uint64_t(dst), C.int(v), C.size_t(n), &which)
	return call(syncCall("hipMemset", which), r)
}

// MemGetAddressRange returns the base and size of the allocation holding p.
func (d Device) MemGetAddressRange(p DevicePtr) (base DevicePtr, size int64, err error) {
	var b C.uint64_t
	var n C.size_t
	err = call("hipMemGetAddressRange", C.weft_hipMemGetAddressRange(C.int(d), &b, &n, C.uint64_t(p)))
	return DevicePtr(b), int64(n), err
}

// IPCGetMemHandle returns the IPC handle of the allocation whose base is p.
func (d Device) IPCGetMemHandle(p DevicePtr) (IPCMemHandle, error) {
	var h IPCMemHandle
	err := call("hipIpcGetMemHandle", C.weft_hipIpcGetMemHandle(C.int(d), unsafe.Pointer(&h[0]), C.uint64_t(p)))
	return h, err
}

// IPCOpenMemHandle maps memory that another process exported, with
// hipIpcMemLazyEnablePeerAccess; returns its base address here.
func (d Device) IPCOpenMemHandle(h IPCMemHandle) (DevicePtr, error) {
	var p C.uint64_t
	err := call("hipIpcOpenMemHandle", C.weft_hipIpcOpenMemHandle(C.int(d), &p, unsafe.Pointer(&h[0]), C.uint(IPCMemLazyEnablePeerAccess)))
	return DevicePtr(p), err
}

// IPCCloseMemHandle unmaps memory opened with IPCOpenMemHandle.
func (d Device) IPCCloseMemHandle(p DevicePtr) error {
	return call("hipIpcCloseMemHandle", C.weft_hipIpcCloseMemHandle(C.int(d), C.uint64_t(p)))
}

// StreamCreate creates a stream (flags: StreamNonBlocking).
func (d Device) StreamCreate(flags uint) (Stream, error) {
	var s C.uintptr_t
	if err := call("hipStreamCreateWithFlags", C.weft_hipStreamCreateWithFlags(C.int(d), &s, C.uint(flags))); err != nil {
		return Stream{}, err
	}
	return Stream{Dev: d, Handle: uintptr(s)}, nil
}

// Query reports whether all work on s is done. A failed kernel is an error.
func (s Stream) Query() (done bool, err error) {
	r := Result(C.weft_hipStreamQuery(C.int(s.Dev), C.uintptr_t(s.Handle)))
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, newError("hipStreamQuery", r)
}

// Destroy destroys s.
func (s Stream) Destroy() error {
	return call("hipStreamDestroy", C.weft_hipStreamDestroy(C.int(s.Dev), C.uintptr_t(s.Handle)))
}

// MemcpyAsync queues a copy of bytes from src to dst on s. Both are
// unified addresses (device memory, peer memory mapped by IPC, mapped host
// memory); the runtime infers the direction (hipMemcpyDefault), and copies
// between GPUs run on their SDMA engines. It is one cgo call.
func (s Stream) MemcpyAsync(dst, src DevicePtr, bytes int64) error {
	return call("hipMemcpyAsync", C.weft_hipMemcpyAsync(C.int(s.Dev), C.uint64_t(dst), C.uint64_t(src), C.size_t(bytes), C.uintptr_t(s.Handle)))
}

// WriteValue64 queues a store of v at the 64-bit word addr on s
// (hipStreamWriteValue64), after the work queued before it.
func (s Stream) WriteValue64(addr DevicePtr, v uint64) error {
	return s.Signal64(0, 0, addr, v)
}

// Signal64 queues, in one cgo call, a store of v0 at addr0 (skipped when
// addr0 is 0) and then one of v1 at addr1, each a hipStreamWriteValue64
// ordered after the work queued before it: the two stores of a
// port-channel signal.
func (s Stream) Signal64(addr0 DevicePtr, v0 uint64, addr1 DevicePtr, v1 uint64) error {
	return call("hipStreamWriteValue64", C.weft_hip_signal64(C.int(s.Dev), C.uintptr_t(s.Handle), C.uint64_t(addr0), C.uint64_t(v0), C.uint64_t(addr1), C.uint64_t(v1)))
}

// After makes the work queued on s from now on wait for the work queued on
// prev so far (hipEventRecord on prev, hipStreamWaitEvent on s), unless
// either stream is capturing a graph; it reports whether it ordered them.
func (s Stream) After(prev Stream) (ordered bool, err error) {
	var r C.int
	err = call("hipStreamWaitEvent", C.weft_hip_stream_after(C.int(s.Dev), C.uintptr_t(s.Handle), C.uintptr_t(prev.Handle), &r))
	return r != 0, err
}

// BeginCapture starts capturing s into a graph (mode: StreamCaptureMode*).
func (s Stream) BeginCapture(mode int) error {
	return call("hipStreamBeginCapture", C.weft_hipStreamBeginCapture(C.int(s.Dev), C.uintptr_t(s.Handle), C.int(mode)))
}

// EndCapture ends the capture of s and returns the graph.
func (s Stream) EndCapture() (Graph, error) {
	var g C.uintptr_t
	if err := call("hipStreamEndCapture", C.weft_hipStreamEndCapture(C.int(s.Dev), C.uintptr_t(s.Handle), &g)); err != nil {
		return Graph{}, err
	}
	return Graph{Dev: s.Dev, Handle: uintptr(g)}, nil
}

// Instantiate makes an executable graph (hipGraphInstantiate).
func (g Graph) Instantiate() (GraphExec, error) {
	var e C.uintptr_t
	if err := call("hipGraphInstantiate", C.weft_hipGraphInstantiate(C.int(g.Dev), &e, C.uintptr_t(g.Handle))); err != nil {
		return GraphExec{}, err
	}
	return GraphExec{Dev: g.Dev, Handle: uintptr(e)}, nil
}

// Destroy destroys g.
func (g Graph) Destroy() error {
	return call("hipGraphDestroy", C.weft_hipGraphDestroy(C.int(g.Dev), C.uintptr_t(g.Handle)))
}

// Launch enqueues one replay of e on s.
func (e GraphExec) Launch(s Stream) error {
	return call("hipGraphLaunch", C.weft_hipGraphLaunch(C.int(e.Dev), C.uintptr_t(e.Handle), C.uintptr_t(s.Handle)))
}

// Destroy destroys e.
func (e GraphExec) Destroy() error {
	return call("hipGraphExecDestroy", C.weft_hipGraphExecDestroy(C.int(e.Dev), C.uintptr_t(e.Handle)))
}

// EventCreate creates an event (flags: EventDefault for timing events).
func (d Device) EventCreate(flags uint) (Event, error) {
	var e C.uintptr_t
	if err := call("hipEventCreateWithFlags", C.weft_hipEventCreateWithFlags(C.int(d), &e, C.uint(flags))); err != nil {
		return Event{}, err
	}
	return Event{Dev: d, Handle: uintptr(e)}, nil
}

// Record places e in s.
func (e Event) Record(s Stream) error {
	return call("hipEventRecord", C.weft_hipEventRecord(C.int(e.Dev), C.uintptr_t(e.Handle), C.uintptr_t(s.Handle)))
}

// Query reports whether the work before e is done.
func (e Event) Query() (done bool, err error) {
	r := Result(C.weft_hipEventQuery(C.int(e.Dev), C.uintptr_t(e.Handle)))
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, newError("hipEventQuery", r)
}

// ElapsedMillis returns the time from start to e in milliseconds.
func (e Event) ElapsedMillis(start Event) (float32, error) {
	var ms C.float
	err := call("hipEventElapsedTime", C.weft_hipEventElapsedTime(C.int(e.Dev), &ms, C.uintptr_t(start.Handle), C.uintptr_t(e.Handle)))
	return float32(ms), err
}

// Destroy destroys e.
func (e Event) Destroy() error {
	return call("hipEventDestroy", C.weft_hipEventDestroy(C.int(e.Dev), C.uintptr_t(e.Handle)))
}

// ModuleLoadData loads a code object (from Compile) on d.
func (d Device) ModuleLoadData(image []byte) (Module, error) {
	if len(image) == 0 {
		return Module{}, newError("hipModuleLoadData", ErrorInvalidValue)
	}
	// The runtime reads the image during the call only; a C copy keeps
	// the Go buffer free of any pinning concern.
	img := C.CBytes(image)
	defer C.free(img)
	var m C.uintptr_t
	if err := call("hipModuleLoadData", C.weft_hipModuleLoadData(C.int(d), &m, img)); err != nil {
		return Module{}, err
	}
	return Module{Dev: d, Handle: uintptr(m)}, nil
}

// Function returns the kernel called name (its extern "C" name).
func (m Module) Function(name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	if err := call("hipModuleGetFunction", C.weft_hipModuleGetFunction(C.int(m.Dev), &f, C.uintptr_t(m.Handle), cname)); err != nil {
		return Function{}, fmt.Errorf("kernel %q: %w", name, err)
	}
	return Function{Dev: m.Dev, Handle: uintptr(f)}, nil
}

// Unload unloads m; its functions become invalid.
func (m Module) Unload() error {
	return call("hipModuleUnload", C.weft_hipModuleUnload(C.int(m.Dev), C.uintptr_t(m.Handle)))
}

func dim(v uint32) C.uint { return C.uint(max(v, 1)) }

// MaxActiveBlocksPerMultiprocessor returns how many blocks of threads
// threads, with sharedBytes of dynamic shared memory (LDS) each, fit on
// one compute unit at once given the kernel's registers and static LDS
// (hipModuleOccupancyMaxActiveBlocksPerMultiprocessor).
func (f Function) MaxActiveBlocksPerMultiprocessor(threads, sharedBytes int) (int, error) {
	var n C.int
	err := call("hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", C.weft_hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(C.int(f.Dev), &n, C.uintptr_t(f.Handle), C.int(threads), C.size_t(sharedBytes)))
	return int(n), err
}

// Launch enqueues f on s with its arguments as one buffer, the bytes of
// its by-value struct parameter (nil for a kernel without parameters),
// passed with HIP_LAUNCH_PARAM_BUFFER_POINTER and _SIZE. The runtime
// copies the bytes before Launch returns. It is one cgo call.
func (f Function) Launch(grid, block Dim3, sharedBytes int, s Stream, params []byte) error {
	var p unsafe.Pointer
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	return call("hipModuleLaunchKernel", C.weft_hipModuleLaunchKernel(C.int(f.Dev), C.uintptr_t(f.Handle),
		dim(grid.X), dim(grid.Y), dim(grid.Z), dim(block.X), dim(block.Y), dim(block.Z),
		C.uint(sharedBytes), C.uintptr_t(s.Handle), p, C.size_t(len(params))))
}
