package cuda

import (
	"errors"
	"fmt"
)

// Device is a CUdevice: a driver device handle (equal to the ordinal in
// practice, but obtain it with [DeviceGet]).
type Device int32

// Context is a CUcontext. weft uses primary contexts
// ([Device.PrimaryCtxRetain]).
type Context uintptr

// DevicePtr is a CUdeviceptr: an address in the unified virtual address
// space of the process.
type DevicePtr uint64

// Stream is a CUstream together with the context it belongs to.
type Stream struct {
	Ctx    Context
	Handle uintptr
}

// Event is a CUevent together with its context.
type Event struct {
	Ctx    Context
	Handle uintptr
}

// Module is a loaded CUmodule together with its context.
type Module struct {
	Ctx    Context
	Handle uintptr
}

// Function is a CUfunction together with its context.
type Function struct {
	Ctx    Context
	Handle uintptr
}

// Graph is a captured CUgraph together with its context.
type Graph struct {
	Ctx    Context
	Handle uintptr
}

// GraphExec is an instantiated CUgraphExec together with its context.
type GraphExec struct {
	Ctx    Context
	Handle uintptr
}

// IPCHandleSize is CU_IPC_HANDLE_SIZE.
const IPCHandleSize = 64

// IPCMemHandle is a CUipcMemHandle: opaque bytes that another process
// passes to [Context.IPCOpenMemHandle].
type IPCMemHandle [IPCHandleSize]byte

// UUID is a CUuuid.
type UUID [16]byte

// String formats u as nvidia-smi does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func (u UUID) String() string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Dim3 is a grid or block shape. Zero components count as 1.
type Dim3 struct{ X, Y, Z uint32 }

// DeviceAttribute is a CUdevice_attribute (values from cuda.h).
type DeviceAttribute int32

const (
	AttrMaxThreadsPerBlock      DeviceAttribute = 1
	AttrMaxSharedMemoryPerBlock DeviceAttribute = 8
	AttrWarpSize                DeviceAttribute = 10
	AttrClockRate               DeviceAttribute = 13
	AttrMultiprocessorCount     DeviceAttribute = 16
	AttrCanMapHostMemory        DeviceAttribute = 19
	AttrPCIBusID                DeviceAttribute = 33
	AttrPCIDeviceID             DeviceAttribute = 34
	AttrUnifiedAddressing       DeviceAttribute = 41
	AttrPCIDomainID             DeviceAttribute = 50
	AttrComputeCapabilityMajor  DeviceAttribute = 75
	AttrComputeCapabilityMinor  DeviceAttribute = 76
	// AttrCanUse64BitStreamMemOps is CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS
	// of CUDA 12 (122): 64-bit waits and writes through the v2 entry points
	// (cuStreamWaitValue64_v2, cuStreamWriteValue64_v2), which weft resolves.
	// 93, the pre-12 name, now _V1, reports the v1 API, which needs the
	// driver's NVreg_EnableStreamMemOPs=1 and is 0 on H100 hosts.
	AttrCanUse64BitStreamMemOps      DeviceAttribute = 122
	AttrMaxSharedMemoryPerBlockOptin DeviceAttribute = 97
	AttrVirtualMemoryManagement      DeviceAttribute = 102
	AttrHandleTypePosixFD            DeviceAttribute = 103
	// AttrMulticastSupported is CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED
	// (cuda.h of CUDA 12.1 and newer): 1 when the device can be a member
	// of a multicast object (NVLink SHARP through an NVSwitch).
	AttrMulticastSupported DeviceAttribute = 132
)

// Flags of cuMemHostAlloc, cuMemHostRegister, cuStreamCreate, cuEventCreate, cuIpcOpenMemHandle
// and cuStreamBeginCapture (values from cuda.h).
const (
	MemHostAllocPortable  = 0x1 // CU_MEMHOSTALLOC_PORTABLE
	MemHostAllocDeviceMap = 0x2 // CU_MEMHOSTALLOC_DEVICEMAP

	MemHostRegisterPortable  = 0x1 // CU_MEMHOSTREGISTER_PORTABLE
	MemHostRegisterDeviceMap = 0x2 // CU_MEMHOSTREGISTER_DEVICEMAP

	StreamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING

	EventDefault       = 0x0 // CU_EVENT_DEFAULT (timing enabled)
	EventDisableTiming = 0x2 // CU_EVENT_DISABLE_TIMING

	IPCMemLazyEnablePeerAccess = 0x1 // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS

	StreamCaptureModeGlobal      = 0 // CU_STREAM_CAPTURE_MODE_GLOBAL
	StreamCaptureModeThreadLocal = 1
	StreamCaptureModeRelaxed     = 2
)

// FunctionAttribute is a CUfunction_attribute.
type FunctionAttribute int32

const (
	FuncAttrMaxThreadsPerBlock        FunctionAttribute = 0
	FuncAttrSharedSizeBytes           FunctionAttribute = 1
	FuncAttrNumRegs                   FunctionAttribute = 4
	FuncAttrMaxDynamicSharedSizeBytes FunctionAttribute = 8
)

// PointerAttribute is a CUpointer_attribute.
type PointerAttribute int32

const (
	PointerAttrContext       PointerAttribute = 1
	PointerAttrMemoryType    PointerAttribute = 2
	PointerAttrDeviceOrdinal PointerAttribute = 9
)

// Memory allocation granularity options (CUmemAllocationGranularity_flags).
const (
	GranularityMinimum     = 0
	GranularityRecommended = 1
)

// Shareable handle types (CUmemAllocationHandleType).
const (
	HandleTypeNone    = 0
	HandleTypePosixFD = 1
)

// MemGenericAllocationHandle is a CUmemGenericAllocationHandle (VMM): a
// physical allocation of cuMemCreate, or a multicast object of
// cuMulticastCreate.
type MemGenericAllocationHandle uint64

// Multicast granularity options (CUmulticastGranularity_flags of cuda.h,
// CUDA 12.1 and newer).
const (
	MulticastGranularityMinimum     = 0 // CU_MULTICAST_GRANULARITY_MINIMUM
	MulticastGranularityRecommended = 1 // CU_MULTICAST_GRANULARITY_RECOMMENDED
)

// StreamOp is one operation of QueueOps: a copy of Bytes from Src to Dst,
// a wait until the 64-bit word at Dst equals Value, a write of Value
// there, or a launch of Func with Grid blocks of Block threads and the
// by-value parameter {Dst, Src, Src2, Bytes} (OpKernel, skipped when Bytes
// is 0), on the stream of index Lane.
type StreamOp struct {
	Kind     StreamOpKind
	Lane     uint8
	Dst, Src DevicePtr
	Bytes    int64
	Value    uint64
	// OpKernel only.
	Src2        DevicePtr
	Func        Function
	Grid, Block uint32
}

// StreamOpKind is what a StreamOp does (weft_stream_op's kind).
type StreamOpKind int

const (
	OpCopy  StreamOpKind = 1
	OpWait  StreamOpKind = 2 // until equal (CU_STREAM_WAIT_VALUE_EQ)
	OpWrite StreamOpKind = 3
	// OpKernel launches a kernel whose one parameter is four 64-bit words
	// (hal.StreamReduceParams).
	OpKernel StreamOpKind = 4
)

var errInvalidOp = errors.New("invalid stream operation")
