//go:build cgo

// ibverbs.c: libibverbs loaded with dlopen. weft_ibv_open resolves the
// library symbols weft calls into a table per library (a test may load
// weft's in-memory provider beside the system library); the data-path
// verbs go through the provider's table in struct ibv_context, as the
// inline functions of verbs.h do. Trampolines return 0 or an errno value.

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibverbs.h"

struct weft_ibv_lib {
  void* handle;
  weft_ibv_get_device_list_fn get_device_list;
  weft_ibv_free_device_list_fn free_device_list;
  weft_ibv_get_device_name_fn get_device_name;
  weft_ibv_open_device_fn open_device;
  weft_ibv_close_device_fn close_device;
  weft_ibv_query_device_fn query_device;
  weft_ibv_query_port_fn query_port;
  weft_ibv_query_gid_fn query_gid;
  weft_ibv_alloc_pd_fn alloc_pd;
  weft_ibv_dealloc_pd_fn dealloc_pd;
  weft_ibv_reg_mr_fn reg_mr;
  weft_ibv_reg_dmabuf_mr_fn reg_dmabuf_mr;  // NULL before rdma-core v34
  weft_ibv_dereg_mr_fn dereg_mr;
  weft_ibv_create_cq_fn create_cq;
  weft_ibv_destroy_cq_fn destroy_cq;
  weft_ibv_create_qp_fn create_qp;
  weft_ibv_modify_qp_fn modify_qp;
  weft_ibv_destroy_qp_fn destroy_qp;
  weft_ibv_wc_status_str_fn wc_status_str;
};

// errno of a failed call that returned -1 or a non-zero code.
static int rc_errno(int rc) {
  if (rc == 0) return 0;
  if (rc > 0) return rc;
  return errno ? errno : EIO;
}

int weft_ibv_open(const char* path, weft_ibv_lib** out, char* msg, int msglen) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    snprintf(msg, msglen, "%s", e ? e : "dlopen failed");
    return 1;
  }
  weft_ibv_lib* l = calloc(1, sizeof(*l));
  if (!l) {
    dlclose(h);
    snprintf(msg, msglen, "out of memory");
    return 1;
  }
  l->handle = h;
#define SYM(field, name)                                   \
  do {                                                     \
    *(void**)(&l->field) = dlsym(h, name);                 \
    if (!l->field) {                                       \
      snprintf(msg, msglen, "%s: symbol %s missing", path, name); \
      dlclose(h);                                          \
      free(l);                                             \
      return 2;                                            \
    }                                                      \
  } while (0)
  SYM(get_device_list, "ibv_get_device_list");
  SYM(free_device_list, "ibv_free_device_list");
  SYM(get_device_name, "ibv_get_device_name");
  SYM(open_device, "ibv_open_device");
  SYM(close_device, "ibv_close_device");
  SYM(query_device, "ibv_query_device");
  SYM(query_port, "ibv_query_port");
  SYM(query_gid, "ibv_query_gid");
  SYM(alloc_pd, "ibv_alloc_pd");
  SYM(dealloc_pd, "ibv_dealloc_pd");
  SYM(reg_mr, "ibv_reg_mr");
  SYM(dereg_mr, "ibv_dereg_mr");
  SYM(create_cq, "ibv_create_cq");
  SYM(destroy_cq, "ibv_destroy_cq");
  SYM(create_qp, "ibv_create_qp");
  SYM(modify_qp, "ibv_modify_qp");
  SYM(destroy_qp, "ibv_destroy_qp");
  SYM(wc_status_str, "ibv_wc_status_str");
#undef SYM
  *(void**)(&l->reg_dmabuf_mr) = dlsym(h, "ibv_reg_dmabuf_mr");
  *out = l;
  return 0;
}

int weft_ibv_has_dmabuf(weft_ibv_lib* l) { return l->reg_dmabuf_mr != NULL; }

// names receives up to max names of 64 bytes each; *n is the device count.
int weft_ibv_device_names(weft_ibv_lib* l, char* names, int max, int* n) {
  errno = 0;
  int num = 0;
  struct ibv_device** list = l->get_device_list(&num);
  if (!list) return errno ? errno : ENOSYS;
  for (int i = 0; i < num && i < max; i++) {
    const char* s = l->get_device_name(list[i]);
    snprintf(names + 64 * i, 64, "%s", s ? s : "");
  }
  *n = num;
  l->free_device_list(list);
  return 0;
}

