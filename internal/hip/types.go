package hip

import "fmt"

// Device is a HIP device ordinal (as HIP_VISIBLE_DEVICES numbers them).
type Device int32

// DevicePtr is an address in the unified virtual address space of the
// process: device memory, host memory mapped for the device, or a peer's
// memory mapped by IPC.
type DevicePtr uint64

// Stream is a hipStream_t together with the device it belongs to.
type Stream struct {
	Dev    Device
	Handle uintptr
}

// Event is a hipEvent_t together with its device.
type Event struct {
	Dev    Device
	Handle uintptr
}

// Module is a loaded hipModule_t together with its device.
type Module struct {
	Dev    Device
	Handle uintptr
}

// Function is a hipFunction_t together with its device.
type Function struct {
	Dev    Device
	Handle uintptr
}

// Graph is a captured hipGraph_t together with its device.
type Graph struct {
	Dev    Device
	Handle uintptr
}

// GraphExec is an instantiated hipGraphExec_t together with its device.
type GraphExec struct {
	Dev    Device
	Handle uintptr
}

// IPCHandleSize is HIP_IPC_HANDLE_SIZE.
const IPCHandleSize = 64

// IPCMemHandle is a hipIpcMemHandle_t: opaque bytes that another process
// passes to [Device.IPCOpenMemHandle].
type IPCMemHandle [IPCHandleSize]byte

// UUID is a hipUUID.
type UUID [16]byte

// String formats u as amd-smi does: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func (u UUID) String() string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Dim3 is a grid or block shape. Zero components count as 1.
type Dim3 struct{ X, Y, Z uint32 }

// DeviceAttribute is a hipDeviceAttribute_t. The values are those of the
// HIP runtime API since ROCm 5 (CUDA-compatible attributes from 0,
// AMD-specific ones from 10000).
type DeviceAttribute int32

const (
	AttrComputeCapabilityMajor  DeviceAttribute = 23
	AttrMaxThreadsPerBlock      DeviceAttribute = 56
	AttrComputeCapabilityMinor  DeviceAttribute = 61
	AttrMultiprocessorCount     DeviceAttribute = 63 // compute units (CUs)
	AttrMaxSharedMemoryPerBlock DeviceAttribute = 74
	AttrWarpSize                DeviceAttribute = 87 // wavefront width: 64 on Instinct GPUs
	AttrFineGrainSupport        DeviceAttribute = 10016
	AttrWallClockRate           DeviceAttribute = 10017 // kHz of the constant device clock (wall_clock64)
)

// Flags of hipExtMallocWithFlags, hipHostMalloc, hipStreamCreateWithFlags,
// hipEventCreateWithFlags, hipIpcOpenMemHandle and hipStreamBeginCapture
// (values from the HIP runtime API).
const (
	MallocDefault     = 0x0 // hipDeviceMallocDefault: coarse-grained
	MallocFinegrained = 0x1 // hipDeviceMallocFinegrained: coherent with peers and the host at system scope
	MallocUncached    = 0x3 // hipDeviceMallocUncached

	HostMallocPortable = 0x1        // hipHostMallocPortable: every device may use it
	HostMallocMapped   = 0x2        // hipHostMallocMapped: mapped into the device address space
	HostMallocCoherent = 0x40000000 // hipHostMallocCoherent: fine-grained, no caching by the device

	StreamNonBlocking = 0x1 // hipStreamNonBlocking

	EventDefault       = 0x0 // hipEventDefault (timing enabled)
	EventDisableTiming = 0x2 // hipEventDisableTiming

	IPCMemLazyEnablePeerAccess = 0x1 // hipIpcMemLazyEnablePeerAccess, the one flag hipIpcOpenMemHandle takes

	StreamCaptureModeGlobal      = 0 // hipStreamCaptureModeGlobal
	StreamCaptureModeThreadLocal = 1
	StreamCaptureModeRelaxed     = 2
)
