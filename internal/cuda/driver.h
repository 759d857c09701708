// driver.h: the trampolines of driver.c, called from driver_cgo.go.
#pragma once

#include "weft_cuda.h"

int weft_cuda_load(const char* path, CUresult* cu);
int weft_cuda_loaded(void);
const char* weft_cuda_load_error(void);
const char* weft_cuGetErrorName(CUresult r);
const char* weft_cuGetErrorString(CUresult r);

CUresult weft_cuInit(void);
CUresult weft_cuDriverGetVersion(int* v);
CUresult weft_cuDeviceGetCount(int* n);
CUresult weft_cuDeviceGet(CUdevice* d, int ordinal);
CUresult weft_cuDeviceGetName(char* name, int len, CUdevice d);
CUresult weft_cuDeviceGetAttribute(int* v, int attr, CUdevice d);
CUresult weft_cuDeviceGetUuid(void* uuid, CUdevice d);
CUresult weft_cuDeviceGetPCIBusId(char* id, int len, CUdevice d);
CUresult weft_cuDeviceTotalMem(size_t* bytes, CUdevice d);
CUresult weft_cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer);
CUresult weft_cuDeviceGetP2PAttribute(int* v, int attr, CUdevice src, CUdevice dst);
CUresult weft_cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d);
CUresult weft_cuDevicePrimaryCtxRelease(CUdevice d);

