// nccl_funcs.h: the entry points of the system's NCCL that weft resolves
// with dlsym, listed once. Two places load NVIDIA's library: this binding
// (nccl.c, for `weft bench --baseline nccl` and examples) and weft's own
// NCCL drop-in (nccl/real.c, which forwards what weft does not serve). Both
// include this file and expand the lists with their own X macros, so an
// entry point is added, or its signature corrected, here alone.
//
// Each entry is X(name, return type, (parameter types)), the signature of
// nccl.h (NCCL 2.28). The includer declares the types first:
// ncclResult_t, ncclComm_t, ncclUniqueId, ncclDataType_t, ncclRedOp_t,
// ncclScalarResidence_t and cudaStream_t (weft_nccl.h here, nccl/abi.h in
// the drop-in). ncclCommInitRankConfig's config is void*: ncclConfig_t
// grows with each release, and each includer passes the layout it fills.
//
// go build does not see a header that another package's directory
// includes: after editing this file, rebuild nccl/ with -a (or touch
// nccl/real.c) so that the drop-in does not keep a cached build.
#pragma once

// WEFT_NCCL_FUNCS: entry points of every NCCL 2.x release weft loads; a
// library without one of them is refused.
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
  X(ncclReduce, ncclResult_t,                                                                               \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))               \
  X(ncclSend, ncclResult_t, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))            \
  X(ncclRecv, ncclResult_t, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                  \
  X(ncclGroupStart, ncclResult_t, (void))                                                                   \
  X(ncclGroupEnd, ncclResult_t, (void))

// WEFT_NCCL_OPTIONAL: entry points that some releases lack (ncclAlltoAll
// before 2.28, ncclCommInitRankConfig before 2.14, PreMulSum before 2.11,
// ncclGetLastError before 2.13, buffer registration before 2.19, window
// registration before 2.27). A loader leaves a missing one NULL; what
// it then does is its own policy (the binding reports the call as not
// supported, the drop-in refuses a library without the first three).
#define WEFT_NCCL_OPTIONAL(X)                                                                               \
  X(ncclAlltoAll, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))      \
  X(ncclCommInitRankConfig, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int, void*))                     \
  X(ncclRedOpCreatePreMulSum, ncclResult_t, (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t)) \
  X(ncclRedOpDestroy, ncclResult_t, (ncclRedOp_t, ncclComm_t))                                              \
  X(ncclGetLastError, const char*, (ncclComm_t))                                                          \
  X(ncclCommRegister, ncclResult_t, (ncclComm_t, void*, size_t, void**))                                     \
  X(ncclCommDeregister, ncclResult_t, (ncclComm_t, void*))                                                  \
  X(ncclCommWindowRegister, ncclResult_t, (ncclComm_t, void*, size_t, void**, int))                          \
  X(ncclCommWindowDeregister, ncclResult_t, (ncclComm_t, void*))
