//go:build cgo

// nccl.c: NCCL loaded with dlopen, called through the function pointers
// below. Device addresses, communicators and streams arrive as uintptr_t.

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "weft_nccl.h"

#define WEFT_NCCL_FUNCS(X)                                                                                  \
  X(ncclGetVersion, ncclResult_t, (int*))                                                                   \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId*))                                                         \
  X(ncclCommInitRank, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int))                                  \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t))                                                            \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t))                                                              \
  X(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t, ncclResult_t*))                                       \
  X(ncclGetErrorString, const char*, (ncclResult_t))                                                        \
  X(ncclAllReduce, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)) \
  X(ncclAllGather, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))     \
  X(ncclReduceScatter, ncclResult_t,                                                                        \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                    \
  X(ncclBroadcast, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)) \
  X(ncclSend, ncclResult_t, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))            \
  X(ncclRecv, ncclResult_t, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                  \
  X(ncclGroupStart, ncclResult_t, (void))                                                                   \
  X(ncclGroupEnd, ncclResult_t, (void))

#define WEFT_DECLARE(name, ret, params) static ret(*p_##name) params;
WEFT_NCCL_FUNCS(WEFT_DECLARE)
#undef WEFT_DECLARE
// ncclGetLastError exists from NCCL 2.13; optional.
static const char* (*p_ncclGetLastError)(ncclComm_t);

static char weft_nccl_err[512];
const char* weft_nccl_load_error(void) { return weft_nccl_err; }

int weft_nccl_load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(weft_nccl_err, sizeof weft_nccl_err, "%s", e ? e : path);
    return 1;
  }
#define WEFT_RESOLVE(name, ret, params)                                                   \
  *(void**)&p_##name = dlsym(lib, #name);                                                 \
  if (p_##name == NULL) {                                                                 \
    snprintf(weft_nccl_err, sizeof weft_nccl_err, "%s: symbol %s not found", path, #name); \
    dlclose(lib);                                                                         \
    return 2;                                                                             \
  }
  WEFT_NCCL_FUNCS(WEFT_RESOLVE)
#undef WEFT_RESOLVE
  *(void**)&p_ncclGetLastError = dlsym(lib, "ncclGetLastError");
  return 0;
}

#define COMM(c) ((ncclComm_t)(c))
#define PTR(p) ((void*)(p))
#define STREAM(s) ((cudaStream_t)(s))

const char* weft_ncclGetErrorString(ncclResult_t r) { return p_ncclGetErrorString ? p_ncclGetErrorString(r) : NULL; }
const char* weft_ncclGetLastError(uintptr_t comm) { return p_ncclGetLastError ? p_ncclGetLastError(COMM(comm)) : NULL; }
ncclResult_t weft_ncclGetVersion(int* v) { return p_ncclGetVersion(v); }
ncclResult_t weft_ncclGetUniqueId(void* id) { return p_ncclGetUniqueId((ncclUniqueId*)id); }

// weft_ncclCommInitRank makes ctx current on this thread with the driver's
// cuCtxSetCurrent (setCurrent, from internal/cuda) and then calls
// ncclCommInitRank, which binds the communicator to the current device.
// A failure of cuCtxSetCurrent is returned in *cuResult with
// ncclUnhandledCudaError.
ncclResult_t weft_ncclCommInitRank(uintptr_t setCurrent, uintptr_t ctx, uintptr_t* comm, int nranks, const void* id,
                                   int rank, int* cuResult) {
  *cuResult = 0;
  if (setCurrent != 0) {
    int (*set)(CUcontext) = (int (*)(CUcontext))setCurrent;
    if ((*cuResult = set((CUcontext)ctx)) != 0) return 1;  // ncclUnhandledCudaError
  }
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclComm_t c = NULL;
  ncclResult_t r = p_ncclCommInitRank(&c, nranks, uid, rank);
  *comm = (uintptr_t)c;
  return r;
}

ncclResult_t weft_ncclCommDestroy(uintptr_t comm) { return p_ncclCommDestroy(COMM(comm)); }
ncclResult_t weft_ncclCommAbort(uintptr_t comm) { return p_ncclCommAbort(COMM(comm)); }
ncclResult_t weft_ncclCommGetAsyncError(uintptr_t comm, ncclResult_t* async) {
  return p_ncclCommGetAsyncError(COMM(comm), async);
}

ncclResult_t weft_ncclAllReduce(uintptr_t send, uintptr_t recv, size_t count, int dt, int op, uintptr_t comm,
                                uintptr_t stream) {
  return p_ncclAllReduce(PTR(send), PTR(recv), count, dt, op, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclAllGather(uintptr_t send, uintptr_t recv, size_t sendcount, int dt, uintptr_t comm,
                                uintptr_t stream) {
  return p_ncclAllGather(PTR(send), PTR(recv), sendcount, dt, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclReduceScatter(uintptr_t send, uintptr_t recv, size_t recvcount, int dt, int op, uintptr_t comm,
                                    uintptr_t stream) {
  return p_ncclReduceScatter(PTR(send), PTR(recv), recvcount, dt, op, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclBroadcast(uintptr_t send, uintptr_t recv, size_t count, int dt, int root, uintptr_t comm,
                                uintptr_t stream) {
  return p_ncclBroadcast(PTR(send), PTR(recv), count, dt, root, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclSend(uintptr_t send, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
  return p_ncclSend(PTR(send), count, dt, peer, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclRecv(uintptr_t recv, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
  return p_ncclRecv(PTR(recv), count, dt, peer, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclGroupStart(void) { return p_ncclGroupStart(); }
ncclResult_t weft_ncclGroupEnd(void) { return p_ncclGroupEnd(); }
