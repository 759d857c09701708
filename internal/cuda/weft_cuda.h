// weft_cuda.h: the few CUDA driver API and NVRTC declarations that package
// cuda needs, written for weft so that it builds with no CUDA toolkit
// installed. Values and signatures follow cuda.h and nvrtc.h of CUDA 12/13;
// every entry point is resolved at run time (cuGetProcAddress_v2 for the
// driver, dlsym for NVRTC) and called through the function pointers of
// driver.c and nvrtc.c.
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;  // enum cudaError_enum; 0 is CUDA_SUCCESS
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2 on 64-bit hosts
typedef uint64_t cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;

#define WEFT_CU_IPC_HANDLE_SIZE 64
typedef struct {
  char reserved[WEFT_CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

typedef struct {
  char bytes[16];
} CUuuid;

// CUmemAllocationProp and friends (virtual memory management).
typedef struct {
  int type;                  // CUmemLocationType
  int id;
} CUmemLocation;

typedef struct {
  int type;                  // CUmemAllocationType: 1 = PINNED
  int requestedHandleTypes;  // CUmemAllocationHandleType: 1 = POSIX fd
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;

typedef struct {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags: 3 = READWRITE
} CUmemAccessDesc;

// CUmulticastObjectProp (CUmulticastObjectProp_v1 of cuda.h, CUDA 12.1 and
// newer): on LP64 hosts numDevices at offset 0, size at 8, handleTypes at
// 16, flags (must be 0) at 24; 32 bytes. handleTypes is a
// CUmemAllocationHandleType mask (1: POSIX file descriptor).
typedef struct {
  unsigned int numDevices;
  size_t size;
  unsigned long long handleTypes;
  unsigned long long flags;
} CUmulticastObjectProp;

// NVRTC.
typedef int nvrtcResult;
typedef struct _nvrtcProgram* nvrtcProgram;

// Errors of the loader itself (not CUDA results): returned by weft_cuda_load.
// weft_stream_op is one operation of weft_queue_ops (hal.StreamOp's
// layout in C): kind 1 copy, 2 wait until the 64-bit word equals value,
// 3 write value, 4 launch fn with grid × block threads and the by-value
// parameter {dst, src, src2, bytes} (a StreamReduce kernel); lane indexes
// the streams of the call.
typedef struct {
  int kind;
  int lane;
  unsigned long long dst, src;
  long long bytes;
  unsigned long long value;
  unsigned long long src2;
  void* fn;  // CUfunction, kind 4
  unsigned int grid, block;
} weft_stream_op;

// weft_memop is CUstreamBatchMemOpParams (cuda.h: a union of 48 bytes) for
// the two operations weft batches: CU_STREAM_MEM_OP_WAIT_VALUE_64 (4) and
// CU_STREAM_MEM_OP_WRITE_VALUE_64 (5), laid out as
// CUstreamMemOpWaitValueParams_st / CUstreamMemOpWriteValueParams_st.
typedef struct {
  int operation;
  int pad0;
  CUdeviceptr address;
  cuuint64_t value64;
  unsigned int flags;
  unsigned int pad1;
  CUdeviceptr alias;
  cuuint64_t pad2;
} weft_memop;

#define WEFT_LOAD_OK 0
#define WEFT_LOAD_DLOPEN 1     // dlopen failed; see weft_cuda_load_error()
#define WEFT_LOAD_NO_GPA 2     // cuGetProcAddress_v2 missing: driver older than CUDA 12
#define WEFT_LOAD_SYMBOL 3     // an entry point could not be resolved
