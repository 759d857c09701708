//go:build cgo

// driver.c: the CUDA driver API loaded with dlopen. Entry points are
// resolved once by weft_cuda_load through cuGetProcAddress_v2 at an explicit
// CUDA version and kept in the static function pointers below; the weft_cu*
// trampolines call them. Every trampoline that needs a context takes it and
// makes it current in the same call, so that the caller's OS thread (which
// Go may change between calls) never matters.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_cuda.h"
#include "driver.h"

// X(name, return type, parameter list). Every entry point is resolved at
// CUDA version 12000: the newest ABI variant that CUDA 12.0 defines
// (cuMemAlloc_v2, cuIpcOpenMemHandle_v2, cuStreamBeginCapture_v2,
// cuMemHostRegister_v2, cuStreamWriteValue64_v2, …).
#define WEFT_CUDA_FUNCS(X)                                                                          \
  X(cuInit, CUresult, (unsigned int))                                                          \
  X(cuDriverGetVersion, CUresult, (int*))                                                      \
  X(cuGetErrorName, CUresult, (CUresult, const char**))                                        \
  X(cuGetErrorString, CUresult, (CUresult, const char**))                                      \
  X(cuDeviceGetCount, CUresult, (int*))                                                        \
  X(cuDeviceGet, CUresult, (CUdevice*, int))                                                   \
  X(cuDeviceGetName, CUresult, (char*, int, CUdevice))                                         \
  X(cuDeviceGetAttribute, CUresult, (int*, int, CUdevice))                                     \
  X(cuDeviceGetUuid, CUresult, (CUuuid*, CUdevice))                                           \
  X(cuDeviceGetPCIBusId, CUresult, (char*, int, CUdevice))                                     \
  X(cuDeviceTotalMem, CUresult, (size_t*, CUdevice))                                           \
  X(cuDeviceCanAccessPeer, CUresult, (int*, CUdevice, CUdevice))                               \
  X(cuDeviceGetP2PAttribute, CUresult, (int*, int, CUdevice, CUdevice))                        \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext*, CUdevice))                                \
  X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice))                                          \
  X(cuCtxSetCurrent, CUresult, (CUcontext))                                                    \
  X(cuCtxSynchronize, CUresult, (void))                                                        \
  X(cuCtxEnablePeerAccess, CUresult, (CUcontext, unsigned int))                                \
  X(cuMemAlloc, CUresult, (CUdeviceptr*, size_t))                                              \
  X(cuMemFree, CUresult, (CUdeviceptr))                                                        \
  X(cuMemGetInfo, CUresult, (size_t*, size_t*))                                                \
  X(cuMemHostAlloc, CUresult, (void**, size_t, unsigned int))                                  \
  X(cuMemHostGetDevicePointer, CUresult, (CUdeviceptr*, void*, unsigned int))                  \
  X(cuMemFreeHost, CUresult, (void*))                                                          \
  X(cuMemcpyHtoD, CUresult, (CUdeviceptr, const void*, size_t))                                \
  X(cuMemcpyDtoH, CUresult, (void*, CUdeviceptr, size_t))                                      \
  X(cuMemcpyDtoD, CUresult, (CUdeviceptr, CUdeviceptr, size_t))                                \
  X(cuMemcpyAsync, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                     \
  X(cuMemcpyDtoHAsync, CUresult, (void*, CUdeviceptr, size_t, CUstream))                       \
  X(cuMemcpyHtoDAsync, CUresult, (CUdeviceptr, const void*, size_t, CUstream))                 \
  X(cuMemHostRegister, CUresult, (void*, size_t, unsigned int))                                \
  X(cuMemHostUnregister, CUresult, (void*))                                                    \
  X(cuMemsetD8, CUresult, (CUdeviceptr, unsigned char, size_t))                                \
  X(cuMemGetAddressRange, CUresult, (CUdeviceptr*, size_t*, CUdeviceptr))                      \
  X(cuPointerGetAttribute, CUresult, (void*, int, CUdeviceptr))                                \
  X(cuIpcGetMemHandle, CUresult, (CUipcMemHandle*, CUdeviceptr))                               \
  X(cuIpcOpenMemHandle, CUresult, (CUdeviceptr*, CUipcMemHandle, unsigned int))               \
  X(cuIpcCloseMemHandle, CUresult, (CUdeviceptr))                                              \
  X(cuStreamCreate, CUresult, (CUstream*, unsigned int))                                       \
  X(cuStreamQuery, CUresult, (CUstream))                                                       \
  X(cuStreamIsCapturing, CUresult, (CUstream, int*))                                           \
  X(cuStreamSynchronize, CUresult, (CUstream))                                                 \
  X(cuStreamDestroy, CUresult, (CUstream))                                                     \
  X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned int))                            \
  X(cuStreamWriteValue64, CUresult, (CUstream, CUdeviceptr, cuuint64_t, unsigned int))         \
  X(cuStreamWaitValue64, CUresult, (CUstream, CUdeviceptr, cuuint64_t, unsigned int))          \
  X(cuEventCreate, CUresult, (CUevent*, unsigned int))                                         \
  X(cuEventRecord, CUresult, (CUevent, CUstream))                                              \
  X(cuEventQuery, CUresult, (CUevent))                                                         \
  X(cuThreadExchangeStreamCaptureMode, CUresult, (int*))                                        \
  X(cuEventSynchronize, CUresult, (CUevent))                                                   \
  X(cuEventElapsedTime, CUresult, (float*, CUevent, CUevent))                                  \
  X(cuEventDestroy, CUresult, (CUevent))                                                       \
  X(cuStreamBeginCapture, CUresult, (CUstream, int))                                          \
  X(cuStreamEndCapture, CUresult, (CUstream, CUgraph*))                                       \
  X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec*, CUgraph, unsigned long long))       \
  X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                         \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec))                                              \
  X(cuGraphDestroy, CUresult, (CUgraph))                                                      \
  X(cuModuleLoadData, CUresult, (CUmodule*, const void*))                                      \
  X(cuModuleGetFunction, CUresult, (CUfunction*, CUmodule, const char*))                       \
  X(cuModuleUnload, CUresult, (CUmodule))                                                      \
  X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                      \
  X(cuFuncGetAttribute, CUresult, (int*, int, CUfunction))                                     \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult, (int*, CUfunction, int, size_t))     \
  X(cuLaunchKernel, CUresult,                                                                  \
    (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, \
     unsigned int, CUstream, void**, void**))                                                        \
  X(cuMemCreate, CUresult, (CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, \
                                   unsigned long long))                                              \
  X(cuMemRelease, CUresult, (CUmemGenericAllocationHandle))                                   \
  X(cuMemExportToShareableHandle, CUresult,                                                   \
    (void*, CUmemGenericAllocationHandle, int, unsigned long long))                                  \
  X(cuMemImportFromShareableHandle, CUresult, (CUmemGenericAllocationHandle*, void*, int))    \
  X(cuMemAddressReserve, CUresult, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long)) \
  X(cuMemAddressFree, CUresult, (CUdeviceptr, size_t))                                        \
  X(cuMemMap, CUresult, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)) \
  X(cuMemUnmap, CUresult, (CUdeviceptr, size_t))                                              \
  X(cuMemSetAccess, CUresult, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))          \
  X(cuMemGetAllocationGranularity, CUresult, (size_t*, const CUmemAllocationProp*, int))

