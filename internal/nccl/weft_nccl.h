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
typedef struct CUstream_st* cudaStream_t;
typedef struct CUctx_st* CUcontext;

int weft_nccl_load(const char* path);
const char* weft_nccl_load_error(void);
const char* weft_ncclGetErrorString(ncclResult_t r);
const char* weft_ncclGetLastError(uintptr_t comm);
ncclResult_t weft_ncclGetVersion(int* v);
ncclResult_t weft_ncclGetUniqueId(void* id);
ncclResult_t weft_ncclCommInitRank(uintptr_t setCurrent, uintptr_t ctx, uintptr_t* comm, int nranks, const void* id,
                                   int rank, int* cuResult);
ncclResult_t weft_ncclCommDestroy(uintptr_t comm);
ncclResult_t weft_ncclCommAbort(uintptr_t comm);
ncclResult_t weft_ncclCommGetAsyncError(uintptr_t comm, ncclResult_t* async);
ncclResult_t weft_ncclAllReduce(uintptr_t send, uintptr_t recv, size_t count, int dt, int op, uintptr_t comm,
                                uintptr_t stream);
ncclResult_t weft_ncclAllGather(uintptr_t send, uintptr_t recv, size_t sendcount, int dt, uintptr_t comm,
                                uintptr_t stream);
ncclResult_t weft_ncclReduceScatter(uintptr_t send, uintptr_t recv, size_t recvcount, int dt, int op, uintptr_t comm,
                                    uintptr_t stream);
ncclResult_t weft_ncclBroadcast(uintptr_t send, uintptr_t recv, size_t count, int dt, int root, uintptr_t comm,
                                uintptr_t stream);
ncclResult_t weft_ncclSend(uintptr_t send, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream);
ncclResult_t weft_ncclRecv(uintptr_t recv, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream);
ncclResult_t weft_ncclGroupStart(void);
ncclResult_t weft_ncclGroupEnd(void);
