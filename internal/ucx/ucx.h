// ucx.h: the trampolines of ucx.c, called from ucx_cgo.go.
#pragma once

#include "weft_ucp.h"

typedef struct weft_ucx_lib weft_ucx_lib;

// weft_ucx_worker is a worker with weft's active-message inbox: the
// receive callback copies each message into a list that Go drains after
// progress (no Go code runs inside UCX's callbacks).
typedef struct weft_ucx_am weft_ucx_am;
struct weft_ucx_am {
  weft_ucx_am* next;
  size_t len;
  unsigned char data[];
};
typedef struct {
  weft_ucx_lib* lib;
  ucp_worker_h worker;
  int efd;
  weft_ucx_am* head;
  weft_ucx_am* tail;
  size_t queued;      // messages in the list
  uint64_t dropped;   // messages refused: too long, rendezvous, no memory
  size_t max_len;     // longest message kept
  int no_peer_mode;   // endpoints are made without peer-failure handling
} weft_ucx_worker;

// weft_ucx_ep is an endpoint with the status its error handler recorded.
typedef struct {
  weft_ucx_lib* lib;
  ucp_ep_h ep;
  volatile int status;  // UCS_OK until the peer fails
} weft_ucx_ep;

int weft_ucx_open(const char* ucp, const char* ucs, weft_ucx_lib** out, char* msg, int msglen);
void weft_ucx_version(weft_ucx_lib* l, unsigned* major, unsigned* minor, unsigned* release);
const char* weft_ucx_status_string(weft_ucx_lib* l, int status);
int weft_ucx_init(weft_ucx_lib* l, uint64_t features, const char** keys, const char** values, int n,
                  ucp_context_h* out, char* msg, int msglen);
void weft_ucx_cleanup(weft_ucx_lib* l, ucp_context_h c);
int weft_ucx_memory_types(weft_ucx_lib* l, ucp_context_h c, uint64_t* types);
int weft_ucx_worker_create(weft_ucx_lib* l, ucp_context_h c, unsigned am_id, size_t max_len, weft_ucx_worker** out);
void weft_ucx_worker_destroy(weft_ucx_worker* w);
int weft_ucx_worker_address(weft_ucx_worker* w, void* buf, size_t cap, size_t* len);
unsigned weft_ucx_progress(weft_ucx_worker* w);
int weft_ucx_arm(weft_ucx_worker* w);
int weft_ucx_signal(weft_ucx_worker* w);
int weft_ucx_wait_fd(int fd, int timeout_ms);
weft_ucx_am* weft_ucx_am_pop(weft_ucx_worker* w);
int weft_ucx_ep_create(weft_ucx_worker* w, const void* addr, weft_ucx_ep** out, int* peer_mode);
void* weft_ucx_ep_close(weft_ucx_ep* e, int force, int* status);
int weft_ucx_mem_map(weft_ucx_lib* l, ucp_context_h c, uint64_t addr, uint64_t len, int mem_type, ucp_mem_h* out);
int weft_ucx_mem_unmap(weft_ucx_lib* l, ucp_context_h c, ucp_mem_h m);
int weft_ucx_rkey_pack(weft_ucx_lib* l, ucp_context_h c, ucp_mem_h m, void* buf, size_t cap, size_t* len);
int weft_ucx_rkey_unpack(weft_ucx_ep* e, const void* buf, ucp_rkey_h* out);
void weft_ucx_rkey_destroy(weft_ucx_lib* l, ucp_rkey_h k);
void* weft_ucx_put(weft_ucx_ep* e, uint64_t src, uint64_t len, uint64_t raddr, ucp_rkey_h k, int* status);
void* weft_ucx_flush(weft_ucx_ep* e, int* status);
void* weft_ucx_am_send(weft_ucx_ep* e, unsigned id, const void* data, size_t len, int* status);
int weft_ucx_request_status(weft_ucx_lib* l, void* req);
void weft_ucx_request_free(weft_ucx_lib* l, void* req);

static inline unsigned char* weft_ucx_am_bytes(weft_ucx_am* m) { return m->data; }
