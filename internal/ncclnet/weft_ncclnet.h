// weft_ncclnet.h: the parts of NCCL's network plugin ABI (ncclNet_v8) that
// weft calls, written for weft from the layout NCCL publishes in its
// ext-net headers (ext-net/example/nccl/net_v8.h, net.h, net_device.h,
// err.h, common.h). Only the layout matters: field order, types and sizes
// must match what a plugin built against NCCL's headers exports.
#pragma once

#include <stddef.h>
#include <stdint.h>

// Sizes and flags (net.h).
#define WEFT_NCCL_NET_HANDLE_MAXSIZE 128  // bytes of a listen handle
#define WEFT_NCCL_PTR_HOST 0x1
#define WEFT_NCCL_PTR_CUDA 0x2
#define WEFT_NCCL_PTR_DMABUF 0x4
#define WEFT_NCCL_NET_MAX_REQUESTS 32  // requests in flight per comm

// ncclResult_t (err.h): 0 success, 1 unhandled CUDA error, 2 system error,
// 3 internal error, 4 invalid argument, 5 invalid usage, 6 remote error,
// 7 in progress.
typedef int weft_ncclResult_t;

// ncclDebugLogLevel (common.h): 0 none, 1 version, 2 warn, 3 info,
// 4 abort, 5 trace. flags is a mask of ncclDebugLogSubSys.
typedef void (*weft_ncclDebugLogger_t)(int level, unsigned long flags, const char* file, int line,
                                       const char* fmt, ...);

// ncclNetDeviceHandle_v8_t (net_device.h): device offload of a connection.
// weft asks for none (passes NULL) and never reads one.
typedef struct {
  int netDeviceType;  // ncclNetDeviceType: 0 host, 1 unpack
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} weft_ncclNetDeviceHandle_v8_t;

// ncclNetProperties_v8_t.
typedef struct {
  char* name;         // for logs
  char* pciPath;      // PCI device directory in /sys, or NULL
  uint64_t guid;      // NIC identity
  int ptrSupport;     // WEFT_NCCL_PTR_* mask
  int regIsGlobal;    // registrations are not tied to a comm
  int speed;          // port speed, Mbit/s
  int port;           // port number
  float latency;      // microseconds
  int maxComms;       // connections the device can hold
  int maxRecvs;       // receives one irecv may group
  int netDeviceType;  // ncclNetDeviceType
  int netDeviceVersion;
} weft_ncclNetProperties_v8_t;

// ncclNet_v8_t: the table a plugin exports as the symbol ncclNetPlugin_v8.
typedef struct {
  const char* name;
  weft_ncclResult_t (*init)(weft_ncclDebugLogger_t logFunction);
  weft_ncclResult_t (*devices)(int* ndev);
  weft_ncclResult_t (*getProperties)(int dev, weft_ncclNetProperties_v8_t* props);
  weft_ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  weft_ncclResult_t (*connect)(int dev, void* handle, void** sendComm, weft_ncclNetDeviceHandle_v8_t** sendDevComm);
  weft_ncclResult_t (*accept)(void* listenComm, void** recvComm, weft_ncclNetDeviceHandle_v8_t** recvDevComm);
  weft_ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  weft_ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   void** mhandle);
  weft_ncclResult_t (*deregMr)(void* comm, void* mhandle);
  weft_ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  weft_ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                             void** request);
  weft_ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  weft_ncclResult_t (*test)(void* request, int* done, int* sizes);
  weft_ncclResult_t (*closeSend)(void* sendComm);
  weft_ncclResult_t (*closeRecv)(void* recvComm);
  weft_ncclResult_t (*closeListen)(void* listenComm);
  weft_ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  weft_ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} weft_ncclNet_v8_t;
