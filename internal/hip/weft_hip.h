// weft_hip.h: the few HIP runtime and hipRTC declarations that package hip
// needs, written for weft so that it builds with no ROCm installed. Values
// and signatures follow the HIP runtime API of ROCm 5, 6 and 7 (the enums
// weft uses kept their values across them); every entry point is resolved
// at run time with dlsym and called through the table of hip.c and rtc.c.
//
// The fake runtime of the tests (testdata/fakehip.c) includes this header
// too and declares its functions from the same lists, so a signature that
// differs between the binding and the fake fails to compile.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef int hipError_t;  // enum hipError_t; 0 is hipSuccess
typedef int hipDevice_t;  // a HIP ordinal
typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;
typedef struct ihipModule_t* hipModule_t;
typedef struct ihipModuleSymbol_t* hipFunction_t;
typedef struct ihipGraph* hipGraph_t;
typedef struct hipGraphExec* hipGraphExec_t;
typedef struct hipGraphNode* hipGraphNode_t;

#define WEFT_HIP_IPC_HANDLE_SIZE 64
typedef struct {
  char reserved[WEFT_HIP_IPC_HANDLE_SIZE];
} hipIpcMemHandle_t;

typedef struct {
  char bytes[16];
} hipUUID;

// The "extra" argument of hipModuleLaunchKernel: a list of (key, value)
// pairs ending with END that passes the kernel arguments as one buffer.
#define WEFT_HIP_LAUNCH_PARAM_BUFFER_POINTER ((void*)0x01)
#define WEFT_HIP_LAUNCH_PARAM_BUFFER_SIZE ((void*)0x02)
#define WEFT_HIP_LAUNCH_PARAM_END ((void*)0x03)

// hipDeviceProp_t is read only for gcnArchName ("gfx942:sramecc+:xnack-"),
// which no attribute returns. ROCm 6 and later fill the R0600 layout
// (hipGetDevicePropertiesR0600), in which the field starts at byte 1160 of
// a 1472-byte struct; ROCm 5's hipGetDeviceProperties fills an older
// layout, searched for the name instead. The buffer is larger than either.
#define WEFT_HIP_PROPS_BYTES 4096
#define WEFT_HIP_R0600_ARCH_OFFSET 1160
#define WEFT_HIP_ARCH_NAME_BYTES 256

// Trampolines report a failed hipSetDevice (made before the call they
// wrap) by or-ing this bit into its hipError_t, so that the error names
// hipSetDevice rather than the wrapped call.
#define WEFT_HIP_SETDEVICE_FAILED (1 << 24)