CUresult weft_cuCtxSynchronize(CUcontext ctx);
CUresult weft_cuCtxEnablePeerAccess(CUcontext ctx, CUcontext peer);
CUresult weft_cuMemAlloc(CUcontext ctx, CUdeviceptr* p, size_t n);
CUresult weft_cuMemFree(CUcontext ctx, CUdeviceptr p);
CUresult weft_cuMemGetInfo(CUcontext ctx, size_t* free, size_t* total);
CUresult weft_cuMemHostAlloc(CUcontext ctx, void** p, size_t n, unsigned int flags);
CUresult weft_cuMemHostGetDevicePointer(CUcontext ctx, CUdeviceptr* d, void* p);
CUresult weft_cuMemFreeHost(CUcontext ctx, void* p);
CUresult weft_cuMemcpyHtoD(CUcontext ctx, CUdeviceptr dst, const void* src, size_t n);
CUresult weft_cuMemcpyDtoH(CUcontext ctx, void* dst, CUdeviceptr src, size_t n);
CUresult weft_cuMemcpyDtoD(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult weft_cuMemcpyAsync(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult weft_cuMemcpyDtoHAsync(CUcontext ctx, void* dst, CUdeviceptr src, size_t n, CUstream s);
CUresult weft_cuMemcpyHtoDAsync(CUcontext ctx, CUdeviceptr dst, const void* src, size_t n, CUstream s);
CUresult weft_cuMemHostRegister(CUcontext ctx, void* p, size_t n, unsigned int flags);
CUresult weft_cuMemHostUnregister(CUcontext ctx, void* p);
CUresult weft_cuMemsetD8(CUcontext ctx, CUdeviceptr dst, unsigned char v, size_t n);
CUresult weft_cuMemGetAddressRange(CUcontext ctx, CUdeviceptr* base, size_t* size, CUdeviceptr p);
CUresult weft_cuPointerGetAttribute(CUcontext ctx, void* data, int attr, CUdeviceptr p);
CUresult weft_cuIpcGetMemHandle(CUcontext ctx, void* handle, CUdeviceptr p);
CUresult weft_cuIpcOpenMemHandle(CUcontext ctx, CUdeviceptr* p, const void* handle, unsigned int flags);
CUresult weft_cuIpcCloseMemHandle(CUcontext ctx, CUdeviceptr p);

CUresult weft_cuStreamCreate(CUcontext ctx, CUstream* s, unsigned int flags);
CUresult weft_cuStreamQuery(CUcontext ctx, CUstream s);
CUresult weft_cuStreamSynchronize(CUcontext ctx, CUstream s);
CUresult weft_cuStreamDestroy(CUcontext ctx, CUstream s);
CUresult weft_cuStreamWaitEvent(CUcontext ctx, CUstream s, CUevent e);
CUresult weft_cuStreamWriteValue64(CUcontext ctx, CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned int flags);
CUresult weft_cuStreamWaitValue64(CUcontext ctx, CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned int flags);
CUresult weft_queue_ops(CUcontext ctx, const CUstream* streams, const weft_stream_op* ops, int n, int batch, int* failed);
CUresult weft_signal64(CUcontext ctx, CUstream s, CUdeviceptr addr0, cuuint64_t value0, CUdeviceptr addr1,
                       cuuint64_t value1);
CUresult weft_cuEventCreate(CUcontext ctx, CUevent* e, unsigned int flags);
CUresult weft_cuEventRecord(CUcontext ctx, CUevent e, CUstream s);
CUresult weft_record_unless_capturing(CUcontext ctx, CUevent e, CUstream s, int* recorded);
CUresult weft_stream_after(CUcontext ctx, CUstream s, CUstream prev, int join, int* ordered);
CUresult weft_wait_unless_capturing(CUcontext ctx, CUstream s, CUevent e, int* waited);
CUresult weft_stream_is_capturing(CUcontext ctx, CUstream s, int* capturing);
CUresult weft_cuEventQuery(CUcontext ctx, CUevent e);
CUresult weft_cuEventSynchronize(CUcontext ctx, CUevent e);
CUresult weft_cuEventElapsedTime(CUcontext ctx, float* ms, CUevent start, CUevent end);
CUresult weft_cuEventDestroy(CUcontext ctx, CUevent e);

CUresult weft_cuStreamBeginCapture(CUcontext ctx, CUstream s, int mode);
CUresult weft_cuStreamEndCapture(CUcontext ctx, CUstream s, CUgraph* g);
CUresult weft_cuGraphInstantiateWithFlags(CUcontext ctx, CUgraphExec* e, CUgraph g, unsigned long long flags);
CUresult weft_cuGraphLaunch(CUcontext ctx, CUgraphExec e, CUstream s);
CUresult weft_cuGraphExecDestroy(CUcontext ctx, CUgraphExec e);
CUresult weft_cuGraphDestroy(CUcontext ctx, CUgraph g);

CUresult weft_cuModuleLoadData(CUcontext ctx, CUmodule* m, const void* image, int* eager);
CUresult weft_cuModuleGetFunction(CUcontext ctx, CUfunction* f, CUmodule m, const char* name);
CUresult weft_cuModuleUnload(CUcontext ctx, CUmodule m);
CUresult weft_cuFuncSetAttribute(CUcontext ctx, CUfunction f, int attr, int v);
CUresult weft_cuFuncGetAttribute(CUcontext ctx, int* v, int attr, CUfunction f);
CUresult weft_cuOccupancyMaxActiveBlocksPerMultiprocessor(CUcontext ctx, int* n, CUfunction f, int threads, size_t shared);
CUresult weft_cuLaunchKernel(CUcontext ctx, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s,
                             void* params);

CUresult weft_cuMemGetAllocationGranularity(CUcontext ctx, size_t* g, int device, int handleTypes, int option);
CUresult weft_cuMemCreate(CUcontext ctx, CUmemGenericAllocationHandle* h, size_t size, int device, int handleTypes);
CUresult weft_cuMemRelease(CUcontext ctx, CUmemGenericAllocationHandle h);
CUresult weft_cuMemExportToShareableHandleFD(CUcontext ctx, int* fd, CUmemGenericAllocationHandle h);
CUresult weft_cuMemImportFromShareableHandleFD(CUcontext ctx, CUmemGenericAllocationHandle* h, int fd);
CUresult weft_cuMemAddressReserve(CUcontext ctx, CUdeviceptr* p, size_t size, size_t align);
CUresult weft_cuMemAddressFree(CUcontext ctx, CUdeviceptr p, size_t size);
CUresult weft_cuMemMap(CUcontext ctx, CUdeviceptr p, size_t size, CUmemGenericAllocationHandle h);
CUresult weft_cuMemUnmap(CUcontext ctx, CUdeviceptr p, size_t size);
CUresult weft_cuMemSetAccess(CUcontext ctx, CUdeviceptr p, size_t size, const int* devices, int n);

int weft_cuda_has_multicast(void);
CUresult weft_cuMulticastGetGranularity(CUcontext ctx, size_t* g, unsigned int numDevices, size_t size,
                                        unsigned long long handleTypes, int option);
CUresult weft_cuMulticastCreate(CUcontext ctx, CUmemGenericAllocationHandle* h, unsigned int numDevices, size_t size,
                                unsigned long long handleTypes);
CUresult weft_cuMulticastAddDevice(CUcontext ctx, CUmemGenericAllocationHandle h, CUdevice dev);
CUresult weft_cuMulticastBindMem(CUcontext ctx, CUmemGenericAllocationHandle mc, size_t mcOffset,
                                 CUmemGenericAllocationHandle mem, size_t memOffset, size_t size);
CUresult weft_cuMulticastUnbind(CUcontext ctx, CUmemGenericAllocationHandle mc, CUdevice dev, size_t mcOffset,
                                size_t size);

void* weft_cuCtxSetCurrent_addr(void);
