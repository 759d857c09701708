//go:build cgo

// ucx.c: libucp and libucs loaded with dlopen. weft_ucx_open resolves
// every symbol weft calls into a table; the trampolines fill UCX's
// versioned parameter structures (only the fields named in field_mask)
// and return 0 or a ucs_status_t value. Requests are polled with
// ucp_request_check_status rather than completed through callbacks.

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

struct weft_ucx_lib {
  void* ucp;
  void* ucs;
  weft_ucp_get_version_fn get_version;
  weft_ucp_config_read_fn config_read;
  weft_ucp_config_release_fn config_release;
  weft_ucp_config_modify_fn config_modify;
  weft_ucp_init_version_fn init_version;
  weft_ucp_cleanup_fn cleanup;
  weft_ucp_context_query_fn context_query;
  weft_ucp_worker_create_fn worker_create;
  weft_ucp_worker_destroy_fn worker_destroy;
  weft_ucp_worker_get_address_fn worker_get_address;
  weft_ucp_worker_release_address_fn worker_release_address;
  weft_ucp_worker_progress_fn worker_progress;
  weft_ucp_worker_get_efd_fn worker_get_efd;
  weft_ucp_worker_arm_fn worker_arm;
  weft_ucp_worker_signal_fn worker_signal;
  weft_ucp_worker_set_am_recv_handler_fn set_am_recv_handler;
  weft_ucp_am_data_release_fn am_data_release;
  weft_ucp_ep_create_fn ep_create;
  weft_ucp_ep_close_nbx_fn ep_close_nbx;
  weft_ucp_ep_flush_nbx_fn ep_flush_nbx;
  weft_ucp_mem_map_fn mem_map;
  weft_ucp_mem_unmap_fn mem_unmap;
  weft_ucp_rkey_pack_fn rkey_pack;
  weft_ucp_rkey_buffer_release_fn rkey_buffer_release;
  weft_ucp_ep_rkey_unpack_fn ep_rkey_unpack;
  weft_ucp_rkey_destroy_fn rkey_destroy;
  weft_ucp_put_nbx_fn put_nbx;
  weft_ucp_am_send_nbx_fn am_send_nbx;
  weft_ucp_request_check_status_fn request_check_status;
  weft_ucp_request_free_fn request_free;
  weft_ucs_status_string_fn status_string;
};

#define SYM(h, field, name)                                          \
  do {                                                               \
    *(void**)(&l->field) = dlsym(h, name);                           \
    if (!l->field) {                                                 \
      snprintf(msg, msglen, "symbol %s missing (UCX older than 1.12?)", name); \
      goto fail;                                                     \
    }                                                                \
  } while (0)

