// Package nvlink is weft's HAL backend for NVIDIA GPUs connected by NVLink
// (or any link over which CUDA peer access works). It registers itself as
// "nvlink"; import it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/nvlink"
//
// A [Device] is one GPU of this process. The GPU itself — primary context,
// memory, streams, events, graph capture, NVRTC kernels, plan execution and
// CUDA IPC export and import — is the device core that weft's CUDA backends
// share (package internal/cudadev, embedded in [Device]). This package adds
// the backend's registration and its link policy: a peer GPU on the same
// host that this GPU can access (cuDeviceCanAccessPeer), or the same GPU, is
// memory-mapped (peers map each other's buffers; kernels load and store to
// them) and port-mapped. The port-mapped engine is a copy engine: CUDA
// streams of asynchronous copies whose signals are stream-ordered 64-bit
// writes, a put lane and a copy lane by default (WEFT_CE_LANES;
// [Device.NewEngine]); port handles are the CUDA IPC handles.
//
// The device-side primitives generated kernels use (system-scope
// release/acquire, atomics, LL packet stores) are weft_hal.h, returned by
// DeviceHeader (device/weft_hal.h links to the core's copy).
package nvlink
