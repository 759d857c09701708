// abi.h: the C types the Go exports of package main use, and the helpers of
// real.c. Kept apart from include/nccl.h because cgo writes its own
// prototypes of the exported functions (without const) into _cgo_export.h,
// which must not meet nccl.h's in one translation unit. Enums are ints here;
// the ABI is the same.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef int ncclScalarResidence_t;
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct CUstream_st* cudaStream_t;
typedef struct {
  char internal[128];
} ncclUniqueId;

// NCCL 2.28's ncclConfig_t (ncclConfig_v22800); include/nccl.h has the
// documented copy.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

// real.c: the system's NCCL, loaded with RTLD_DEEPBIND | RTLD_LOCAL.
// Communicators of the real library travel as uintptr_t. ctx, when not 0,
// is the CUcontext made current around the call (and restored after).
int weft_real_load(const char* path);
const char* weft_real_error(void);
const char* weft_real_path(void);
int weft_real_version(void);
const char* weft_real_last_error(uintptr_t comm);
ncclResult_t weft_real_get_unique_id(void* id);
ncclResult_t weft_real_init(uintptr_t ctx, uintptr_t* comm, int nranks, const void* id, int rank, int blocking);
ncclResult_t weft_real_destroy(uintptr_t ctx, uintptr_t comm);
ncclResult_t weft_real_abort(uintptr_t ctx, uintptr_t comm);
ncclResult_t weft_real_async_error(uintptr_t comm, ncclResult_t* err);
int weft_real_mapped(const char* path);
ncclResult_t weft_real_register(uintptr_t comm, void* buff, size_t size, void** handle);
ncclResult_t weft_real_deregister(uintptr_t comm, void* handle);
ncclResult_t weft_real_window_register(uintptr_t comm, void* buff, size_t size, void** win, int flags);
ncclResult_t weft_real_window_deregister(uintptr_t comm, void* win);
ncclResult_t weft_real_premulsum(uintptr_t ctx, int* op, uint64_t scalar, uintptr_t scalarPtr, int dtype,
                                 int residence, uintptr_t comm);
ncclResult_t weft_real_op_destroy(uintptr_t ctx, int op, uintptr_t comm);
// weft_real_coll runs one collective: kind is 0 AllReduce, 1 AllGather,
// 2 ReduceScatter, 3 Broadcast, 4 Reduce, 5 AlltoAll.
ncclResult_t weft_real_coll(uintptr_t ctx, int kind, uintptr_t send, uintptr_t recv, size_t count, int dtype, int op,
                            int root, uintptr_t comm, uintptr_t stream);
// weft_real_p2p runs n sends (send[i] != 0) and receives of bytes[i] bytes
// (as ncclInt8) in one group.
ncclResult_t weft_real_p2p(uintptr_t ctx, int n, const int* peer, const int* send, const uintptr_t* buf,
                           const size_t* bytes, uintptr_t comm, uintptr_t stream);
