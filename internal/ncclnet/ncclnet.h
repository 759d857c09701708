// ncclnet.h: the trampolines of ncclnet.c, called from ncclnet_cgo.go.
#pragma once

#include "weft_ncclnet.h"

typedef struct weft_ncclnet weft_ncclnet;

// weft_ncclnet_open dlopens path and resolves ncclNetPlugin_v8. It returns
// 0 and the plugin, 1 when dlopen failed (msg: dlerror), 2 when the symbol
// is missing (msg says which newer or older tables the library has).
int weft_ncclnet_open(const char* path, weft_ncclnet** out, char* msg, int msglen);
const char* weft_ncclnet_name(weft_ncclnet* p);
int weft_ncclnet_init(weft_ncclnet* p);
int weft_ncclnet_devices(weft_ncclnet* p, int* n);
int weft_ncclnet_properties(weft_ncclnet* p, int dev, weft_ncclNetProperties_v8_t* props);
int weft_ncclnet_listen(weft_ncclnet* p, int dev, void* handle, void** listen);
int weft_ncclnet_connect(weft_ncclnet* p, int dev, void* handle, void** send);
int weft_ncclnet_accept(weft_ncclnet* p, void* listen, void** recv);
int weft_ncclnet_reg_mr(weft_ncclnet* p, void* comm, uintptr_t data, size_t size, int type, void** mh);
int weft_ncclnet_dereg_mr(weft_ncclnet* p, void* comm, void* mh);
int weft_ncclnet_isend(weft_ncclnet* p, void* send, uintptr_t data, int size, int tag, void* mh, void** req);
int weft_ncclnet_irecv(weft_ncclnet* p, void* recv, uintptr_t data, int size, int tag, void* mh, void** req);
int weft_ncclnet_iflush(weft_ncclnet* p, void* recv, uintptr_t data, int size, void* mh, void** req);
int weft_ncclnet_test(weft_ncclnet* p, void* req, int* done, int* size);
int weft_ncclnet_close_send(weft_ncclnet* p, void* send);
int weft_ncclnet_close_recv(weft_ncclnet* p, void* recv);
int weft_ncclnet_close_listen(weft_ncclnet* p, void* listen);
