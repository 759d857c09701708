//go:build cgo

// aliases.c: the pnccl* entry points. NCCL exports every function twice,
// as ncclX and pncclX, so that a profiling layer can interpose on ncclX and
// call pncclX; weft's pncclX calls ncclX.

#include "include/nccl.h"

#define ALIAS(ret, name, params, args) \
  ret p##name params { return name args; }

ALIAS(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size), (ptr, size))
ALIAS(ncclResult_t, ncclMemFree, (void* ptr), (ptr))
ALIAS(ncclResult_t, ncclGetVersion, (int* version), (version))
ALIAS(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
ALIAS(ncclResult_t, ncclCommInitRankConfig,
      (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config),
      (comm, nranks, id, rank, config))
ALIAS(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank),
      (comm, nranks, id, rank))
ALIAS(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist), (comm, ndev, devlist))
ALIAS(ncclResult_t, ncclCommInitRankScalable,
      (ncclComm_t * comm, int nranks, int rank, int nId, ncclUniqueId* ids, ncclConfig_t* config),
      (comm, nranks, rank, nId, ids, config))
ALIAS(ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm))
ALIAS(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
ALIAS(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
ALIAS(ncclResult_t, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config),
      (comm, color, key, newcomm, config))
ALIAS(ncclResult_t, ncclCommShrink,
      (ncclComm_t comm, int* exclude, int n, ncclComm_t* newcomm, ncclConfig_t* config, int flags),
      (comm, exclude, n, newcomm, config, flags))
ALIAS(const char*, ncclGetErrorString, (ncclResult_t result), (result))
ALIAS(const char*, ncclGetLastError, (ncclComm_t comm), (comm))
void pncclResetDebugInit(void) { ncclResetDebugInit(); }
ALIAS(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* err), (comm, err))
ALIAS(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count), (comm, count))
ALIAS(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device), (comm, device))
ALIAS(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank), (comm, rank))
ALIAS(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle),
      (comm, buff, size, handle))
ALIAS(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle), (comm, handle))
ALIAS(ncclResult_t, ncclCommWindowRegister, (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags),
      (comm, buff, size, win, flags))
ALIAS(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), (comm, win))
ALIAS(ncclResult_t, ncclRedOpCreatePreMulSum,
      (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm),
      (op, scalar, datatype, residence, comm))
ALIAS(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm))
ALIAS(ncclResult_t, ncclReduce,
      (const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t comm,
       cudaStream_t stream),
      (s, r, count, t, op, root, comm, stream))
ALIAS(ncclResult_t, ncclBcast, (void* buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream),
      (buff, count, t, root, comm, stream))
ALIAS(ncclResult_t, ncclBroadcast,
      (const void* s, void* r, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, root, comm, stream))
ALIAS(ncclResult_t, ncclAllReduce,
      (const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, op, comm, stream))
ALIAS(ncclResult_t, ncclReduceScatter,
      (const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, op, comm, stream))
ALIAS(ncclResult_t, ncclAllGather,
      (const void* s, void* r, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, comm, stream))
ALIAS(ncclResult_t, ncclAlltoAll,
      (const void* s, void* r, size_t count, ncclDataType_t t, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, comm, stream))
ALIAS(ncclResult_t, ncclGather,
      (const void* s, void* r, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, root, comm, stream))
ALIAS(ncclResult_t, ncclScatter,
      (const void* s, void* r, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream),
      (s, r, count, t, root, comm, stream))
ALIAS(ncclResult_t, ncclSend,
      (const void* s, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream),
      (s, count, t, peer, comm, stream))
ALIAS(ncclResult_t, ncclRecv, (void* r, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t stream),
      (r, count, t, peer, comm, stream))
ALIAS(ncclResult_t, ncclGroupStart, (void), ())
ALIAS(ncclResult_t, ncclGroupEnd, (void), ())
ALIAS(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * info), (info))

int weftNcclMarker(void) { return 1; }
