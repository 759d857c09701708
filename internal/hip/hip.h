// hip.h: the trampolines of hip.c, called from hip_cgo.go. Device
// addresses travel as uint64_t and runtime handles (streams, events,
// modules, functions, graphs) as uintptr_t, so that Go passes no pointers
// it does not own. dev is the HIP ordinal made current (hipSetDevice) in
// the same call; -1 leaves the current device alone.
#pragma once

#include "weft_hip.h"

int weft_hip_load(const char* path);
const char* weft_hip_load_error(void);
const char* weft_hip_error_name(hipError_t r);
const char* weft_hip_error_string(hipError_t r);

hipError_t weft_hipInit(void);
hipError_t weft_hipDriverGetVersion(int* v);
hipError_t weft_hipRuntimeGetVersion(int* v);
hipError_t weft_hipGetDeviceCount(int* n);
hipError_t weft_hipDeviceGetName(char* name, int len, int dev);
hipError_t weft_hipDeviceGetAttribute(int* v, int attr, int dev);
hipError_t weft_hipDeviceGetPCIBusId(char* id, int len, int dev);
hipError_t weft_hipDeviceTotalMem(size_t* bytes, int dev);
hipError_t weft_hipDeviceGetUuid(void* uuid, int dev, int* have);
hipError_t weft_hip_arch_name(int dev, char* name, int len, int* call);
hipError_t weft_hipDeviceCanAccessPeer(int* can, int dev, int peer);
hipError_t weft_hipDeviceEnablePeerAccess(int dev, int peer);

hipError_t weft_hipExtMallocWithFlags(int dev, uint64_t* p, size_t n, unsigned int flags);
hipError_t weft_hipFree(int dev, uint64_t p);
hipError_t weft_hipHostMalloc(int dev, void** p, size_t n, unsigned int flags);
hipError_t weft_hipHostGetDevicePointer(int dev, uint64_t* d, void* p);
hipError_t weft_hipHostFree(int dev, void* p);
hipError_t weft_hip_memcpy_htod(int dev, uint64_t dst, const void* src, size_t n, int* call);
hipError_t weft_hip_memcpy_dtoh(int dev, void* dst, uint64_t src, size_t n, int* call);
hipError_t weft_hip_memset_sync(int dev, uint64_t dst, int v, size_t n, int* call);
hipError_t weft_hipMemGetAddressRange(int dev, uint64_t* base, size_t* size, uint64_t p);
hipError_t weft_hipIpcGetMemHandle(int dev, void* handle, uint64_t p);
hipError_t weft_hipIpcOpenMemHandle(int dev, uint64_t* p, const void* handle, unsigned int flags);
hipError_t weft_hipIpcCloseMemHandle(int dev, uint64_t p);

hipError_t weft_hipStreamCreateWithFlags(int dev, uintptr_t* s, unsigned int flags);
hipError_t weft_hipStreamQuery(int dev, uintptr_t s);
hipError_t weft_hipStreamDestroy(int dev, uintptr_t s);
hipError_t weft_hipMemcpyAsync(int dev, uint64_t dst, uint64_t src, size_t n, uintptr_t s);
hipError_t weft_hip_signal64(int dev, uintptr_t s, uint64_t addr0, uint64_t value0, uint64_t addr1, uint64_t value1);
hipError_t weft_hipEventCreateWithFlags(int dev, uintptr_t* e, unsigned int flags);
hipError_t weft_hipEventRecord(int dev, uintptr_t e, uintptr_t s);
hipError_t weft_hipEventQuery(int dev, uintptr_t e);
hipError_t weft_hipEventElapsedTime(int dev, float* ms, uintptr_t start, uintptr_t end);
hipError_t weft_hipEventDestroy(int dev, uintptr_t e);

hipError_t weft_hip_stream_after(int dev, uintptr_t s, uintptr_t prev, int* ordered);
hipError_t weft_hipStreamBeginCapture(int dev, uintptr_t s, int mode);
hipError_t weft_hipStreamEndCapture(int dev, uintptr_t s, uintptr_t* g);
hipError_t weft_hipGraphInstantiate(int dev, uintptr_t* e, uintptr_t g);
hipError_t weft_hipGraphLaunch(int dev, uintptr_t e, uintptr_t s);
hipError_t weft_hipGraphExecDestroy(int dev, uintptr_t e);
hipError_t weft_hipGraphDestroy(int dev, uintptr_t g);

hipError_t weft_hipModuleLoadData(int dev, uintptr_t* m, const void* image);
hipError_t weft_hipModuleGetFunction(int dev, uintptr_t* f, uintptr_t m, const char* name);
hipError_t weft_hipModuleUnload(int dev, uintptr_t m);
hipError_t weft_hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int dev, int* n, uintptr_t f, int threads, size_t shared);
hipError_t weft_hipModuleLaunchKernel(int dev, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                      uintptr_t s, void* params, size_t paramBytes);