int weft_ibv_open_device(weft_ibv_lib* l, const char* name, struct ibv_context** out) {
  errno = 0;
  int num = 0;
  struct ibv_device** list = l->get_device_list(&num);
  if (!list) return errno ? errno : ENOSYS;
  int rc = ENODEV;
  for (int i = 0; i < num; i++) {
    const char* s = l->get_device_name(list[i]);
    if (s && strcmp(s, name) == 0) {
      errno = 0;
      *out = l->open_device(list[i]);
      rc = *out ? 0 : (errno ? errno : EIO);
      break;
    }
  }
  l->free_device_list(list);
  return rc;
}

int weft_ibv_close_device(weft_ibv_lib* l, struct ibv_context* c) { return rc_errno(l->close_device(c)); }

int weft_ibv_query_device(weft_ibv_lib* l, struct ibv_context* c, struct ibv_device_attr* a) {
  memset(a, 0, sizeof(*a));
  return rc_errno(l->query_device(c, a));
}

int weft_ibv_query_port(weft_ibv_lib* l, struct ibv_context* c, int port, struct ibv_port_attr* a) {
  memset(a, 0, sizeof(*a));  // as verbs.h's inline wrapper does before the library call
  return rc_errno(l->query_port(c, (uint8_t)port, a));
}

int weft_ibv_query_gid(weft_ibv_lib* l, struct ibv_context* c, int port, int index, uint8_t* gid) {
  union ibv_gid g;
  memset(&g, 0, sizeof(g));
  int rc = rc_errno(l->query_gid(c, (uint8_t)port, index, &g));
  memcpy(gid, g.raw, 16);
  return rc;
}

int weft_ibv_alloc_pd(weft_ibv_lib* l, struct ibv_context* c, struct ibv_pd** out) {
  errno = 0;
  *out = l->alloc_pd(c);
  return *out ? 0 : (errno ? errno : ENOMEM);
}

int weft_ibv_dealloc_pd(weft_ibv_lib* l, struct ibv_pd* pd) { return rc_errno(l->dealloc_pd(pd)); }

int weft_ibv_reg_mr(weft_ibv_lib* l, struct ibv_pd* pd, uint64_t addr, uint64_t len, int access, struct ibv_mr** out) {
  errno = 0;
  *out = l->reg_mr(pd, (void*)(uintptr_t)addr, (size_t)len, access);
  return *out ? 0 : (errno ? errno : EINVAL);
}

int weft_ibv_reg_dmabuf_mr(weft_ibv_lib* l, struct ibv_pd* pd, uint64_t off, uint64_t len, uint64_t iova, int fd,
                           int access, struct ibv_mr** out) {
  if (!l->reg_dmabuf_mr) return ENOSYS;
  errno = 0;
  *out = l->reg_dmabuf_mr(pd, off, (size_t)len, iova, fd, access);
  return *out ? 0 : (errno ? errno : EINVAL);
}

int weft_ibv_dereg_mr(weft_ibv_lib* l, struct ibv_mr* mr) { return rc_errno(l->dereg_mr(mr)); }

int weft_ibv_create_cq(weft_ibv_lib* l, struct ibv_context* c, int cqe, struct ibv_cq** out) {
  errno = 0;
  *out = l->create_cq(c, cqe, NULL, NULL, 0);
  return *out ? 0 : (errno ? errno : ENOMEM);
}

int weft_ibv_destroy_cq(weft_ibv_lib* l, struct ibv_cq* cq) { return rc_errno(l->destroy_cq(cq)); }

int weft_ibv_create_rc_qp(weft_ibv_lib* l, struct ibv_pd* pd, struct ibv_cq* scq, struct ibv_cq* rcq,
                          uint32_t max_send_wr, uint32_t max_recv_wr, struct ibv_qp** out) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof(a));
  a.send_cq = scq;
  a.recv_cq = rcq;
  a.cap.max_send_wr = max_send_wr;
  a.cap.max_recv_wr = max_recv_wr;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.qp_type = IBV_QPT_RC;
  errno = 0;
  *out = l->create_qp(pd, &a);
  return *out ? 0 : (errno ? errno : ENOMEM);
}

int weft_ibv_destroy_qp(weft_ibv_lib* l, struct ibv_qp* qp) { return rc_errno(l->destroy_qp(qp)); }

