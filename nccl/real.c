//go:build cgo

// real.c: the system's NCCL, for what weft does not serve. It is opened
// with RTLD_DEEPBIND | RTLD_LOCAL so that the library's calls to its own
// exported functions bind inside it and never to weft's ncclAllReduce & co,
// and a candidate that turns out to be weft itself (it exports
// weftNcclMarker) is refused.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
// The entry points to resolve, listed once for weft: the system-NCCL
// binding's table (WEFT_NCCL_FUNCS, WEFT_NCCL_OPTIONAL).
#include "../internal/sysnccl/nccl_funcs.h"

typedef int CUresult_w;
typedef void* CUcontext_w;

#define DECLARE(name, ret, params) static ret(*r_##name) params;
WEFT_NCCL_FUNCS(DECLARE)
WEFT_NCCL_OPTIONAL(DECLARE)
#undef DECLARE

static CUresult_w (*r_cuCtxGetCurrent)(CUcontext_w*);
static CUresult_w (*r_cuCtxSetCurrent)(CUcontext_w);

static char real_err[1024];
static char real_path[1024];
static int real_version;

const char* weft_real_error(void) { return real_err; }
const char* weft_real_path(void) { return real_path; }
int weft_real_version(void) { return real_version; }

// weft_real_load returns 0 on success, 1 when path cannot be opened, 2 when
// it is weft itself, 3 when a symbol is missing.
int weft_real_load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(real_err, sizeof real_err, "%s", e ? e : path);
    return 1;
  }
  if (dlsym(lib, "weftNcclMarker") != NULL) {
    snprintf(real_err, sizeof real_err, "%s is weft's own library, not NVIDIA's NCCL", path);
    dlclose(lib);
    return 2;
  }
#define RESOLVE(name, ret, params)                                                       \
  *(void**)&r_##name = dlsym(lib, #name);                                                \
  if (r_##name == NULL) {                                                                \
    snprintf(real_err, sizeof real_err, "%s: symbol %s not found", path, #name);         \
    dlclose(lib);                                                                        \
    return 3;                                                                            \
  }
  WEFT_NCCL_FUNCS(RESOLVE)
#undef RESOLVE
#define RESOLVE_OPTIONAL(name, ret, params) *(void**)&r_##name = dlsym(lib, #name);
  WEFT_NCCL_OPTIONAL(RESOLVE_OPTIONAL)
#undef RESOLVE_OPTIONAL
  // Forwarding needs communicators with a config (blocking or not) and
  // PreMulSum operators: a release without them (before 2.14) is refused.
  const char* missing = r_ncclCommInitRankConfig == NULL     ? "ncclCommInitRankConfig"
                        : r_ncclRedOpCreatePreMulSum == NULL ? "ncclRedOpCreatePreMulSum"
                        : r_ncclRedOpDestroy == NULL         ? "ncclRedOpDestroy"
                                                             : NULL;
  if (missing != NULL) {
    snprintf(real_err, sizeof real_err, "%s: symbol %s not found", path, missing);
    dlclose(lib);
    return 3;
  }
  void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (cu == NULL) cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cu != NULL) {
    *(void**)&r_cuCtxGetCurrent = dlsym(cu, "cuCtxGetCurrent");
    *(void**)&r_cuCtxSetCurrent = dlsym(cu, "cuCtxSetCurrent");
  }
  r_ncclGetVersion(&real_version);
  Dl_info info;
  if (dladdr((void*)r_ncclGetVersion, &info) != 0 && info.dli_fname != NULL) {
    snprintf(real_path, sizeof real_path, "%s", info.dli_fname);
  } else {
    snprintf(real_path, sizeof real_path, "%s", path);
  }
  return 0;
}

// weft_real_mapped returns 1 when path names a library already mapped into
// the process (dlopen RTLD_NOLOAD) that is not weft itself; it loads
// nothing.
int weft_real_mapped(const char* path) {
  void* lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == NULL) return 0;
  int weft = dlsym(lib, "weftNcclMarker") != NULL;
  dlclose(lib);
  return !weft;
}

// Make ctx current for one call and restore the caller's context after.
#define WITH_CTX(ctx, call)                                                   \
  do {                                                                        \
    CUcontext_w old_ = NULL;                                                  \
    int switched_ = 0;                                                        \
    if ((ctx) != 0 && r_cuCtxGetCurrent != NULL && r_cuCtxSetCurrent != NULL) { \
      r_cuCtxGetCurrent(&old_);                                               \
      if (old_ != (CUcontext_w)(ctx)) {                                       \
        if (r_cuCtxSetCurrent((CUcontext_w)(ctx)) != 0) return ncclUnhandledCudaErrorW; \
        switched_ = 1;                                                        \
      }                                                                       \
    }                                                                         \
    ncclResult_t r_ = (call);                                                 \
    if (switched_) r_cuCtxSetCurrent(old_);                                   \
    return r_;                                                                \
  } while (0)

enum { ncclUnhandledCudaErrorW = 1, ncclInvalidUsageW = 5 };

#define COMM(c) ((ncclComm_t)(c))
#define STREAM(s) ((cudaStream_t)(s))

const char* weft_real_last_error(uintptr_t comm) {
  return r_ncclGetLastError ? r_ncclGetLastError(COMM(comm)) : NULL;
}

ncclResult_t weft_real_get_unique_id(void* id) { return r_ncclGetUniqueId((ncclUniqueId*)id); }