int weft_ucx_open(const char* ucp, const char* ucs, weft_ucx_lib** out, char* msg, int msglen) {
  weft_ucx_lib* l = calloc(1, sizeof(*l));
  if (!l) {
    snprintf(msg, msglen, "out of memory");
    return 1;
  }
  // libucs first and global: libucp needs it, and ucs_status_string lives there.
  l->ucs = dlopen(ucs, RTLD_NOW | RTLD_GLOBAL);
  if (!l->ucs) {
    const char* e = dlerror();
    snprintf(msg, msglen, "%s", e ? e : "dlopen failed");
    free(l);
    return 1;
  }
  l->ucp = dlopen(ucp, RTLD_NOW | RTLD_LOCAL);
  if (!l->ucp) {
    const char* e = dlerror();
    snprintf(msg, msglen, "%s", e ? e : "dlopen failed");
    goto fail;
  }
  SYM(l->ucp, get_version, "ucp_get_version");
  SYM(l->ucp, config_read, "ucp_config_read");
  SYM(l->ucp, config_release, "ucp_config_release");
  SYM(l->ucp, config_modify, "ucp_config_modify");
  SYM(l->ucp, init_version, "ucp_init_version");
  SYM(l->ucp, cleanup, "ucp_cleanup");
  SYM(l->ucp, context_query, "ucp_context_query");
  SYM(l->ucp, worker_create, "ucp_worker_create");
  SYM(l->ucp, worker_destroy, "ucp_worker_destroy");
  SYM(l->ucp, worker_get_address, "ucp_worker_get_address");
  SYM(l->ucp, worker_release_address, "ucp_worker_release_address");
  SYM(l->ucp, worker_progress, "ucp_worker_progress");
  SYM(l->ucp, worker_get_efd, "ucp_worker_get_efd");
  SYM(l->ucp, worker_arm, "ucp_worker_arm");
  SYM(l->ucp, worker_signal, "ucp_worker_signal");
  SYM(l->ucp, set_am_recv_handler, "ucp_worker_set_am_recv_handler");
  SYM(l->ucp, am_data_release, "ucp_am_data_release");
  SYM(l->ucp, ep_create, "ucp_ep_create");
  SYM(l->ucp, ep_close_nbx, "ucp_ep_close_nbx");
  SYM(l->ucp, ep_flush_nbx, "ucp_ep_flush_nbx");
  SYM(l->ucp, mem_map, "ucp_mem_map");
  SYM(l->ucp, mem_unmap, "ucp_mem_unmap");
  SYM(l->ucp, rkey_pack, "ucp_rkey_pack");
  SYM(l->ucp, rkey_buffer_release, "ucp_rkey_buffer_release");
  SYM(l->ucp, ep_rkey_unpack, "ucp_ep_rkey_unpack");
  SYM(l->ucp, rkey_destroy, "ucp_rkey_destroy");
  SYM(l->ucp, put_nbx, "ucp_put_nbx");
  SYM(l->ucp, am_send_nbx, "ucp_am_send_nbx");
  SYM(l->ucp, request_check_status, "ucp_request_check_status");
  SYM(l->ucp, request_free, "ucp_request_free");
  SYM(l->ucs, status_string, "ucs_status_string");
  *out = l;
  return 0;
fail:
  if (l->ucp) dlclose(l->ucp);
  dlclose(l->ucs);
  free(l);
  return 1;
}

void weft_ucx_version(weft_ucx_lib* l, unsigned* major, unsigned* minor, unsigned* release) {
  l->get_version(major, minor, release);
}

const char* weft_ucx_status_string(weft_ucx_lib* l, int status) { return l->status_string((ucs_status_t)status); }

int weft_ucx_init(weft_ucx_lib* l, uint64_t features, const char** keys, const char** values, int n,
                  ucp_context_h* out, char* msg, int msglen) {
  ucp_config_t* cfg = NULL;
  ucs_status_t st = l->config_read(NULL, NULL, &cfg);  // reads UCX_* of the environment
  if (st != UCS_OK) {
    snprintf(msg, msglen, "ucp_config_read");
    return st;
  }
  for (int i = 0; i < n; i++) {
    st = l->config_modify(cfg, keys[i], values[i]);
    if (st != UCS_OK) {
      snprintf(msg, msglen, "ucp_config_modify %s=%s", keys[i], values[i]);
      l->config_release(cfg);
      return st;
    }
  }
  ucp_params_t p;
  memset(&p, 0, sizeof(p));
  // Workers of this context run on different threads (hal/ucx: one sends,
  // one receives): the context locks what they share (registrations).
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  p.features = features;
  p.mt_workers_shared = 1;
  p.name = "weft";
  // API 1.12: every structure and call used here exists from UCX 1.12 on.
  st = l->init_version(1, 12, &p, cfg, out);
  l->config_release(cfg);
  if (st != UCS_OK) snprintf(msg, msglen, "ucp_init");
  return st;
}

void weft_ucx_cleanup(weft_ucx_lib* l, ucp_context_h c) { l->cleanup(c); }

int weft_ucx_memory_types(weft_ucx_lib* l, ucp_context_h c, uint64_t* types) {
  ucp_context_attr_t a;
  memset(&a, 0, sizeof(a));
  a.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ucs_status_t st = l->context_query(c, &a);
  *types = a.memory_types;
  return st;
}