int weft_ibv_qp_init(weft_ibv_lib* l, struct ibv_qp* qp, int port, int access) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = (uint8_t)port;
  a.qp_access_flags = (unsigned)access;
  return rc_errno(l->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

int weft_ibv_qp_rtr(weft_ibv_lib* l, struct ibv_qp* qp, int port, uint32_t dest_qpn, uint32_t rq_psn, int mtu,
                    uint16_t dlid, int is_global, const uint8_t* dgid, int sgid_index, int max_dest_rd_atomic) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = (uint8_t)max_dest_rd_atomic;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = dlid;
  a.ah_attr.port_num = (uint8_t)port;
  if (is_global) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
    a.ah_attr.grh.hop_limit = 255;
  }
  return rc_errno(l->modify_qp(qp, &a,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
}

int weft_ibv_qp_rts(weft_ibv_lib* l, struct ibv_qp* qp, uint32_t sq_psn, int timeout, int retry_cnt, int rnr_retry,
                    int max_rd_atomic) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = sq_psn;
  a.timeout = (uint8_t)timeout;
  a.retry_cnt = (uint8_t)retry_cnt;
  a.rnr_retry = (uint8_t)rnr_retry;
  a.max_rd_atomic = (uint8_t)max_rd_atomic;
  return rc_errno(l->modify_qp(qp, &a,
                               IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_MAX_QP_RD_ATOMIC));
}

int weft_ibv_qp_state(weft_ibv_lib* l, struct ibv_qp* qp, int state) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = state;
  return rc_errno(l->modify_qp(qp, &a, IBV_QP_STATE));
}

// weft_ibv_post_send posts n requests as one chain (ibv_post_send is an
// inline call through the provider's table). *posted is the number
// accepted before the first refused one.
int weft_ibv_post_send(struct ibv_qp* qp, const weft_wr* wrs, int n, int* posted) {
  enum { MAXWR = 64 };
  struct ibv_send_wr wr[MAXWR];
  struct ibv_sge sge[MAXWR];
  *posted = 0;
  if (n <= 0) return 0;
  if (n > MAXWR) return EINVAL;
  memset(wr, 0, sizeof(wr[0]) * n);
  for (int i = 0; i < n; i++) {
    const weft_wr* w = &wrs[i];
    sge[i].addr = w->laddr;
    sge[i].length = w->len;
    sge[i].lkey = w->lkey;
    wr[i].wr_id = w->wr_id;
    wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    wr[i].sg_list = w->len ? &sge[i] : NULL;
    wr[i].num_sge = w->len ? 1 : 0;
    wr[i].opcode = w->opcode;
    wr[i].send_flags = w->flags;
    if (w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr[i].wr.atomic.remote_addr = w->raddr;
      wr[i].wr.atomic.compare_add = w->add;
      wr[i].wr.atomic.rkey = w->rkey;
    } else {
      wr[i].wr.rdma.remote_addr = w->raddr;
      wr[i].wr.rdma.rkey = w->rkey;
      wr[i].imm_data = __builtin_bswap32(w->imm);
    }
  }
  struct ibv_send_wr* bad = NULL;
  int rc = qp->context->ops.post_send(qp, wr, &bad);
  if (rc == 0) {
    *posted = n;
    return 0;
  }
  *posted = bad ? (int)(bad - wr) : 0;
  return rc_errno(rc);
}

int weft_ibv_post_recv(struct ibv_qp* qp, const uint64_t* wr_ids, const uint64_t* addrs, uint32_t len, uint32_t lkey,
                       int n, int* posted) {
  enum { MAXWR = 64 };
  struct ibv_recv_wr wr[MAXWR];
  struct ibv_sge sge[MAXWR];
  *posted = 0;
  if (n <= 0) return 0;
  if (n > MAXWR) return EINVAL;
  for (int i = 0; i < n; i++) {
    sge[i].addr = addrs[i];
    sge[i].length = len;
    sge[i].lkey = lkey;
    wr[i].wr_id = wr_ids[i];
    wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    wr[i].sg_list = len ? &sge[i] : NULL;
    wr[i].num_sge = len ? 1 : 0;
  }
  struct ibv_recv_wr* bad = NULL;
  int rc = qp->context->ops.post_recv(qp, wr, &bad);
  if (rc == 0) {
    *posted = n;
    return 0;
  }
  *posted = bad ? (int)(bad - wr) : 0;
  return rc_errno(rc);
}

int weft_ibv_poll_cq(struct ibv_cq* cq, struct ibv_wc* wc, int n) { return cq->context->ops.poll_cq(cq, n, wc); }

const char* weft_ibv_wc_status_str(weft_ibv_lib* l, int status) { return l->wc_status_str(status); }