// Entry points weft uses when the driver has them (CUDA 12.4 and newer),
// resolved at CUDA version 12040; NULL otherwise.
#define WEFT_CUDA_OPTIONAL_FUNCS(X)                                            \
  X(cuModuleGetFunctionCount, CUresult, (unsigned int*, CUmodule))             \
  X(cuModuleEnumerateFunctions, CUresult, (CUfunction*, unsigned int, CUmodule)) \
  X(cuFuncLoad, CUresult, (CUfunction))                                       \
  X(cuStreamBatchMemOp, CUresult, (CUstream, unsigned int, weft_memop*, unsigned int))

// Entry points of multicast objects (NVLink SHARP), which CUDA 12.1
// introduced: resolved at CUDA version 12010 (the _v12010 variants of
// cudaTypedefs.h); NULL with an older driver, and weft_cuda_has_multicast
// says so. Signatures from cuda.h.
#define WEFT_CUDA_MULTICAST_FUNCS(X)                                                                    \
  X(cuMulticastCreate, CUresult, (CUmemGenericAllocationHandle*, const CUmulticastObjectProp*))         \
  X(cuMulticastAddDevice, CUresult, (CUmemGenericAllocationHandle, CUdevice))                           \
  X(cuMulticastBindMem, CUresult,                                                                       \
    (CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle, size_t, size_t, unsigned long long)) \
  X(cuMulticastUnbind, CUresult, (CUmemGenericAllocationHandle, CUdevice, size_t, size_t))              \
  X(cuMulticastGetGranularity, CUresult, (size_t*, const CUmulticastObjectProp*, int))

#define WEFT_DECLARE(name, ret, params) static ret(*p_##name) params;
WEFT_CUDA_FUNCS(WEFT_DECLARE)
WEFT_CUDA_OPTIONAL_FUNCS(WEFT_DECLARE)
WEFT_CUDA_MULTICAST_FUNCS(WEFT_DECLARE)
#undef WEFT_DECLARE