// am_recv keeps a copy of an eager message; rendezvous messages and those
// longer than max_len are released and counted as dropped.
static ucs_status_t am_recv(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
  weft_ucx_worker* w = arg;
  size_t n = header_length + length;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || n > w->max_len) {
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) w->lib->am_data_release(w->worker, data);
    w->dropped++;
    return UCS_OK;
  }
  weft_ucx_am* m = malloc(sizeof(*m) + n + 1);
  if (!m) {
    w->dropped++;
    return UCS_OK;
  }
  m->next = NULL;
  m->len = n;
  if (header_length) memcpy(m->data, header, header_length);
  if (length) memcpy(m->data + header_length, data, length);
  if (w->tail)
    w->tail->next = m;
  else
    w->head = m;
  w->tail = m;
  w->queued++;
  return UCS_OK;  // the data was copied; UCX may release it
}

int weft_ucx_worker_create(weft_ucx_lib* l, ucp_context_h c, unsigned am_id, size_t max_len, weft_ucx_worker** out) {
  weft_ucx_worker* w = calloc(1, sizeof(*w));
  if (!w) return UCS_ERR_NO_MEMORY;
  w->lib = l;
  w->max_len = max_len;
  w->efd = -1;
  ucp_worker_params_t p;
  memset(&p, 0, sizeof(p));
  p.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  p.thread_mode = UCS_THREAD_MODE_SINGLE;  // weft serialises every call on the worker
  ucs_status_t st = l->worker_create(c, &p, &w->worker);
  if (st != UCS_OK) {
    free(w);
    return st;
  }
  ucp_am_handler_param_t h;
  memset(&h, 0, sizeof(h));
  h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  h.id = am_id;
  h.cb = am_recv;
  h.arg = w;
  if ((st = l->set_am_recv_handler(w->worker, &h)) != UCS_OK || (st = l->worker_get_efd(w->worker, &w->efd)) != UCS_OK) {
    l->worker_destroy(w->worker);
    free(w);
    return st;
  }
  *out = w;
  return UCS_OK;
}

void weft_ucx_worker_destroy(weft_ucx_worker* w) {
  weft_ucx_am* m;
  while ((m = weft_ucx_am_pop(w))) free(m);
  w->lib->worker_destroy(w->worker);
  free(w);
}

int weft_ucx_worker_address(weft_ucx_worker* w, void* buf, size_t cap, size_t* len) {
  ucp_address_t* a = NULL;
  size_t n = 0;
  ucs_status_t st = w->lib->worker_get_address(w->worker, &a, &n);
  if (st != UCS_OK) return st;
  *len = n;
  if (n <= cap) memcpy(buf, a, n);
  w->lib->worker_release_address(w->worker, a);
  return n <= cap ? UCS_OK : UCS_ERR_EXCEEDS_LIMIT;
}

unsigned weft_ucx_progress(weft_ucx_worker* w) { return w->lib->worker_progress(w->worker); }

int weft_ucx_arm(weft_ucx_worker* w) { return w->lib->worker_arm(w->worker); }

int weft_ucx_signal(weft_ucx_worker* w) { return w->lib->worker_signal(w->worker); }

// weft_ucx_wait_fd waits for fd to be readable: 1 readable, 0 timed out,
// or -errno.
int weft_ucx_wait_fd(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int n = poll(&p, 1, timeout_ms);
  if (n < 0) return errno == EINTR ? 0 : -errno;
  return n > 0;
}

weft_ucx_am* weft_ucx_am_pop(weft_ucx_worker* w) {
  weft_ucx_am* m = w->head;
  if (m) {
    w->head = m->next;
    if (!w->head) w->tail = NULL;
    w->queued--;
  }
  return m;
}

static void ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  weft_ucx_ep* e = arg;
  if (e->status == UCS_OK) e->status = status;
}

