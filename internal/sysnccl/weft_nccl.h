// weft_nccl.h: the NCCL declarations package nccl needs, written for weft
// so that it builds without nccl.h. Values and signatures follow nccl.h of
// NCCL 2.28; every function is resolved with dlsym at run time.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef int ncclResult_t;  // 0 ncclSuccess … 7 ncclInProgress
typedef struct ncclComm* ncclComm_t;
typedef struct {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
} ncclUniqueId;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef int ncclScalarResidence_t;  // 0 ncclScalarDevice, 1 ncclScalarHostImmediate
typedef struct CUstream_st* cudaStream_t;
typedef struct CUctx_st* CUcontext;

// weft_ncclConfig is the leading part of ncclConfig_t that NCCL 2.18
// defined (size, magic, version, then the attributes up to splitShare).
// NCCL reads a config by its size and version fields, so later versions
// accept this prefix and leave their newer attributes at their defaults.
typedef struct {
  size_t size;
  unsigned int magic;    // NCCL_API_MAGIC 0xcafebeef
  unsigned int version;  // NCCL_VERSION(2,18,0) = 21800
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
} weft_ncclConfig;

int weft_nccl_load(const char* path);
const char* weft_nccl_load_error(void);
int weft_nccl_has(const char* name);
const char* weft_ncclGetErrorString(ncclResult_t r);
const char* weft_ncclGetLastError(uintptr_t comm);
ncclResult_t weft_ncclGetVersion(int* v);
ncclResult_t weft_ncclGetUniqueId(void* id);
ncclResult_t weft_ncclCommInitRank(uintptr_t setCurrent, uintptr_t ctx, uintptr_t* comm, int nranks, const void* id,
                                   int rank, int* cuResult);
ncclResult_t weft_ncclCommInitRankConfig(uintptr_t setCurrent, uintptr_t ctx, uintptr_t* comm, int nranks,
                                         const void* id, int rank, weft_ncclConfig* config, int* cuResult);
ncclResult_t weft_ncclCommDestroy(uintptr_t comm);
ncclResult_t weft_ncclCommAbort(uintptr_t comm);
ncclResult_t weft_ncclCommGetAsyncError(uintptr_t comm, ncclResult_t* async);
ncclResult_t weft_ncclRedOpCreatePreMulSum(int* op, uintptr_t scalar, int dt, int residence, uintptr_t comm);
ncclResult_t weft_ncclRedOpDestroy(int op, uintptr_t comm);
ncclResult_t weft_ncclAllReduce(uintptr_t send, uintptr_t recv, size_t count, int dt, int op, uintptr_t comm,
                                uintptr_t stream);
ncclResult_t weft_ncclAllGather(uintptr_t send, uintptr_t recv, size_t sendcount, int dt, uintptr_t comm,
                                uintptr_t stream);
ncclResult_t weft_ncclReduceScatter(uintptr_t send, uintptr_t recv, size_t recvcount, int dt, int op, uintptr_t comm,
                                    uintptr_t stream);
ncclResult_t weft_ncclBroadcast(uintptr_t send, uintptr_t recv, size_t count, int dt, int root, uintptr_t comm,
                                uintptr_t stream);
ncclResult_t weft_ncclReduce(uintptr_t send, uintptr_t recv, size_t count, int dt, int op, int root, uintptr_t comm,
                             uintptr_t stream);
ncclResult_t weft_ncclAlltoAll(uintptr_t send, uintptr_t recv, size_t count, int dt, uintptr_t comm, uintptr_t stream);
ncclResult_t weft_ncclAlltoAllGrouped(uintptr_t send, uintptr_t recv, size_t count, int dt, size_t esize, int nranks,
                                      uintptr_t comm, uintptr_t stream);
ncclResult_t weft_ncclSend(uintptr_t send, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream);
ncclResult_t weft_ncclRecv(uintptr_t recv, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream);
ncclResult_t weft_ncclGroupStart(void);
ncclResult_t weft_ncclGroupEnd(void);
