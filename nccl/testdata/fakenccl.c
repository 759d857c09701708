// fakenccl.c: a stand-in for NVIDIA's libnccl.so.2 in TestCProgram's
// "forward" case, built with the host C compiler (soname libnccl.so.2). Like
// the real library (NCCL 2.28's ncclCommEnsureReady), its collectives call
// its own exported ncclCommGetAsyncError through the PLT, so a process that
// links it and preloads weft resolves that call to weft's entry point: weft
// must hand a communicator that is not its own back to this library. One
// rank only: a collective copies (AllReduce, AllGather, Broadcast) its input.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

#define FAKE_MAGIC 0x6e63636cu

struct ncclComm {
  uint32_t magic;
  int nranks;
};

static int selfCalls;  // ncclCommGetAsyncError calls with this library's communicator

static size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// Linked for the client's sake; at run time weft's preloaded ones serve it.
ncclResult_t ncclMemAlloc(void** p, size_t n) { *p = malloc(n ? n : 1); return *p ? ncclSuccess : ncclSystemError; }
ncclResult_t ncclMemFree(void* p) { free(p); return ncclSuccess; }
ncclResult_t ncclGetVersion(int* v) { *v = 22809; return ncclSuccess; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) { memset(id, 7, sizeof *id); return ncclSuccess; }
const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "fake NCCL error"; }
const char* ncclGetLastError(ncclComm_t c) { (void)c; return "fake NCCL: invalid communicator"; }

static ncclResult_t newComm(ncclComm_t* c, int nranks, int rank) {
  if (nranks != 1 || rank != 0) return ncclInvalidArgument;
  *c = calloc(1, sizeof **c);  // 16-byte aligned, as every heap pointer
  (*c)->magic = FAKE_MAGIC;
  (*c)->nranks = nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* c, int n, ncclUniqueId id, int r) { (void)id; return newComm(c, n, r); }
ncclResult_t ncclCommInitRankConfig(ncclComm_t* c, int n, ncclUniqueId id, int r, ncclConfig_t* cfg) {
  (void)id; (void)cfg;
  return newComm(c, n, r);
}
ncclResult_t ncclCommDestroy(ncclComm_t c) { if (c) c->magic = 0; free(c); return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }

// The check every real collective makes first. A communicator that is not
// this library's (weft answered with its own state, or passed its handle)
// is an invalid argument, as in NCCL's CommCheck.
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* err) {
  if (c == NULL || ((uintptr_t)c & 1) != 0 || c->magic != FAKE_MAGIC) return ncclInvalidArgument;
  selfCalls++;
  *err = ncclSuccess;
  return ncclSuccess;
}

// ready is ncclCommEnsureReady: the call through the PLT that weft interposes.
static ncclResult_t ready(ncclComm_t c) {
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(c, &async);
  return r != ncclSuccess ? r : async;
}

static ncclResult_t copy(const void* s, void* d, size_t n, ncclDataType_t t, ncclComm_t c) {
  ncclResult_t r = ready(c);
  if (r != ncclSuccess) return r;
  if (s != d) memmove(d, s, n * typeSize(t));
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* s, void* d, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  (void)op; (void)st;
  return copy(s, d, n, t, c);
}
ncclResult_t ncclAllGather(const void* s, void* d, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  (void)st;
  return copy(s, d, n, t, c);
}
ncclResult_t ncclReduceScatter(const void* s, void* d, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  (void)op; (void)st;
  return copy(s, d, n, t, c);
}
ncclResult_t ncclBroadcast(const void* s, void* d, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
  (void)root; (void)st;
  return copy(s, d, n, t, c);
}
ncclResult_t ncclReduce(const void* s, void* d, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st) {
  (void)op; (void)root; (void)st;
  return copy(s, d, n, t, c);
}
ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)n; (void)t; (void)peer; (void)st;
  return ready(c);
}
ncclResult_t ncclRecv(void* d, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)d; (void)n; (void)t; (void)peer; (void)st;
  return ready(c);
}
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t t, ncclScalarResidence_t res, ncclComm_t c) {
  (void)scalar; (void)t; (void)res; (void)c;
  *op = (ncclRedOp_t)5;
  return ncclSuccess;
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t c) { (void)op; (void)c; return ncclSuccess; }

// fakeSelfCalls: how many ncclCommGetAsyncError calls with this library's
// communicator reached it (the client prints it: weft handed them back).
int fakeSelfCalls(void) { return selfCalls; }
