// Package cuda binds the CUDA driver API and NVRTC for weft's NVIDIA
// backends. Both libraries are opened with dlopen at run time from a
// committed minimal header (weft_cuda.h), so the package builds — and its
// tests run — on machines without the CUDA toolkit or driver, the way
// NVIDIA/go-nvml does. Versioned driver entry points are resolved
// explicitly with cuGetProcAddress_v2 at CUDA version 12.0.
//
// A CUDA context is current per OS thread, and Go moves goroutines between
// threads. Every call here that needs a context therefore takes one (a
// [Context], or an object that remembers its context such as [Stream] and
// [Function]) and makes it current inside the same cgo call. A kernel launch
// ([Function.Launch]) is one cgo call.
//
// Errors returned by driver calls are [*Error] values that name the call and
// the CUresult, and wrap [errkind.ErrDevice] (and [errkind.ErrNotSupported] or
// [errkind.ErrInvalidArgument] where the result says so). Without a driver,
// [Load] fails with an error wrapping [errkind.ErrNotSupported]; built without
// cgo every function does.
//
// [Compile] turns CUDA C++ into a cubin with NVRTC for one exact
// architecture ([Arch]); [KernelCache] keeps compiled binaries on disk.
package cuda
