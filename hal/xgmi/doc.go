// Package xgmi is weft's HAL backend for AMD GPUs connected by Infinity
// Fabric (xGMI), through the HIP runtime. It registers itself as "xgmi";
// import it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/xgmi"
//
// A [Device] is one GPU of this process, driven through package
// internal/hip (libamdhip64 and hipRTC loaded with dlopen at run time, so
// nothing of ROCm is needed to build). It implements [hal.Device],
// [hal.MemoryMapped] (HIP IPC: peers map each other's buffers, and kernels
// load and store to them), [hal.PortMapped] (SDMA copy engines),
// [hal.GraphCapturer] (HIP graphs), [hal.KernelCompiler] (hipRTC for the
// GPU's exact offload target, code objects cached on disk) and
// [hal.Executor] (a plan compiled to one kernel).
//
// A GPU of the same host that this GPU can access (hipDeviceCanAccessPeer:
// xGMI, or PCIe peer access), and the GPU itself, are linked memory-mapped
// and port-mapped; nothing else is.
//
// Device memory is fine-grained (hipExtMallocWithFlags with
// hipDeviceMallocFinegrained): the device header's system-scope atomics,
// which peers and the host apply to semaphores, scratch and FIFOs, are
// coherent only there, and Alloc cannot tell those buffers from data.
// Host memory (AllocHost) is pinned, mapped and coherent (hipHostMalloc).
//
// The device-side primitives (internal/hipdev/device/weft_hal.h, [Device.DeviceHeader])
// are the HIP twin of the CUDA backends' header, so channels/device and
// generated plan kernels compile unchanged. Wavefronts are 64 lanes wide:
// [Device.Prepare] refuses plans whose blocks are not a multiple of 64
// threads.
package xgmi