#define WEFT_CUDA_API_VERSION 12000

typedef CUresult (*weft_gpa_fn)(const char*, void**, int, cuuint64_t, int*);

static void* weft_cuda_lib;
static char weft_cuda_err[512];

const char* weft_cuda_load_error(void) { return weft_cuda_err; }

// weft_cuda_load opens path and resolves every entry point. It is called
// once (the Go side holds a sync.Once). On failure weft_cuda_load_error()
// describes what went wrong and *cu receives a CUresult where one exists.
int weft_cuda_load(const char* path, CUresult* cu) {
  *cu = 0;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(weft_cuda_err, sizeof weft_cuda_err, "%s", e ? e : path);
    return WEFT_LOAD_DLOPEN;
  }
  weft_gpa_fn gpa = (weft_gpa_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (gpa == NULL) {
    snprintf(weft_cuda_err, sizeof weft_cuda_err, "%s has no cuGetProcAddress_v2", path);
    dlclose(lib);
    return WEFT_LOAD_NO_GPA;
  }
  CUresult r;
  int status;
#define WEFT_RESOLVE(name, ret, params)                                         \
  status = 0;                                                                        \
  r = gpa(#name, (void**)&p_##name, WEFT_CUDA_API_VERSION, 0 /* CU_GET_PROC_ADDRESS_DEFAULT */, &status); \
  if (r != 0 || p_##name == NULL) {                                                  \
    snprintf(weft_cuda_err, sizeof weft_cuda_err, "cuGetProcAddress_v2(%s, 12000): result %d, status %d", \
             #name, r, status);                                                      \
    *cu = r;                                                                         \
    return WEFT_LOAD_SYMBOL;                                                         \
  }
  WEFT_CUDA_FUNCS(WEFT_RESOLVE)
#undef WEFT_RESOLVE
#define WEFT_RESOLVE_OPTIONAL(name, ret, params)                          \
  if (gpa(#name, (void**)&p_##name, 12040, 0, &status) != 0) p_##name = NULL;
  WEFT_CUDA_OPTIONAL_FUNCS(WEFT_RESOLVE_OPTIONAL)
#undef WEFT_RESOLVE_OPTIONAL
#define WEFT_RESOLVE_MULTICAST(name, ret, params) \
  if (gpa(#name, (void**)&p_##name, 12010, 0, &status) != 0) p_##name = NULL;
  WEFT_CUDA_MULTICAST_FUNCS(WEFT_RESOLVE_MULTICAST)
#undef WEFT_RESOLVE_MULTICAST
  weft_cuda_lib = lib;
  return WEFT_LOAD_OK;
}

int weft_cuda_loaded(void) { return weft_cuda_lib != NULL; }

const char* weft_cuGetErrorName(CUresult r) {
  const char* s = NULL;
  if (p_cuGetErrorName == NULL || p_cuGetErrorName(r, &s) != 0) return NULL;
  return s;
}

const char* weft_cuGetErrorString(CUresult r) {
  const char* s = NULL;
  if (p_cuGetErrorString == NULL || p_cuGetErrorString(r, &s) != 0) return NULL;
  return s;
}

// ---- no context needed --------------------------------------------------------

CUresult weft_cuInit(void) { return p_cuInit(0); }
CUresult weft_cuDriverGetVersion(int* v) { return p_cuDriverGetVersion(v); }
CUresult weft_cuDeviceGetCount(int* n) { return p_cuDeviceGetCount(n); }
CUresult weft_cuDeviceGet(CUdevice* d, int ordinal) { return p_cuDeviceGet(d, ordinal); }
CUresult weft_cuDeviceGetName(char* name, int len, CUdevice d) { return p_cuDeviceGetName(name, len, d); }
CUresult weft_cuDeviceGetAttribute(int* v, int attr, CUdevice d) { return p_cuDeviceGetAttribute(v, attr, d); }
CUresult weft_cuDeviceGetUuid(void* uuid, CUdevice d) { return p_cuDeviceGetUuid((CUuuid*)uuid, d); }
CUresult weft_cuDeviceGetPCIBusId(char* id, int len, CUdevice d) { return p_cuDeviceGetPCIBusId(id, len, d); }
CUresult weft_cuDeviceTotalMem(size_t* bytes, CUdevice d) { return p_cuDeviceTotalMem(bytes, d); }
CUresult weft_cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) {
  return p_cuDeviceCanAccessPeer(can, d, peer);
}
CUresult weft_cuDeviceGetP2PAttribute(int* v, int attr, CUdevice src, CUdevice dst) {
  return p_cuDeviceGetP2PAttribute(v, attr, src, dst);
}
CUresult weft_cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) { return p_cuDevicePrimaryCtxRetain(ctx, d); }
CUresult weft_cuDevicePrimaryCtxRelease(CUdevice d) { return p_cuDevicePrimaryCtxRelease(d); }

// ---- context made current in the same call ---------------------------------

#define CUR(ctx)                         \
  do {                                   \
    CUresult r_ = p_cuCtxSetCurrent(ctx); \
    if (r_ != 0) return r_;              \
  } while (0)

CUresult weft_cuCtxSynchronize(CUcontext ctx) { CUR(ctx); return p_cuCtxSynchronize(); }

CUresult weft_cuCtxEnablePeerAccess(CUcontext ctx, CUcontext peer) {
  CUR(ctx);
  return p_cuCtxEnablePeerAccess(peer, 0);
}

CUresult weft_cuMemAlloc(CUcontext ctx, CUdeviceptr* p, size_t n) { CUR(ctx); return p_cuMemAlloc(p, n); }
CUresult weft_cuMemFree(CUcontext ctx, CUdeviceptr p) { CUR(ctx); return p_cuMemFree(p); }
CUresult weft_cuMemGetInfo(CUcontext ctx, size_t* free, size_t* total) { CUR(ctx); return p_cuMemGetInfo(free, total); }

CUresult weft_cuMemHostAlloc(CUcontext ctx, void** p, size_t n, unsigned int flags) {
  CUR(ctx);
  return p_cuMemHostAlloc(p, n, flags);
}

CUresult weft_cuMemHostGetDevicePointer(CUcontext ctx, CUdeviceptr* d, void* p) {
  CUR(ctx);
  return p_cuMemHostGetDevicePointer(d, p, 0);
}

CUresult weft_cuMemFreeHost(CUcontext ctx, void* p) { CUR(ctx); return p_cuMemFreeHost(p); }

CUresult weft_cuMemcpyHtoD(CUcontext ctx, CUdeviceptr dst, const void* src, size_t n) {
  CUR(ctx);
  return p_cuMemcpyHtoD(dst, src, n);
}

CUresult weft_cuMemcpyDtoH(CUcontext ctx, void* dst, CUdeviceptr src, size_t n) {
  CUR(ctx);
  return p_cuMemcpyDtoH(dst, src, n);
}

CUresult weft_cuMemcpyDtoD(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  CUR(ctx);
  return p_cuMemcpyDtoD(dst, src, n);
}

CUresult weft_cuMemcpyAsync(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  CUR(ctx);
  return p_cuMemcpyAsync(dst, src, n, s);
}

CUresult weft_cuMemcpyDtoHAsync(CUcontext ctx, void* dst, CUdeviceptr src, size_t n, CUstream s) {
  CUR(ctx);
  return p_cuMemcpyDtoHAsync(dst, src, n, s);
}

CUresult weft_cuMemcpyHtoDAsync(CUcontext ctx, CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  CUR(ctx);
  return p_cuMemcpyHtoDAsync(dst, src, n, s);
}

CUresult weft_cuMemHostRegister(CUcontext ctx, void* p, size_t n, unsigned int flags) {
  CUR(ctx);
  return p_cuMemHostRegister(p, n, flags);
}

CUresult weft_cuMemHostUnregister(CUcontext ctx, void* p) { CUR(ctx); return p_cuMemHostUnregister(p); }

CUresult weft_cuMemsetD8(CUcontext ctx, CUdeviceptr dst, unsigned char v, size_t n) {
  CUR(ctx);
  return p_cuMemsetD8(dst, v, n);
}

// Queries run in the relaxed capture mode (CU_STREAM_CAPTURE_MODE_RELAXED,
// 2) on the calling thread and restore its mode after: weft queries only
// work it queued outside any capture, often from its own threads (the
// stream-operation watchdog, Synchronize, quiesce), and in the default global
// mode such a query while any thread captures a graph is a prohibited call
// that fails and invalidates that thread's capture (seen on H100: a
// watchdog's cuEventQuery broke cbench's captured AllGather). The pointer
// and IPC calls below run so too: the copy-engine point-to-point path
// exports and maps a receiver's buffer at the call, which may be inside an
// application's capture (they queue nothing on any stream).
#define RELAXED_QUERY(call)                                      \
  do {                                                           \
    int mode_ = 2;                                               \
    CUresult r_ = p_cuThreadExchangeStreamCaptureMode(&mode_);   \
    if (r_ != 0) return r_;                                      \
    r_ = (call);                                                 \
    p_cuThreadExchangeStreamCaptureMode(&mode_);                 \
    return r_;                                                   \
  } while (0)
CUresult weft_cuMemGetAddressRange(CUcontext ctx, CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  CUR(ctx);
  RELAXED_QUERY(p_cuMemGetAddressRange(base, size, p));
}

CUresult weft_cuPointerGetAttribute(CUcontext ctx, void* data, int attr, CUdeviceptr p) {
  CUR(ctx);
  RELAXED_QUERY(p_cuPointerGetAttribute(data, attr, p));
}

CUresult weft_cuIpcGetMemHandle(CUcontext ctx, void* handle, CUdeviceptr p) {
  CUR(ctx);
  RELAXED_QUERY(p_cuIpcGetMemHandle((CUipcMemHandle*)handle, p));
}

CUresult weft_cuIpcOpenMemHandle(CUcontext ctx, CUdeviceptr* p, const void* handle, unsigned int flags) {
  CUR(ctx);
  CUipcMemHandle h;
  memcpy(&h, handle, sizeof h);
  RELAXED_QUERY(p_cuIpcOpenMemHandle(p, h, flags));
}

CUresult weft_cuIpcCloseMemHandle(CUcontext ctx, CUdeviceptr p) { CUR(ctx); return p_cuIpcCloseMemHandle(p); }

CUresult weft_cuStreamCreate(CUcontext ctx, CUstream* s, unsigned int flags) {
  CUR(ctx);
  return p_cuStreamCreate(s, flags);
}
CUresult weft_cuStreamQuery(CUcontext ctx, CUstream s) {
  CUR(ctx);
  RELAXED_QUERY(p_cuStreamQuery(s));
}
CUresult weft_cuStreamSynchronize(CUcontext ctx, CUstream s) { CUR(ctx); return p_cuStreamSynchronize(s); }
CUresult weft_cuStreamDestroy(CUcontext ctx, CUstream s) { CUR(ctx); return p_cuStreamDestroy(s); }
CUresult weft_cuStreamWaitEvent(CUcontext ctx, CUstream s, CUevent e) { CUR(ctx); return p_cuStreamWaitEvent(s, e, 0); }
CUresult weft_cuStreamWaitValue64(CUcontext ctx, CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned int flags) {
  CUR(ctx);
  return p_cuStreamWaitValue64(s, addr, v, flags);
}
CUresult weft_cuStreamWriteValue64(CUcontext ctx, CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned int flags) {
  CUR(ctx);
  return p_cuStreamWriteValue64(s, addr, v, flags);
}

_Static_assert(sizeof(weft_memop) == 48, "weft_memop must be CUstreamBatchMemOpParams' 48 bytes");

// weft_queue_ops queues n stream operations in list order, each on
// streams[op.lane], in one call into C (one context switch for the batch).
// With batch set and cuStreamBatchMemOp resolved, consecutive waits and
// writes on the same lane (at most WEFT_MEMOP_BATCH) go in one
// cuStreamBatchMemOp. On failure *failed is the index of the operation
// (the first of its batch) whose call failed.
#define WEFT_MEMOP_BATCH 16
CUresult weft_queue_ops(CUcontext ctx, const CUstream* streams, const weft_stream_op* ops, int n, int batch, int* failed) {
  CUR(ctx);
  *failed = -1;
  for (int i = 0; i < n; i++) {
    const weft_stream_op* op = &ops[i];
    CUstream s = streams[op->lane];
    CUresult r = 0;
    if (op->kind == 1) {
      if (op->bytes > 0) r = p_cuMemcpyAsync(op->dst, op->src, (size_t)op->bytes, s);
    } else if (op->kind == 4) {
      if (op->bytes > 0) {
        struct {
          unsigned long long dst, src, src2;
          long long bytes;
        } params = {op->dst, op->src, op->src2, op->bytes};
        void* args[1] = {&params};
        r = p_cuLaunchKernel((CUfunction)op->fn, op->grid, 1, 1, op->block, 1, 1, 0, s, args, NULL);
      }
    } else if (batch && p_cuStreamBatchMemOp != NULL) {
      weft_memop m[WEFT_MEMOP_BATCH];
      int k = 0;
      int j = i;
      for (; j < n && k < WEFT_MEMOP_BATCH && (ops[j].kind == 2 || ops[j].kind == 3) && ops[j].lane == op->lane; j++, k++) {
        memset(&m[k], 0, sizeof m[k]);
        m[k].operation = ops[j].kind == 2 ? 4 : 5;
        m[k].address = ops[j].dst;
        m[k].value64 = ops[j].value;
        m[k].flags = ops[j].kind == 2 ? 1 /* CU_STREAM_WAIT_VALUE_EQ */ : 0;
      }
      r = p_cuStreamBatchMemOp(s, (unsigned int)k, m, 0);
      if (r != 0) {
        *failed = i;
        return r;
      }
      i = j - 1;
      continue;
    } else if (op->kind == 2) {
      r = p_cuStreamWaitValue64(s, op->dst, op->value, 1 /* CU_STREAM_WAIT_VALUE_EQ */);
    } else {
      r = p_cuStreamWriteValue64(s, op->dst, op->value, 0);
    }
    if (r != 0) {
      *failed = i;
      return r;
    }
  }
  return 0;
}

// weft_signal64 queues the two stream writes of a port-channel signal in
// one call: value0 at addr0 (skipped when addr0 is 0), then value1 at addr1.
CUresult weft_signal64(CUcontext ctx, CUstream s, CUdeviceptr addr0, cuuint64_t value0, CUdeviceptr addr1,
                       cuuint64_t value1) {
  CUR(ctx);
  if (addr0 != 0) {
    CUresult r = p_cuStreamWriteValue64(s, addr0, value0, 0);
    if (r != 0) return r;
  }
  return p_cuStreamWriteValue64(s, addr1, value1, 0);
}

CUresult weft_cuEventCreate(CUcontext ctx, CUevent* e, unsigned int flags) { CUR(ctx); return p_cuEventCreate(e, flags); }
CUresult weft_cuEventRecord(CUcontext ctx, CUevent e, CUstream s) { CUR(ctx); return p_cuEventRecord(e, s); }

// weft_record_unless_capturing records e on s unless s is capturing a
// graph (a capture runs nothing; the graph's launch is recorded instead).
// *recorded says whether it did.
CUresult weft_record_unless_capturing(CUcontext ctx, CUevent e, CUstream s, int* recorded) {
  CUR(ctx);
  *recorded = 0;
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  CUresult r = p_cuStreamIsCapturing(s, &status);
  if (r != 0) return r;
  if (status != 0) return 0;
  r = p_cuEventRecord(e, s);
  if (r == 0) *recorded = 1;
  return r;
}

// weft_stream_is_capturing sets *capturing to whether s is capturing a
// graph (cuStreamIsCapturing: active, or invalidated and not yet ended).
CUresult weft_stream_is_capturing(CUcontext ctx, CUstream s, int* capturing) {
  CUR(ctx);
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  CUresult r = p_cuStreamIsCapturing(s, &status);
  *capturing = r == 0 && status != 0;
  return r;
}

// weft_stream_after makes the work queued on s from now on wait for the
// work queued on prev so far: an event recorded on prev now, waited for on
// s and destroyed at once (the driver frees it once the wait is done).
// Streams that capture a graph: with join 0 it orders nothing while either
// stream captures; with join 1 it orders them when both capture or neither
// does (between two capturing streams the wait becomes a dependency of the
// graph), and nothing when only one does. *ordered says whether it did.
CUresult weft_stream_after(CUcontext ctx, CUstream s, CUstream prev, int join, int* ordered) {
  CUR(ctx);
  *ordered = 0;
  int ss = 0, ps = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  CUresult r = p_cuStreamIsCapturing(s, &ss);
  if (r == 0) r = p_cuStreamIsCapturing(prev, &ps);
  if (r != 0) return r;
  if (join ? (ss != 0) != (ps != 0) : (ss != 0 || ps != 0)) return 0;
  CUevent e;
  r = p_cuEventCreate(&e, 0x2 /* CU_EVENT_DISABLE_TIMING */);
  if (r != 0) return r;
  r = p_cuEventRecord(e, prev);
  if (r == 0) r = p_cuStreamWaitEvent(s, e, 0);
  CUresult d = p_cuEventDestroy(e);
  if (r == 0) r = d;
  if (r == 0) *ordered = 1;
  return r;
}

// weft_wait_unless_capturing makes s wait for e unless s is capturing a
// graph. *waited says whether it did.
CUresult weft_wait_unless_capturing(CUcontext ctx, CUstream s, CUevent e, int* waited) {
  CUR(ctx);
  *waited = 0;
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  CUresult r = p_cuStreamIsCapturing(s, &status);
  if (r != 0 || status != 0) return r;
  r = p_cuStreamWaitEvent(s, e, 0);
  if (r == 0) *waited = 1;
  return r;
}

CUresult weft_cuEventQuery(CUcontext ctx, CUevent e) {
  CUR(ctx);
  RELAXED_QUERY(p_cuEventQuery(e));
}
CUresult weft_cuEventSynchronize(CUcontext ctx, CUevent e) { CUR(ctx); return p_cuEventSynchronize(e); }
CUresult weft_cuEventElapsedTime(CUcontext ctx, float* ms, CUevent start, CUevent end) {
  CUR(ctx);
  return p_cuEventElapsedTime(ms, start, end);
}
CUresult weft_cuEventDestroy(CUcontext ctx, CUevent e) { CUR(ctx); return p_cuEventDestroy(e); }

CUresult weft_cuStreamBeginCapture(CUcontext ctx, CUstream s, int mode) { CUR(ctx); return p_cuStreamBeginCapture(s, mode); }
CUresult weft_cuStreamEndCapture(CUcontext ctx, CUstream s, CUgraph* g) { CUR(ctx); return p_cuStreamEndCapture(s, g); }
CUresult weft_cuGraphInstantiateWithFlags(CUcontext ctx, CUgraphExec* e, CUgraph g, unsigned long long flags) {
  CUR(ctx);
  return p_cuGraphInstantiateWithFlags(e, g, flags);
}
CUresult weft_cuGraphLaunch(CUcontext ctx, CUgraphExec e, CUstream s) { CUR(ctx); return p_cuGraphLaunch(e, s); }
CUresult weft_cuGraphExecDestroy(CUcontext ctx, CUgraphExec e) { CUR(ctx); return p_cuGraphExecDestroy(e); }
CUresult weft_cuGraphDestroy(CUcontext ctx, CUgraph g) { CUR(ctx); return p_cuGraphDestroy(g); }

// weft_cuModuleLoadData loads a module and then every function in it.
// Under lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA
// 12.2) a function is otherwise loaded at its first launch, and loading may
// wait for kernels already running in the context: a kernel that spins
// until a kernel launched after it runs would then never be released.
// *eager is 1 when the functions were loaded, 0 when the driver lacks the
// entry points (before CUDA 12.4).
CUresult weft_cuModuleLoadData(CUcontext ctx, CUmodule* m, const void* image, int* eager) {
  CUR(ctx);
  *eager = 0;
  CUresult r = p_cuModuleLoadData(m, image);
  if (r != 0) return r;
  if (p_cuModuleGetFunctionCount == NULL || p_cuModuleEnumerateFunctions == NULL || p_cuFuncLoad == NULL) return 0;
  unsigned int n = 0;
  if ((r = p_cuModuleGetFunctionCount(&n, *m)) != 0) goto fail;
  if (n > 0) {
    CUfunction* fs = malloc(n * sizeof *fs);
    if (fs == NULL) {
      r = 2;  // CUDA_ERROR_OUT_OF_MEMORY
      goto fail;
    }
    r = p_cuModuleEnumerateFunctions(fs, n, *m);
    for (unsigned int i = 0; r == 0 && i < n; i++) r = p_cuFuncLoad(fs[i]);
    free(fs);
    if (r != 0) goto fail;
  }
  *eager = 1;
  return 0;
fail:
  p_cuModuleUnload(*m);
  *m = NULL;
  return r;
}
CUresult weft_cuModuleGetFunction(CUcontext ctx, CUfunction* f, CUmodule m, const char* name) {
  CUR(ctx);
  return p_cuModuleGetFunction(f, m, name);
}
CUresult weft_cuModuleUnload(CUcontext ctx, CUmodule m) { CUR(ctx); return p_cuModuleUnload(m); }
CUresult weft_cuFuncSetAttribute(CUcontext ctx, CUfunction f, int attr, int v) { CUR(ctx); return p_cuFuncSetAttribute(f, attr, v); }
CUresult weft_cuFuncGetAttribute(CUcontext ctx, int* v, int attr, CUfunction f) { CUR(ctx); return p_cuFuncGetAttribute(v, attr, f); }
CUresult weft_cuOccupancyMaxActiveBlocksPerMultiprocessor(CUcontext ctx, int* n, CUfunction f, int threads, size_t shared) {
  CUR(ctx);
  return p_cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, threads, shared);
}

// weft_cuLaunchKernel launches f with one kernel parameter: the struct whose
// bytes are at params (NULL for a kernel without parameters).
CUresult weft_cuLaunchKernel(CUcontext ctx, CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s,
                             void* params) {
  CUR(ctx);
  void* args[1] = {params};
  return p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params ? args : NULL, NULL);
}

// ---- virtual memory management ----------------------------------------------

CUresult weft_cuMemGetAllocationGranularity(CUcontext ctx, size_t* g, int device, int handleTypes, int option) {
  CUR(ctx);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
  prop.requestedHandleTypes = handleTypes;
  prop.location.type = 1;  // CU_MEM_LOCATION_TYPE_DEVICE
  prop.location.id = device;
  return p_cuMemGetAllocationGranularity(g, &prop, option);
}

CUresult weft_cuMemCreate(CUcontext ctx, CUmemGenericAllocationHandle* h, size_t size, int device, int handleTypes) {
  CUR(ctx);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = 1;
  prop.requestedHandleTypes = handleTypes;
  prop.location.type = 1;
  prop.location.id = device;
  return p_cuMemCreate(h, size, &prop, 0);
}

CUresult weft_cuMemRelease(CUcontext ctx, CUmemGenericAllocationHandle h) { CUR(ctx); return p_cuMemRelease(h); }

CUresult weft_cuMemExportToShareableHandleFD(CUcontext ctx, int* fd, CUmemGenericAllocationHandle h) {
  CUR(ctx);
  return p_cuMemExportToShareableHandle(fd, h, 1 /* CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR */, 0);
}

CUresult weft_cuMemImportFromShareableHandleFD(CUcontext ctx, CUmemGenericAllocationHandle* h, int fd) {
  CUR(ctx);
  // The POSIX fd travels in the pointer-sized argument itself.
  return p_cuMemImportFromShareableHandle(h, (void*)(uintptr_t)fd, 1);
}

CUresult weft_cuMemAddressReserve(CUcontext ctx, CUdeviceptr* p, size_t size, size_t align) {
  CUR(ctx);
  return p_cuMemAddressReserve(p, size, align, 0, 0);
}

CUresult weft_cuMemAddressFree(CUcontext ctx, CUdeviceptr p, size_t size) { CUR(ctx); return p_cuMemAddressFree(p, size); }

CUresult weft_cuMemMap(CUcontext ctx, CUdeviceptr p, size_t size, CUmemGenericAllocationHandle h) {
  CUR(ctx);
  return p_cuMemMap(p, size, 0, h, 0);
}

CUresult weft_cuMemUnmap(CUcontext ctx, CUdeviceptr p, size_t size) { CUR(ctx); return p_cuMemUnmap(p, size); }

CUresult weft_cuMemSetAccess(CUcontext ctx, CUdeviceptr p, size_t size, const int* devices, int n) {
  CUR(ctx);
  CUmemAccessDesc desc[64];
  if (n > 64) return 1;  // CUDA_ERROR_INVALID_VALUE
  for (int i = 0; i < n; i++) {
    desc[i].location.type = 1;
    desc[i].location.id = devices[i];
    desc[i].flags = 3;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
  }
  return p_cuMemSetAccess(p, size, desc, (size_t)n);
}

// ---- multicast objects (CUDA 12.1+) ------------------------------------------

// weft_cuda_has_multicast reports whether the driver has every multicast
// entry point; the trampolines below must not be called otherwise.
int weft_cuda_has_multicast(void) {
  return p_cuMulticastCreate != NULL && p_cuMulticastAddDevice != NULL && p_cuMulticastBindMem != NULL &&
         p_cuMulticastUnbind != NULL && p_cuMulticastGetGranularity != NULL;
}

static CUmulticastObjectProp weft_mc_prop(unsigned int numDevices, size_t size, unsigned long long handleTypes) {
  CUmulticastObjectProp prop;
  memset(&prop, 0, sizeof prop);
  prop.numDevices = numDevices;
  prop.size = size;
  prop.handleTypes = handleTypes;
  prop.flags = 0;
  return prop;
}

CUresult weft_cuMulticastGetGranularity(CUcontext ctx, size_t* g, unsigned int numDevices, size_t size,
                                        unsigned long long handleTypes, int option) {
  CUR(ctx);
  CUmulticastObjectProp prop = weft_mc_prop(numDevices, size, handleTypes);
  return p_cuMulticastGetGranularity(g, &prop, option);
}

CUresult weft_cuMulticastCreate(CUcontext ctx, CUmemGenericAllocationHandle* h, unsigned int numDevices, size_t size,
                                unsigned long long handleTypes) {
  CUR(ctx);
  CUmulticastObjectProp prop = weft_mc_prop(numDevices, size, handleTypes);
  return p_cuMulticastCreate(h, &prop);
}

CUresult weft_cuMulticastAddDevice(CUcontext ctx, CUmemGenericAllocationHandle h, CUdevice dev) {
  CUR(ctx);
  return p_cuMulticastAddDevice(h, dev);
}

CUresult weft_cuMulticastBindMem(CUcontext ctx, CUmemGenericAllocationHandle mc, size_t mcOffset,
                                 CUmemGenericAllocationHandle mem, size_t memOffset, size_t size) {
  CUR(ctx);
  return p_cuMulticastBindMem(mc, mcOffset, mem, memOffset, size, 0);
}

CUresult weft_cuMulticastUnbind(CUcontext ctx, CUmemGenericAllocationHandle mc, CUdevice dev, size_t mcOffset,
                                size_t size) {
  CUR(ctx);
  return p_cuMulticastUnbind(mc, dev, mcOffset, size);
}

// weft_cuCtxSetCurrent_addr returns the resolved cuCtxSetCurrent, for C
// helpers of other packages (internal/nccl) that must make a context
// current in the same call as the library call that needs it.
void* weft_cuCtxSetCurrent_addr(void) { return (void*)p_cuCtxSetCurrent; }
