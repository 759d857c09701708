/*
 * nccl.h — weft's declaration of the NCCL 2.28 C ABI.
 *
 * libweft_nccl.so implements this interface on top of weft (see
 * docs/nccl.md). Types, enum values and the layout of ncclConfig_t are those
 * of NCCL 2.28.3, so that a program compiled against NVIDIA's nccl.h runs
 * unchanged with weft (LD_PRELOAD, or installed as libnccl.so.2), and a
 * program compiled against this header runs with either library.
 *
 * This header needs no CUDA headers: cudaStream_t is declared as the CUDA
 * runtime declares it, so including cuda_runtime.h before or after it is
 * fine.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

/* Versions up to 2.8 were coded X*1000+Y*100+Z, later ones X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE 22803

/* weft identifies itself to programs that care (and to its own loader, which
 * must never forward to itself). */
#define WEFT_NCCL 1

#ifdef __cplusplus
extern "C" {
#endif

#ifndef WEFT_CUDA_STREAM_DECLARED
#define WEFT_CUDA_STREAM_DECLARED
typedef struct CUstream_st* cudaStream_t;
#endif

/* A communicator: one rank's membership in a group of ranks. */
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

/* A registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem* ncclWindow_t;

/* The out-of-band token that names a new communicator: rank 0 makes it with
 * ncclGetUniqueId and sends it to the other ranks. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* a CUDA call failed */
  ncclSystemError = 2,        /* an operating-system call failed (socket, shared memory) */
  ncclInternalError = 3,      /* a bug in the library */
  ncclInvalidArgument = 4,    /* a bad argument value */
  ncclInvalidUsage = 5,       /* a valid value used in a wrong order or state */
  ncclRemoteError = 6,        /* a peer rank failed or went away */
  ncclInProgress = 7,         /* a non-blocking operation has not finished */
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* CTAPolicy values */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* Communicator options. Always start from NCCL_CONFIG_INITIALIZER: size,
 * magic and version identify the layout, and fields left at
 * NCCL_CONFIG_UNDEF_INT / NCCL_CONFIG_UNDEF_PTR take their defaults. The
 * field order is NCCL 2.28's (ncclConfig_v22800). weft reads blocking,
 * minCTAs, maxCTAs (the most thread blocks one of its launches holds) and
 * commName; the other fields matter only to a communicator forwarded to the
 * real NCCL. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking; /* 0: init and collectives may return ncclInProgress */
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

#define NCCL_CONFIG_MAGIC 0xcafebeef
#define NCCL_CONFIG_INITIALIZER                                                            \
  {                                                                                        \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT /* blocking */, NCCL_CONFIG_UNDEF_INT /* cgaClusterSize */,  \
        NCCL_CONFIG_UNDEF_INT /* minCTAs */, NCCL_CONFIG_UNDEF_INT /* maxCTAs */,          \
        NCCL_CONFIG_UNDEF_PTR /* netName */, NCCL_CONFIG_UNDEF_INT /* splitShare */,       \
        NCCL_CONFIG_UNDEF_INT /* trafficClass */, NCCL_CONFIG_UNDEF_PTR /* commName */,    \
        NCCL_CONFIG_UNDEF_INT /* collnetEnable */, NCCL_CONFIG_UNDEF_INT /* CTAPolicy */,  \
        NCCL_CONFIG_UNDEF_INT /* shrinkShare */, NCCL_CONFIG_UNDEF_INT /* nvlsCTAs */,     \
        NCCL_CONFIG_UNDEF_INT /* nChannelsPerNetPeer */,                                   \
        NCCL_CONFIG_UNDEF_INT /* nvlinkCentricSched */                                     \
  }

/* What ncclGroupSimulateEnd reports. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* Reduction operators. Values from ncclNumOps up to ncclMaxRedOp are
 * operators made at run time by ncclRedOpCreatePreMulSum. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /* sum divided by the number of ranks */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,        /* device memory, read when the collective runs */
  ncclScalarHostImmediate = 1, /* host memory, read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/*
 * Every function below also exists with a "p" prefix (pncclAllReduce, …),
 * the profiling entry points NCCL exports; they behave identically.
 */
#define WEFT_NCCL_DECLARE(ret, name, params) \
  ret name params;                           \
  ret p##name params;

/* Device memory for buffers. On weft's CPU backend (hal/host) this is the
 * only memory collectives accept. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
WEFT_NCCL_DECLARE(ncclResult_t, ncclMemFree, (void* ptr))

/* NCCL_VERSION_CODE of the library: 22803. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclGetVersion, (int* version))

/* A new communicator's id; hand it to every rank before ncclCommInitRank. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))

/* Communicator creation and destruction. Init is collective over the ranks
 * of commId and binds the communicator to the calling thread's current CUDA
 * device. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                   ncclConfig_t* config))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommShrink,
                  (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                   ncclConfig_t* config, int shrinkFlags))

/* Errors and state. */
WEFT_NCCL_DECLARE(const char*, ncclGetErrorString, (ncclResult_t result))
WEFT_NCCL_DECLARE(const char*, ncclGetLastError, (ncclComm_t comm))
WEFT_NCCL_DECLARE(void, ncclResetDebugInit, (void))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))

/* Buffer registration. weft's plans need none: these accept and return a
 * handle. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommWindowRegister,
                  (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
WEFT_NCCL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))

/* PreMulSum: every contribution is multiplied by *scalar (of datatype)
 * before the sum. The operator is valid for comm and datatype only. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                   ncclComm_t comm))
WEFT_NCCL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

/*
 * Collectives. Each enqueues work on stream and returns; every rank of comm
 * makes the same calls in the same order. count is in elements of datatype:
 * per rank for AllReduce, Broadcast and Reduce; the send count of AllGather
 * and Gather; the receive count of ReduceScatter and Scatter; per peer for
 * AlltoAll. In place: sendbuff == recvbuff (AllReduce, Broadcast, Reduce),
 * sendbuff == recvbuff + rank*count (AllGather), recvbuff == sendbuff +
 * rank*count (ReduceScatter).
 */
WEFT_NCCL_DECLARE(ncclResult_t, ncclReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                   int root, ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclBcast,
                  (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclBroadcast,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclAllReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclReduceScatter,
                  (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclAllGather,
                  (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                   ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclAlltoAll,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                   cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclGather,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclScatter,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream))

/* Point to point: the peer makes the matching call with the same count and
 * datatype. Several sends and receives that must progress together go in
 * one ncclGroupStart/ncclGroupEnd. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclSend,
                  (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream))
WEFT_NCCL_DECLARE(ncclResult_t, ncclRecv,
                  (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream))

/* Groups: calls between the outermost ncclGroupStart and its ncclGroupEnd
 * (per thread; groups nest) are launched together at ncclGroupEnd. */
WEFT_NCCL_DECLARE(ncclResult_t, ncclGroupStart, (void))
WEFT_NCCL_DECLARE(ncclResult_t, ncclGroupEnd, (void))
WEFT_NCCL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

#undef WEFT_NCCL_DECLARE

/* Present only in weft's library: returns 1. */
int weftNcclMarker(void);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
