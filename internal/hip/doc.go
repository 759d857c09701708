// Package hip binds the HIP runtime (libamdhip64) and hipRTC for weft's AMD
// backend, hal/xgmi. Both libraries are opened with dlopen at run time from
// a committed minimal header of weft's own (weft_hip.h), so the package
// builds — and its tests run, against a fake runtime built from
// testdata/ — on machines without ROCm, the way package
// github.com/weftccl/weft/internal/cuda does for CUDA.
//
// [Load] tries the runtime's usual names ([Candidates]: libamdhip64.so.7,
// .6, .5 and .so in the loader's paths, then under $ROCM_PATH/lib and
// /opt/rocm/lib); [LoadFrom] loads a given library instead, and replaces
// the one loaded before (tests load fakes this way). [LoadRTC] and
// [LoadRTCFrom] do the same for hipRTC. Entry points with several names
// are resolved under the versioned one first (hipGetDevicePropertiesR0600
// before ROCm 5's hipGetDeviceProperties; hipHostMalloc, else
// hipHostAlloc).
//
// The HIP runtime keeps a current device per OS thread, and Go moves
// goroutines between threads. Every call here that needs a device takes
// one (a [Device], or an object that remembers its device such as
// [Stream]) and makes it current with hipSetDevice inside the same cgo
// call. A kernel launch ([Function.Launch]) is one cgo call.
//
// Errors of runtime calls are [*Error] values that name the call and the
// hipError_t (name and text from hipGetErrorName and hipGetErrorString,
// or a fallback table before the runtime is loaded), and wrap
// [errkind.ErrDevice] (and [errkind.ErrNotSupported] or [errkind.ErrInvalidArgument]
// where the result says so). Without ROCm, [Load] fails with a
// [*LoadError] wrapping [errkind.ErrNotSupported]; built without cgo every
// function does.
//
// [Compile] turns HIP C++ into a code object with hipRTC for one exact
// offload target ("gfx942:sramecc+:xnack-"); [NewKernelCache] keeps code
// objects on disk with internal/cuda's KernelCache, keyed by source hash,
// target and compiler version.
//
// The package is a binding below the HAL contract: it imports no hal
// package, only the error kinds of internal/errkind (the same values hal
// re-exports). The HAL objects built on it — streams, events, graphs,
// modules, the copy engine, weft's IPC handle format and mappings, and the
// device header — are the HIP device core's, package internal/hipdev, as
// CUDA's are internal/cudadev's; deadline polls, the host id and the
// ticket ring are internal/devcore's, shared by both cores.
package hip