ncclResult_t weft_real_init(uintptr_t ctx, uintptr_t* comm, int nranks, const void* id, int rank, int blocking) {
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  // NCCL 2.28's NCCL_CONFIG_INITIALIZER, written out: size, magic, version,
  // then every option undefined (INT_MIN / NULL) but blocking.
  ncclConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.size = sizeof cfg;
  cfg.magic = 0xcafebeef;
  cfg.version = 22803;
  int* ints[] = {&cfg.blocking, &cfg.cgaClusterSize, &cfg.minCTAs, &cfg.maxCTAs, &cfg.splitShare,
                 &cfg.trafficClass, &cfg.collnetEnable, &cfg.CTAPolicy, &cfg.shrinkShare, &cfg.nvlsCTAs,
                 &cfg.nChannelsPerNetPeer, &cfg.nvlinkCentricSched};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) *ints[i] = -2147483647 - 1;
  cfg.blocking = blocking;
  WITH_CTX(ctx, r_ncclCommInitRankConfig((ncclComm_t*)comm, nranks, uid, rank, &cfg));
}

ncclResult_t weft_real_destroy(uintptr_t ctx, uintptr_t comm) { WITH_CTX(ctx, r_ncclCommDestroy(COMM(comm))); }
ncclResult_t weft_real_abort(uintptr_t ctx, uintptr_t comm) { WITH_CTX(ctx, r_ncclCommAbort(COMM(comm))); }

ncclResult_t weft_real_async_error(uintptr_t comm, ncclResult_t* err) {
  return r_ncclCommGetAsyncError(COMM(comm), err);
}

// NCCL's own calls of ncclCommRegister and ncclCommDeregister (its window
// registration) that reached weft's (nccl/api.go, foreignComm).
ncclResult_t weft_real_register(uintptr_t comm, void* buff, size_t size, void** handle) {
  if (r_ncclCommRegister == NULL) return ncclInvalidUsageW;
  return r_ncclCommRegister(COMM(comm), buff, size, handle);
}

ncclResult_t weft_real_deregister(uintptr_t comm, void* handle) {
  if (r_ncclCommDeregister == NULL) return ncclInvalidUsageW;
  return r_ncclCommDeregister(COMM(comm), handle);
}

// The same for window registration (NCCL 2.27 and later).
ncclResult_t weft_real_window_register(uintptr_t comm, void* buff, size_t size, void** win, int flags) {
  if (r_ncclCommWindowRegister == NULL) return ncclInvalidUsageW;
  return r_ncclCommWindowRegister(COMM(comm), buff, size, win, flags);
}

ncclResult_t weft_real_window_deregister(uintptr_t comm, void* win) {
  if (r_ncclCommWindowDeregister == NULL) return ncclInvalidUsageW;
  return r_ncclCommWindowDeregister(COMM(comm), win);
}

ncclResult_t weft_real_premulsum(uintptr_t ctx, int* op, uint64_t scalar, uintptr_t scalarPtr, int dtype,
                                 int residence, uintptr_t comm) {
  void* p = residence == 1 ? (void*)&scalar : (void*)scalarPtr;
  WITH_CTX(ctx, r_ncclRedOpCreatePreMulSum((ncclRedOp_t*)op, p, dtype, residence, COMM(comm)));
}

ncclResult_t weft_real_op_destroy(uintptr_t ctx, int op, uintptr_t comm) {
  WITH_CTX(ctx, r_ncclRedOpDestroy(op, COMM(comm)));
}

static ncclResult_t real_coll(int kind, uintptr_t send, uintptr_t recv, size_t count, int dtype, int op, int root,
                              uintptr_t comm, uintptr_t stream) {
  const void* s = (const void*)send;
  void* r = (void*)recv;
  switch (kind) {
    case 0: return r_ncclAllReduce(s, r, count, dtype, op, COMM(comm), STREAM(stream));
    case 1: return r_ncclAllGather(s, r, count, dtype, COMM(comm), STREAM(stream));
    case 2: return r_ncclReduceScatter(s, r, count, dtype, op, COMM(comm), STREAM(stream));
    case 3: return r_ncclBroadcast(s, r, count, dtype, root, COMM(comm), STREAM(stream));
    case 4: return r_ncclReduce(s, r, count, dtype, op, root, COMM(comm), STREAM(stream));
    case 5:
      if (r_ncclAlltoAll == NULL) return ncclInvalidUsageW;
      return r_ncclAlltoAll(s, r, count, dtype, COMM(comm), STREAM(stream));
  }
  return ncclInvalidUsageW;
}

ncclResult_t weft_real_coll(uintptr_t ctx, int kind, uintptr_t send, uintptr_t recv, size_t count, int dtype, int op,
                            int root, uintptr_t comm, uintptr_t stream) {
  WITH_CTX(ctx, real_coll(kind, send, recv, count, dtype, op, root, comm, stream));
}

static ncclResult_t real_p2p(int n, const int* peer, const int* send, const uintptr_t* buf, const size_t* bytes,
                             uintptr_t comm, uintptr_t stream) {
  ncclResult_t r = r_ncclGroupStart();
  if (r != 0) return r;
  ncclResult_t first = 0;
  for (int i = 0; i < n && first == 0; i++) {
    if (send[i]) {
      first = r_ncclSend((const void*)buf[i], bytes[i], 0 /* ncclInt8 */, peer[i], COMM(comm), STREAM(stream));
    } else {
      first = r_ncclRecv((void*)buf[i], bytes[i], 0 /* ncclInt8 */, peer[i], COMM(comm), STREAM(stream));
    }
  }
  r = r_ncclGroupEnd();
  return first != 0 ? first : r;
}

ncclResult_t weft_real_p2p(uintptr_t ctx, int n, const int* peer, const int* send, const uintptr_t* buf,
                           const size_t* bytes, uintptr_t comm, uintptr_t stream) {
  WITH_CTX(ctx, real_p2p(n, peer, send, buf, bytes, comm, stream));
}
