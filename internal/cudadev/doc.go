// Package cudadev is the device core that weft's CUDA backends share
// (hal/nvlink, hal/pcie): everything about one NVIDIA GPU that does not
// depend on how GPUs are linked. A backend opens a [Device] with [Open],
// embeds it, and adds its registration, its link policy (hal.Device.Link,
// from the classification of [Device.Peer]) and its port-mapped engines, so
// that backends never import each other.
//
// A [Device] is one GPU of this process, opened on its primary CUDA context
// through package internal/cuda (driver API and NVRTC loaded at run time;
// nothing of the CUDA toolkit is needed to build). It provides the methods
// of [hal.Device] but Link, [hal.MemoryMapped] (CUDA IPC handles; peers map
// each other's buffers and kernels load and store to them),
// [hal.GraphCapturer], [hal.KernelCompiler] (NVRTC for the device's exact
// architecture, binaries cached on disk) and [hal.Executor] (plans compiled
// to one kernel). Streams are non-blocking CUDA streams whose Synchronize
// polls with a deadline, so no wait is unbounded.
//
// [CopyEngine] is the port-mapped engine of links over which a GPU reaches
// the destination's memory by address (peer access, or the same GPU): a
// CUDA stream of asynchronous copies, with signals as stream-ordered 64-bit
// writes ([Device.NewCopyEngine]).
//
// What the CUDA and HIP cores (this package and internal/hipdev) do alike
// is written once in internal/devcore: the deadline poll, the host id, the
// IPC mapping table and the copy engine with its ring of event-marked
// tickets (a hal.Tickets). This package passes it the CUDA calls.
//
// The device-side primitives generated kernels use (system-scope
// release/acquire, atomics, LL packet stores) are in device/weft_hal.h,
// returned by [Device.DeviceHeader].
package cudadev
