//go:build cgo

// nccl.c: NCCL loaded with dlopen, called through the function pointers
// below. Device addresses, communicators and streams arrive as uintptr_t.

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "weft_nccl.h"
#include "nccl_funcs.h"  // WEFT_NCCL_FUNCS, WEFT_NCCL_OPTIONAL: the entry points, listed once

#define WEFT_DECLARE(name, ret, params) static ret(*p_##name) params;
WEFT_NCCL_FUNCS(WEFT_DECLARE)
WEFT_NCCL_OPTIONAL(WEFT_DECLARE)
#undef WEFT_DECLARE

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
#define WEFT_RESOLVE_OPTIONAL(name, ret, params) *(void**)&p_##name = dlsym(lib, #name);
  WEFT_NCCL_OPTIONAL(WEFT_RESOLVE_OPTIONAL)
#undef WEFT_RESOLVE_OPTIONAL
  return 0;
}

// weft_nccl_has reports whether the loaded library exports an optional
// entry point (1) or not (0).
int weft_nccl_has(const char* name) {
#define WEFT_HAS(fn, ret, params) \
  if (strcmp(name, #fn) == 0) return p_##fn != NULL;
  WEFT_NCCL_OPTIONAL(WEFT_HAS)
#undef WEFT_HAS
  return 0;
}

// WEFT_NCCL_MISSING is returned by the wrapper of an optional entry point
// that the loaded library lacks (not an ncclResult_t value).
#define WEFT_NCCL_MISSING (-1)

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
// ctx 0 keeps the thread's current context. A failure of cuCtxSetCurrent
// is returned in *cuResult with ncclUnhandledCudaError.
ncclResult_t weft_ncclCommInitRank(uintptr_t setCurrent, uintptr_t ctx, uintptr_t* comm, int nranks, const void* id,
                                   int rank, int* cuResult) {
  *cuResult = 0;
  if (setCurrent != 0 && ctx != 0) {
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

// weft_ncclCommInitRankConfig is weft_ncclCommInitRank with a config (the
// 2.18 prefix of ncclConfig_t, see weft_nccl.h).
ncclResult_t weft_ncclCommInitRankConfig(uintptr_t setCurrent, uintptr_t ctx, uintptr_t* comm, int nranks,
                                         const void* id, int rank, weft_ncclConfig* config, int* cuResult) {
  *cuResult = 0;
  *comm = 0;
  if (p_ncclCommInitRankConfig == NULL) return WEFT_NCCL_MISSING;
  if (setCurrent != 0 && ctx != 0) {
    int (*set)(CUcontext) = (int (*)(CUcontext))setCurrent;
    if ((*cuResult = set((CUcontext)ctx)) != 0) return 1;  // ncclUnhandledCudaError
  }
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclComm_t c = NULL;
  ncclResult_t r = p_ncclCommInitRankConfig(&c, nranks, uid, rank, config);
  *comm = (uintptr_t)c;
  return r;
}

ncclResult_t weft_ncclCommDestroy(uintptr_t comm) { return p_ncclCommDestroy(COMM(comm)); }
ncclResult_t weft_ncclCommAbort(uintptr_t comm) { return p_ncclCommAbort(COMM(comm)); }
ncclResult_t weft_ncclCommGetAsyncError(uintptr_t comm, ncclResult_t* async) {
  return p_ncclCommGetAsyncError(COMM(comm), async);
}

// weft_ncclRedOpCreatePreMulSum makes a PreMulSum operator of comm. For
// residence 1 (ncclScalarHostImmediate) scalar holds the element's bits
// (little-endian, in the low bytes); NCCL copies the value at creation.
// For residence 0 (ncclScalarDevice) scalar is the device address of the
// element, read by every collective that uses the operator.
ncclResult_t weft_ncclRedOpCreatePreMulSum(int* op, uintptr_t scalar, int dt, int residence, uintptr_t comm) {
  if (p_ncclRedOpCreatePreMulSum == NULL) return WEFT_NCCL_MISSING;
  uint64_t bits = (uint64_t)scalar;
  void* p = residence == 1 ? (void*)&bits : PTR(scalar);
  ncclRedOp_t o = 0;
  ncclResult_t r = p_ncclRedOpCreatePreMulSum(&o, p, dt, residence, COMM(comm));
  *op = o;
  return r;
}
ncclResult_t weft_ncclRedOpDestroy(int op, uintptr_t comm) {
  if (p_ncclRedOpDestroy == NULL) return WEFT_NCCL_MISSING;
  return p_ncclRedOpDestroy(op, COMM(comm));
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
ncclResult_t weft_ncclReduce(uintptr_t send, uintptr_t recv, size_t count, int dt, int op, int root, uintptr_t comm,
                             uintptr_t stream) {
  return p_ncclReduce(PTR(send), PTR(recv), count, dt, op, root, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclAlltoAll(uintptr_t send, uintptr_t recv, size_t count, int dt, uintptr_t comm, uintptr_t stream) {
  if (p_ncclAlltoAll == NULL) return WEFT_NCCL_MISSING;
  return p_ncclAlltoAll(PTR(send), PTR(recv), count, dt, COMM(comm), STREAM(stream));
}
// weft_ncclAlltoAllGrouped is AllToAll as one group of a send and a
// receive of count elements (esize bytes each) per peer, for releases
// without ncclAlltoAll: block j of send goes to rank j, block i of recv
// comes from rank i.
ncclResult_t weft_ncclAlltoAllGrouped(uintptr_t send, uintptr_t recv, size_t count, int dt, size_t esize, int nranks,
                                      uintptr_t comm, uintptr_t stream) {
  ncclResult_t r = p_ncclGroupStart();
  if (r != 0) return r;
  size_t block = count * esize;
  for (int peer = 0; peer < nranks && r == 0; peer++) {
    r = p_ncclSend(PTR(send + peer * block), count, dt, peer, COMM(comm), STREAM(stream));
    if (r == 0) r = p_ncclRecv(PTR(recv + peer * block), count, dt, peer, COMM(comm), STREAM(stream));
  }
  ncclResult_t e = p_ncclGroupEnd();
  return r != 0 ? r : e;
}
ncclResult_t weft_ncclSend(uintptr_t send, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
  return p_ncclSend(PTR(send), count, dt, peer, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclRecv(uintptr_t recv, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
  return p_ncclRecv(PTR(recv), count, dt, peer, COMM(comm), STREAM(stream));
}
ncclResult_t weft_ncclGroupStart(void) { return p_ncclGroupStart(); }
ncclResult_t weft_ncclGroupEnd(void) { return p_ncclGroupEnd(); }
