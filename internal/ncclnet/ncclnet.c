//go:build cgo

// ncclnet.c: an NCCL net plugin loaded with dlopen. weft_ncclnet_open
// resolves the plugin's ncclNetPlugin_v8 table; the other functions call
// through it. They return the plugin's ncclResult_t, or 3 (internal
// error) for an entry the plugin left NULL.

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncclnet.h"

// weftNcclnetLog is the Go side of the logger (log_cgo.go).
extern void weftNcclnetLog(int level, char* file, int line, char* msg);

struct weft_ncclnet {
  void* handle;
  weft_ncclNet_v8_t* net;
};

#define MISSING 3

// logger is the ncclDebugLogger_t weft hands the plugin's init: it formats
// the message and passes it to Go's slog.
static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt ? fmt : "", ap);
  va_end(ap);
  weftNcclnetLog(level, (char*)(file ? file : ""), line, buf);
}

int weft_ncclnet_open(const char* path, weft_ncclnet** out, char* msg, int msglen) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    snprintf(msg, msglen, "%s", e ? e : "dlopen failed");
    return 1;
  }
  weft_ncclNet_v8_t* net = (weft_ncclNet_v8_t*)dlsym(h, "ncclNetPlugin_v8");
  if (!net) {
    // Say what the library does export, so the message tells a plugin
    // too new or too old for weft apart from a library that is no plugin.
    static const char* others[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                   "ncclNetPlugin_v9",  "ncclNetPlugin_v7",  "ncclNetPlugin_v6"};
    char found[256] = "";
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
      if (dlsym(h, others[i])) {
        size_t n = strlen(found);
        snprintf(found + n, sizeof found - n, "%s%s", n ? ", " : "", others[i]);
      }
    }
    if (found[0])
      snprintf(msg, msglen, "no symbol ncclNetPlugin_v8 (weft speaks v8); the library exports %s", found);
    else
      snprintf(msg, msglen, "no symbol ncclNetPlugin_v8: not an NCCL net plugin");
    dlclose(h);
    return 2;
  }
  weft_ncclnet* p = calloc(1, sizeof *p);
  if (!p) {
    dlclose(h);
    snprintf(msg, msglen, "out of memory");
    return 1;
  }
  p->handle = h;
  p->net = net;
  *out = p;
  return 0;
}

const char* weft_ncclnet_name(weft_ncclnet* p) { return p->net->name ? p->net->name : ""; }

int weft_ncclnet_init(weft_ncclnet* p) {
  if (!p->net->init) return MISSING;
  return p->net->init(logger);
}

int weft_ncclnet_devices(weft_ncclnet* p, int* n) {
  if (!p->net->devices) return MISSING;
  return p->net->devices(n);
}

int weft_ncclnet_properties(weft_ncclnet* p, int dev, weft_ncclNetProperties_v8_t* props) {
  if (!p->net->getProperties) return MISSING;
  return p->net->getProperties(dev, props);
}

int weft_ncclnet_listen(weft_ncclnet* p, int dev, void* handle, void** listen) {
  if (!p->net->listen) return MISSING;
  return p->net->listen(dev, handle, listen);
}

int weft_ncclnet_connect(weft_ncclnet* p, int dev, void* handle, void** send) {
  if (!p->net->connect) return MISSING;
  weft_ncclNetDeviceHandle_v8_t* devComm = NULL;  // no device offload
  return p->net->connect(dev, handle, send, &devComm);
}

int weft_ncclnet_accept(weft_ncclnet* p, void* listen, void** recv) {
  if (!p->net->accept) return MISSING;
  weft_ncclNetDeviceHandle_v8_t* devComm = NULL;
  return p->net->accept(listen, recv, &devComm);
}

int weft_ncclnet_reg_mr(weft_ncclnet* p, void* comm, uintptr_t data, size_t size, int type, void** mh) {
  if (!p->net->regMr) return MISSING;
  return p->net->regMr(comm, (void*)data, size, type, mh);
}

int weft_ncclnet_dereg_mr(weft_ncclnet* p, void* comm, void* mh) {
  if (!p->net->deregMr) return MISSING;
  return p->net->deregMr(comm, mh);
}

int weft_ncclnet_isend(weft_ncclnet* p, void* send, uintptr_t data, int size, int tag, void* mh, void** req) {
  if (!p->net->isend) return MISSING;
  return p->net->isend(send, (void*)data, size, tag, mh, req);
}

int weft_ncclnet_irecv(weft_ncclnet* p, void* recv, uintptr_t data, int size, int tag, void* mh, void** req) {
  if (!p->net->irecv) return MISSING;
  void* d = (void*)data;
  return p->net->irecv(recv, 1, &d, &size, &tag, &mh, req);
}

int weft_ncclnet_iflush(weft_ncclnet* p, void* recv, uintptr_t data, int size, void* mh, void** req) {
  if (!p->net->iflush) return MISSING;
  void* d = (void*)data;
  return p->net->iflush(recv, 1, &d, &size, &mh, req);
}

int weft_ncclnet_test(weft_ncclnet* p, void* req, int* done, int* size) {
  if (!p->net->test) return MISSING;
  return p->net->test(req, done, size);
}

int weft_ncclnet_close_send(weft_ncclnet* p, void* send) {
  if (!p->net->closeSend) return MISSING;
  return p->net->closeSend(send);
}

int weft_ncclnet_close_recv(weft_ncclnet* p, void* recv) {
  if (!p->net->closeRecv) return MISSING;
  return p->net->closeRecv(recv);
}

int weft_ncclnet_close_listen(weft_ncclnet* p, void* listen) {
  if (!p->net->closeListen) return MISSING;
  return p->net->closeListen(listen);
}
