// Package nvlink is weft's HAL backend for NVIDIA GPUs connected by NVLink
// (or any link over which CUDA peer access works). It registers itself as
// "nvlink"; import it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/nvlink"
//
// A [Device] is one GPU of this process, opened on its primary CUDA context
// through package internal/cuda (driver API and NVRTC loaded at run time;
// nothing of the CUDA toolkit is needed to build). It implements
// [hal.Device], [hal.MemoryMapped] (CUDA IPC handles; peers map each other's
// buffers and kernels load and store to them), [hal.GraphCapturer] and
// [hal.KernelCompiler] (NVRTC for the device's exact architecture, binaries
// cached on disk). Streams are non-blocking CUDA streams whose
// Synchronize polls with a deadline, so no wait is unbounded.
//
// The device-side primitives generated kernels use (system-scope
// release/acquire, atomics, LL packet stores) are in device/weft_hal.h,
// returned by [Device.DeviceHeader].
package nvlink