// Entry points every supported runtime exports: X(name, return type,
// parameter list).
#define WEFT_HIP_FUNCS(X)                                                                               \
  X(hipInit, hipError_t, (unsigned int))                                                                \
  X(hipDriverGetVersion, hipError_t, (int*))                                                            \
  X(hipRuntimeGetVersion, hipError_t, (int*))                                                           \
  X(hipGetErrorName, const char*, (hipError_t))                                                         \
  X(hipGetErrorString, const char*, (hipError_t))                                                       \
  X(hipGetDeviceCount, hipError_t, (int*))                                                              \
  X(hipSetDevice, hipError_t, (int))                                                                    \
  X(hipDeviceGetName, hipError_t, (char*, int, hipDevice_t))                                            \
  X(hipDeviceGetAttribute, hipError_t, (int*, int, int))                                                \
  X(hipDeviceGetPCIBusId, hipError_t, (char*, int, int))                                                \
  X(hipDeviceTotalMem, hipError_t, (size_t*, hipDevice_t))                                              \
  X(hipDeviceCanAccessPeer, hipError_t, (int*, int, int))                                               \
  X(hipDeviceEnablePeerAccess, hipError_t, (int, unsigned int))                                         \
  X(hipExtMallocWithFlags, hipError_t, (void**, size_t, unsigned int))                                  \
  X(hipFree, hipError_t, (void*))                                                                       \
  X(hipHostGetDevicePointer, hipError_t, (void**, void*, unsigned int))                                 \
  X(hipHostFree, hipError_t, (void*))                                                                   \
  X(hipMemcpy, hipError_t, (void*, const void*, size_t, int))                                           \
  X(hipMemcpyAsync, hipError_t, (void*, const void*, size_t, int, hipStream_t))                         \
  X(hipMemset, hipError_t, (void*, int, size_t))                                                        \
  X(hipMemGetAddressRange, hipError_t, (void**, size_t*, void*))                                        \
  X(hipIpcGetMemHandle, hipError_t, (hipIpcMemHandle_t*, void*))                                        \
  X(hipIpcOpenMemHandle, hipError_t, (void**, hipIpcMemHandle_t, unsigned int))                         \
  X(hipIpcCloseMemHandle, hipError_t, (void*))                                                          \
  X(hipStreamCreateWithFlags, hipError_t, (hipStream_t*, unsigned int))                                 \
  X(hipStreamQuery, hipError_t, (hipStream_t))                                                          \
  X(hipStreamSynchronize, hipError_t, (hipStream_t))                                                    \
  X(hipStreamDestroy, hipError_t, (hipStream_t))                                                        \
  X(hipStreamWriteValue64, hipError_t, (hipStream_t, void*, uint64_t, unsigned int))                    \
  X(hipEventCreateWithFlags, hipError_t, (hipEvent_t*, unsigned int))                                   \
  X(hipEventRecord, hipError_t, (hipEvent_t, hipStream_t))                                              \
  X(hipEventQuery, hipError_t, (hipEvent_t))                                                            \
  X(hipEventElapsedTime, hipError_t, (float*, hipEvent_t, hipEvent_t))                                  \
  X(hipEventDestroy, hipError_t, (hipEvent_t))                                                          \
  X(hipStreamWaitEvent, hipError_t, (hipStream_t, hipEvent_t, unsigned int))                           \
  X(hipStreamIsCapturing, hipError_t, (hipStream_t, int*))                                              \
  X(hipStreamBeginCapture, hipError_t, (hipStream_t, int))                                              \
  X(hipStreamEndCapture, hipError_t, (hipStream_t, hipGraph_t*))                                        \
  X(hipGraphInstantiate, hipError_t, (hipGraphExec_t*, hipGraph_t, hipGraphNode_t*, char*, size_t))     \
  X(hipGraphLaunch, hipError_t, (hipGraphExec_t, hipStream_t))                                          \
  X(hipGraphExecDestroy, hipError_t, (hipGraphExec_t))                                                  \
  X(hipGraphDestroy, hipError_t, (hipGraph_t))                                                          \
  X(hipModuleLoadData, hipError_t, (hipModule_t*, const void*))                                         \
  X(hipModuleGetFunction, hipError_t, (hipFunction_t*, hipModule_t, const char*))                       \
  X(hipModuleUnload, hipError_t, (hipModule_t))                                                         \
  X(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, hipError_t, (int*, hipFunction_t, int, size_t))  \
  X(hipModuleLaunchKernel, hipError_t,                                                                  \
    (hipFunction_t, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, \
     unsigned int, hipStream_t, void**, void**))

// Entry points resolved under the first name the library exports:
// X(slot, return type, parameter list, names...). Versioned names come
// first. A slot none of whose names is exported is NULL: optional slots
// (props0600, props, uuid) degrade a query; hostAlloc is required.
#define WEFT_HIP_ALT_FUNCS(X)                                                                           \
  X(hostAlloc, hipError_t, (void**, size_t, unsigned int), "hipHostMalloc", "hipHostAlloc")             \
  X(props0600, hipError_t, (void*, int), "hipGetDevicePropertiesR0600")                                 \
  X(props, hipError_t, (void*, int), "hipGetDeviceProperties")                                          \
  X(uuid, hipError_t, (hipUUID*, hipDevice_t), "hipDeviceGetUuid")

typedef int hiprtcResult;  // enum hiprtcResult; 0 is HIPRTC_SUCCESS
typedef struct _hiprtcProgram* hiprtcProgram;

#define WEFT_HIPRTC_FUNCS(X)                                                                            \
  X(hiprtcVersion, hiprtcResult, (int*, int*))                                                          \
  X(hiprtcGetErrorString, const char*, (hiprtcResult))                                                  \
  X(hiprtcCreateProgram, hiprtcResult,                                                                  \
    (hiprtcProgram*, const char*, const char*, int, const char**, const char**))                        \
  X(hiprtcCompileProgram, hiprtcResult, (hiprtcProgram, int, const char**))                             \
  X(hiprtcGetProgramLogSize, hiprtcResult, (hiprtcProgram, size_t*))                                    \
  X(hiprtcGetProgramLog, hiprtcResult, (hiprtcProgram, char*))                                          \
  X(hiprtcGetCodeSize, hiprtcResult, (hiprtcProgram, size_t*))                                          \
  X(hiprtcGetCode, hiprtcResult, (hiprtcProgram, char*))                                                \
  X(hiprtcDestroyProgram, hiprtcResult, (hiprtcProgram*))

// Errors of the loader itself (not HIP results), returned by weft_hip_load.
#define WEFT_LOAD_OK 0
#define WEFT_LOAD_DLOPEN 1  // dlopen failed; see the load error text
#define WEFT_LOAD_SYMBOL 2  // a required entry point is missing