// weft_ucx_ep_create connects with peer-failure handling; where the
// transports to that peer offer none (UCX's shared-memory transports),
// without it (*peer_mode 0): weft then learns of a lost peer only from
// its own side channel and deadlines.
int weft_ucx_ep_create(weft_ucx_worker* w, const void* addr, weft_ucx_ep** out, int* peer_mode) {
  weft_ucx_ep* e = calloc(1, sizeof(*e));
  if (!e) return UCS_ERR_NO_MEMORY;
  e->lib = w->lib;
  ucp_ep_params_t p;
  memset(&p, 0, sizeof(p));
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  p.address = addr;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = ep_error;
  p.err_handler.arg = e;
  *peer_mode = 1;
  ucs_status_t st = w->no_peer_mode ? UCS_ERR_UNREACHABLE : w->lib->ep_create(w->worker, &p, &e->ep);
  if (st == UCS_ERR_UNREACHABLE) {
    w->no_peer_mode = 1;  // UCX logs the refusal once per worker, not per endpoint
    p.field_mask &= ~(uint64_t)(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    *peer_mode = 0;
    st = w->lib->ep_create(w->worker, &p, &e->ep);
  }
  if (st != UCS_OK) {
    free(e);
    return st;
  }
  *out = e;
  return UCS_OK;
}

// Non-blocking calls return a request to poll, or NULL with *status the
// immediate result.
static void* request_of(ucs_status_ptr_t p, int* status) {
  if (p == NULL) {
    *status = UCS_OK;
    return NULL;
  }
  if (WEFT_UCS_PTR_IS_ERR(p)) {
    *status = WEFT_UCS_PTR_STATUS(p);
    return NULL;
  }
  *status = UCS_INPROGRESS;
  return p;
}

// weft_ucx_ep_close starts closing e; the weft_ucx_ep is freed here, the
// request (if any) is the caller's to poll and free.
void* weft_ucx_ep_close(weft_ucx_ep* e, int force, int* status) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof(p));
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* r = request_of(e->lib->ep_close_nbx(e->ep, &p), status);
  free(e);
  return r;
}

int weft_ucx_mem_map(weft_ucx_lib* l, ucp_context_h c, uint64_t addr, uint64_t len, int mem_type, ucp_mem_h* out) {
  ucp_mem_map_params_t p;
  memset(&p, 0, sizeof(p));
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  p.address = (void*)(uintptr_t)addr;
  p.length = len;
  if (mem_type >= 0) {
    p.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    p.memory_type = (ucs_memory_type_t)mem_type;
  }
  return l->mem_map(c, &p, out);
}

int weft_ucx_mem_unmap(weft_ucx_lib* l, ucp_context_h c, ucp_mem_h m) { return l->mem_unmap(c, m); }

int weft_ucx_rkey_pack(weft_ucx_lib* l, ucp_context_h c, ucp_mem_h m, void* buf, size_t cap, size_t* len) {
  void* rb = NULL;
  size_t n = 0;
  ucs_status_t st = l->rkey_pack(c, m, &rb, &n);
  if (st != UCS_OK) return st;
  *len = n;
  if (n <= cap) memcpy(buf, rb, n);
  l->rkey_buffer_release(rb);
  return n <= cap ? UCS_OK : UCS_ERR_EXCEEDS_LIMIT;
}

int weft_ucx_rkey_unpack(weft_ucx_ep* e, const void* buf, ucp_rkey_h* out) {
  return e->lib->ep_rkey_unpack(e->ep, buf, out);
}

void weft_ucx_rkey_destroy(weft_ucx_lib* l, ucp_rkey_h k) { l->rkey_destroy(k); }

void* weft_ucx_put(weft_ucx_ep* e, uint64_t src, uint64_t len, uint64_t raddr, ucp_rkey_h k, int* status) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof(p));
  return request_of(e->lib->put_nbx(e->ep, (const void*)(uintptr_t)src, len, raddr, k, &p), status);
}

void* weft_ucx_flush(weft_ucx_ep* e, int* status) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof(p));
  return request_of(e->lib->ep_flush_nbx(e->ep, &p), status);
}

// weft_ucx_am_send sends len bytes of data (which must stay valid until
// the request completes) as an eager active message without header.
void* weft_ucx_am_send(weft_ucx_ep* e, unsigned id, const void* data, size_t len, int* status) {
  ucp_request_param_t p;
  memset(&p, 0, sizeof(p));
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  return request_of(e->lib->am_send_nbx(e->ep, id, NULL, 0, data, len, &p), status);
}

int weft_ucx_request_status(weft_ucx_lib* l, void* req) { return l->request_check_status(req); }

void weft_ucx_request_free(weft_ucx_lib* l, void* req) { l->request_free(req); }
