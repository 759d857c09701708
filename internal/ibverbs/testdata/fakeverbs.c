// fakeverbs.c: weft's in-memory verbs provider, built by the tests of
// internal/ibverbs and hal/ib into a shared library that stands in for
// libibverbs.so.1 (WEFT_IBVERBS_LIB). It is a provider, not a stub: RDMA
// requests move real bytes between memory regions of one process (ranks
// are goroutines of the test), with the checks a NIC makes.
//
//   - devices, one port each, InfiniBand (LID addressing) or RoCE (GID
//     addressing, GID 1 an IPv4-mapped address);
//   - protection domains; memory regions with distinct lkey and rkey,
//     checked against the region's range, access flags and domain;
//     dma-buf regions mapped from the file descriptor (a memfd in tests);
//   - completion queues of a fixed capacity; an overrun one fails every
//     later poll;
//   - RC queue pairs with the RESET → INIT → RTR → RTS state machine and
//     its required attributes; posting to a queue pair not in RTS fails;
//     a send queue holds at most max_send_wr requests until their
//     completions are polled;
//   - RDMA write, write with immediate (consuming a receive request of the
//     target and completing it on the target's receive queue) and 64-bit
//     fetch-and-add, executed in order per queue pair;
//   - errors as completions: bad lkey (local protection), bad rkey or
//     range or access (remote access), target queue pair missing,
//     destroyed, not connected back or addressed with the wrong LID/GID
//     (transport retry counter exceeded), no receive request with
//     rnr_retry < 7 (RNR retry exceeded), message above the port's
//     max_msg_sz (local length); after an error the queue pair is in ERR
//     and later requests complete flushed.
//
// Configuration, read at each call: FAKEVERBS_DEVICES (comma-separated
// names, ":roce" for RoCE, "none" for no device; default "fakeib0"),
// FAKEVERBS_PORT_DOWN (a device whose port is down), FAKEVERBS_MAX_MSG
// (max_msg_sz, default 1 GiB), FAKEVERBS_CQ_CAP (real capacity of every
// CQ, to provoke overruns), FAKEVERBS_DEFER=n (requests execute only when
// their send queue's CQ is polled, one every n-th poll, so completions
// lag).

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "weft_ibverbs.h"

#define MAXDEV 8

struct fake_device {
  char name[64];
  int roce;
  int index;
};

struct fake_ctx {
  struct ibv_context ctx;
  struct fake_device* dev;
};

struct fake_mr {
  struct ibv_mr mr;
  int access;
  uint8_t* host;  // where iova maps in this process
  uint64_t iova;
  void* mapped;  // dma-buf mapping to unmap
  struct fake_mr* next;
};

struct fake_cq {
  struct ibv_cq cq;
  struct ibv_wc* ring;
  int cap, head, count, overrun;
};

struct fake_swr {
  struct ibv_send_wr wr;
  struct ibv_sge sge;
};

struct fake_rwr {
  uint64_t wr_id;
  struct ibv_sge sge;
  int has_sge;
};

struct fake_qp {
  struct ibv_qp qp;
  struct fake_device* dev;
  int port, access, rnr_retry, sig_all;
  uint32_t dest_qpn;
  uint16_t dlid;
  int is_global;
  uint8_t dgid[16];
  struct fake_swr* sq;
  int sq_cap, sq_head, sq_count, inflight;
  struct fake_rwr* rq;
  int rq_cap, rq_head, rq_count;
  struct fake_qp* next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_device devs[MAXDEV];
static struct fake_mr* mrs;
static struct fake_qp* qps;
static uint32_t next_qpn = 0x100, next_key = 1, next_handle = 1;

static int envint(const char* name, long def, long* out) {
  const char* s = getenv(name);
  if (!s || !*s) {
    *out = def;
    return 0;
  }
  *out = strtol(s, NULL, 0);
  return 1;
}

// deferred is FAKEVERBS_DEFER: 0 executes requests when posted; n > 0
// executes them only in polls of their send CQ, one request every n-th
// poll, so completions lag behind posts.
static int deferred(void) {
  const char* s = getenv("FAKEVERBS_DEFER");
  return s && *s ? atoi(s) : 0;
}

static unsigned long polls;

// load_devices parses FAKEVERBS_DEVICES into devs; returns the count.
static int load_devices(void) {
  const char* s = getenv("FAKEVERBS_DEVICES");
  if (!s || !*s) s = "fakeib0";
  if (strcmp(s, "none") == 0) return 0;
  int n = 0;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", s);
  for (char* save = NULL, *tok = strtok_r(buf, ",", &save); tok && n < MAXDEV; tok = strtok_r(NULL, ",", &save)) {
    char* colon = strchr(tok, ':');
    int roce = 0;
    if (colon) {
      roce = strcmp(colon + 1, "roce") == 0;
      *colon = 0;
    }
    snprintf(devs[n].name, sizeof(devs[n].name), "%s", tok);
    devs[n].roce = roce;
    devs[n].index = n;
    n++;
  }
  return n;
}

struct ibv_device** ibv_get_device_list(int* num) {
  pthread_mutex_lock(&mu);
  int n = load_devices();
  struct ibv_device** list = calloc(n + 1, sizeof(*list));
  for (int i = 0; i < n; i++) list[i] = (struct ibv_device*)&devs[i];
  pthread_mutex_unlock(&mu);
  if (num) *num = n;
  return list;
}

void ibv_free_device_list(struct ibv_device** list) { free(list); }

const char* ibv_get_device_name(struct ibv_device* d) { return ((struct fake_device*)d)->name; }

static int fake_poll_cq(struct ibv_cq* cq, int n, struct ibv_wc* wc);
static int fake_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad);
static int fake_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad);

struct ibv_context* ibv_open_device(struct ibv_device* d) {
  struct fake_ctx* c = calloc(1, sizeof(*c));
  if (!c) {
    errno = ENOMEM;
    return NULL;
  }
  c->dev = (struct fake_device*)d;
  c->ctx.device = d;
  c->ctx.ops.poll_cq = fake_poll_cq;
  c->ctx.ops.post_send = fake_post_send;
  c->ctx.ops.post_recv = fake_post_recv;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = -1;
  c->ctx.num_comp_vectors = 1;
  return &c->ctx;
}

int ibv_close_device(struct ibv_context* c) {
  free(c);
  return 0;
}

static struct fake_device* dev_of(struct ibv_context* c) { return ((struct fake_ctx*)c)->dev; }

static uint64_t guid_of(struct fake_device* d) { return 0x0002c90300a00000ull + (uint64_t)d->index; }

int ibv_query_device(struct ibv_context* c, struct ibv_device_attr* a) {
  struct fake_device* d = dev_of(c);
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "weft-fake-1.0");
  a->node_guid = __builtin_bswap64(guid_of(d));
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = 1ull << 40;
  a->max_qp = 1 << 16;
  a->max_qp_wr = 16384;
  a->max_sge = 1;
  a->max_cq = 1 << 16;
  a->max_cqe = 1 << 20;
  a->max_mr = 1 << 20;
  a->max_pd = 1 << 10;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->atomic_cap = 1;
  a->phys_port_cnt = 1;
  return 0;
}

int ibv_query_port(struct ibv_context* c, uint8_t port, struct ibv_port_attr* a) {
  struct fake_device* d = dev_of(c);
  if (port != 1) return EINVAL;
  long maxmsg;
  envint("FAKEVERBS_MAX_MSG", 1l << 30, &maxmsg);
  const char* down = getenv("FAKEVERBS_PORT_DOWN");
  memset(a, 0, sizeof(*a));
  a->state = (down && strcmp(down, d->name) == 0) ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = d->roce ? IBV_MTU_1024 : IBV_MTU_4096;
  a->gid_tbl_len = d->roce ? 2 : 1;
  a->max_msg_sz = (uint32_t)maxmsg;
  a->lid = d->roce ? 0 : (uint16_t)(d->index + 1);
  a->link_layer = d->roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

static void gid_of(struct fake_device* d, int index, uint8_t* g) {
  memset(g, 0, 16);
  if (index == 0) {  // link-local fe80::guid
    g[0] = 0xfe;
    g[1] = 0x80;
    uint64_t guid = guid_of(d);
    for (int i = 0; i < 8; i++) g[8 + i] = (uint8_t)(guid >> (56 - 8 * i));
  } else {  // ::ffff:10.0.0.(index+1)
    g[10] = g[11] = 0xff;
    g[12] = 10;
    g[15] = (uint8_t)(d->index + 1);
  }
}

int ibv_query_gid(struct ibv_context* c, uint8_t port, int index, union ibv_gid* gid) {
  struct fake_device* d = dev_of(c);
  if (port != 1 || index < 0 || index >= (d->roce ? 2 : 1)) return EINVAL;
  gid_of(d, index, gid->raw);
  return 0;
}

struct ibv_pd* ibv_alloc_pd(struct ibv_context* c) {
  struct ibv_pd* pd = calloc(1, sizeof(*pd));
  if (!pd) {
    errno = ENOMEM;
    return NULL;
  }
  pd->context = c;
  pthread_mutex_lock(&mu);
  pd->handle = next_handle++;
  pthread_mutex_unlock(&mu);
  return pd;
}

int ibv_dealloc_pd(struct ibv_pd* pd) {
  pthread_mutex_lock(&mu);
  for (struct fake_mr* m = mrs; m; m = m->next)
    if (m->mr.pd == pd) {
      pthread_mutex_unlock(&mu);
      return EBUSY;
    }
  pthread_mutex_unlock(&mu);
  free(pd);
  return 0;
}

static struct ibv_mr* new_mr(struct ibv_pd* pd, uint8_t* host, uint64_t iova, size_t len, int access, void* mapped) {
  struct fake_mr* m = calloc(1, sizeof(*m));
  if (!m) {
    errno = ENOMEM;
    return NULL;
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = (void*)(uintptr_t)iova;
  m->mr.length = len;
  m->access = access;
  m->host = host;
  m->iova = iova;
  m->mapped = mapped;
  pthread_mutex_lock(&mu);
  uint32_t k = next_key++;
  m->mr.handle = k;
  m->mr.lkey = k << 8 | 0x11;
  m->mr.rkey = k << 8 | 0x22;
  m->next = mrs;
  mrs = m;
  pthread_mutex_unlock(&mu);
  return &m->mr;
}

struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t len, int access) {
  if (!addr || len == 0) {
    errno = EINVAL;
    return NULL;
  }
  // A NIC needs local write to be allowed for remote write and atomics.
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return NULL;
  }
  return new_mr(pd, addr, (uint64_t)(uintptr_t)addr, len, access, NULL);
}

struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  if (len == 0 || fd < 0) {
    errno = EINVAL;
    return NULL;
  }
  long page = 4096;
  uint64_t base = offset & ~(uint64_t)(page - 1);
  size_t span = len + (offset - base);
  void* p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
  if (p == MAP_FAILED) return NULL;
  struct ibv_mr* mr = new_mr(pd, (uint8_t*)p + (offset - base), iova, len, access, p);
  if (!mr) munmap(p, span);
  return mr;
}

int ibv_dereg_mr(struct ibv_mr* mr) {
  pthread_mutex_lock(&mu);
  for (struct fake_mr** pp = &mrs; *pp; pp = &(*pp)->next)
    if (&(*pp)->mr == mr) {
      struct fake_mr* m = *pp;
      *pp = m->next;
      pthread_mutex_unlock(&mu);
      if (m->mapped) munmap(m->mapped, m->mr.length + (size_t)(m->host - (uint8_t*)m->mapped));
      free(m);
      return 0;
    }
  pthread_mutex_unlock(&mu);
  return EINVAL;
}

struct ibv_cq* ibv_create_cq(struct ibv_context* c, int cqe, void* ctx, struct ibv_comp_channel* ch, int vec) {
  (void)ch;
  (void)vec;
  if (cqe <= 0 || cqe > (1 << 20)) {
    errno = EINVAL;
    return NULL;
  }
  long cap;
  int capped = envint("FAKEVERBS_CQ_CAP", cqe, &cap);
  if (!capped || cap > cqe) cap = cqe;
  struct fake_cq* q = calloc(1, sizeof(*q));
  if (!q) {
    errno = ENOMEM;
    return NULL;
  }
  q->ring = calloc((size_t)cap, sizeof(struct ibv_wc));
  q->cap = (int)cap;
  q->cq.context = c;
  q->cq.cq_context = ctx;
  q->cq.cqe = cqe;  // what was asked: an overrun below it is the fault injected
  return &q->cq;
}

int ibv_destroy_cq(struct ibv_cq* cq) {
  struct fake_cq* q = (struct fake_cq*)cq;
  pthread_mutex_lock(&mu);
  for (struct fake_qp* p = qps; p; p = p->next)
    if (p->qp.send_cq == cq || p->qp.recv_cq == cq) {
      pthread_mutex_unlock(&mu);
      return EBUSY;
    }
  pthread_mutex_unlock(&mu);
  free(q->ring);
  free(q);
  return 0;
}

static void push_cqe(struct ibv_cq* cq, const struct ibv_wc* wc) {
  struct fake_cq* q = (struct fake_cq*)cq;
  if (q->count == q->cap) {
    q->overrun = 1;
    return;
  }
  q->ring[(q->head + q->count) % q->cap] = *wc;
  q->count++;
}

struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* a) {
  if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq || a->cap.max_send_wr == 0 ||
      a->cap.max_send_wr > 16384 || a->cap.max_recv_wr > 16384 || a->cap.max_send_sge > 1 || a->cap.max_recv_sge > 1) {
    errno = EINVAL;
    return NULL;
  }
  struct fake_qp* p = calloc(1, sizeof(*p));
  if (!p) {
    errno = ENOMEM;
    return NULL;
  }
  p->sq_cap = (int)a->cap.max_send_wr;
  p->sq = calloc((size_t)p->sq_cap, sizeof(*p->sq));
  p->rq_cap = a->cap.max_recv_wr > 0 ? (int)a->cap.max_recv_wr : 1;
  p->rq = calloc((size_t)p->rq_cap, sizeof(*p->rq));
  p->sig_all = a->sq_sig_all;
  p->dev = dev_of(pd->context);
  p->qp.context = pd->context;
  p->qp.qp_context = a->qp_context;
  p->qp.pd = pd;
  p->qp.send_cq = a->send_cq;
  p->qp.recv_cq = a->recv_cq;
  p->qp.qp_type = IBV_QPT_RC;
  p->qp.state = IBV_QPS_RESET;
  pthread_mutex_lock(&mu);
  p->qp.qp_num = next_qpn++;
  p->qp.handle = next_handle++;
  p->next = qps;
  qps = p;
  pthread_mutex_unlock(&mu);
  return &p->qp;
}

static struct fake_qp* find_qp(uint32_t qpn) {
  for (struct fake_qp* p = qps; p; p = p->next)
    if (p->qp.qp_num == qpn) return p;
  return NULL;
}

int ibv_destroy_qp(struct ibv_qp* qp) {
  struct fake_qp* p = (struct fake_qp*)qp;
  pthread_mutex_lock(&mu);
  for (struct fake_qp** pp = &qps; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  pthread_mutex_unlock(&mu);
  free(p->sq);
  free(p->rq);
  free(p);
  return 0;
}

enum {
  INIT_MASK = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
  RTR_MASK = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER,
  RTS_MASK = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC,
};

int ibv_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask) {
  struct fake_qp* p = (struct fake_qp*)qp;
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  int rc = 0;
  pthread_mutex_lock(&mu);
  int from = p->qp.state, to = a->qp_state;
  if (to == IBV_QPS_ERR) {
    p->qp.state = IBV_QPS_ERR;
  } else if (to == IBV_QPS_RESET) {
    p->qp.state = IBV_QPS_RESET;
    p->sq_count = p->rq_count = p->inflight = 0;
  } else if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if ((mask & INIT_MASK) != INIT_MASK || a->port_num != 1) rc = EINVAL;
    else {
      p->port = a->port_num;
      p->access = (int)a->qp_access_flags;
      p->qp.state = to;
    }
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if ((mask & RTR_MASK) != RTR_MASK || a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096) rc = EINVAL;
    else if (p->dev->roce && !a->ah_attr.is_global) rc = EINVAL;  // RoCE needs a GRH
    else if (!p->dev->roce && a->ah_attr.dlid == 0) rc = EINVAL;  // IB needs a LID
    else {
      p->dest_qpn = a->dest_qp_num;
      p->dlid = a->ah_attr.dlid;
      p->is_global = a->ah_attr.is_global;
      memcpy(p->dgid, a->ah_attr.grh.dgid.raw, 16);
      p->qp.state = to;
    }
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if ((mask & RTS_MASK) != RTS_MASK) rc = EINVAL;
    else {
      p->rnr_retry = a->rnr_retry;
      p->qp.state = to;
    }
  } else {
    rc = EINVAL;
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

// find_mr finds the region of pd whose key (lkey or rkey) is key and that
// holds [addr, addr+len).
static struct fake_mr* find_mr(struct ibv_pd* pd, uint32_t key, int remote, uint64_t addr, uint64_t len) {
  for (struct fake_mr* m = mrs; m; m = m->next) {
    if (m->mr.pd != pd || (remote ? m->mr.rkey : m->mr.lkey) != key) continue;
    if (addr < m->iova || addr + len > m->iova + m->mr.length || addr + len < addr) return NULL;
    return m;
  }
  return NULL;
}

static int addressed(struct fake_qp* p, struct fake_qp* t) {
  if (!p->dev->roce) return p->dlid == t->dev->index + 1 && !t->dev->roce;
  if (!p->is_global || !t->dev->roce) return 0;
  for (int i = 0; i < 2; i++) {
    uint8_t g[16];
    gid_of(t->dev, i, g);
    if (memcmp(g, p->dgid, 16) == 0) return 1;
  }
  return 0;
}

static void complete(struct fake_qp* p, const struct ibv_send_wr* wr, int status, int opcode, uint32_t len) {
  int signaled = (wr->send_flags & IBV_SEND_SIGNALED) || p->sig_all;
  if (status == IBV_WC_SUCCESS && !signaled) {
    p->inflight--;
    return;
  }
  struct ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  wc.wr_id = wr->wr_id;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = len;
  wc.qp_num = p->qp.qp_num;
  push_cqe(p->qp.send_cq, &wc);
  if (status != IBV_WC_SUCCESS) p->qp.state = IBV_QPS_ERR;
}

// exec_one executes the request at the head of p's send queue: 0 done, 1
// blocked (the target has no receive request and rnr_retry is 7).
static int exec_one(struct fake_qp* p, struct fake_swr* s) {
  struct ibv_send_wr* wr = &s->wr;
  int atomic = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  int wcop = atomic ? IBV_WC_FETCH_ADD : IBV_WC_RDMA_WRITE;
  uint32_t len = wr->num_sge ? s->sge.length : 0;
  if (p->qp.state == IBV_QPS_ERR) {
    complete(p, wr, IBV_WC_WR_FLUSH_ERR, wcop, 0);
    return 0;
  }
  struct fake_mr* lm = NULL;
  if (len > 0) {
    lm = find_mr(p->qp.pd, s->sge.lkey, 0, s->sge.addr, len);
    if (!lm || (atomic && !(lm->access & IBV_ACCESS_LOCAL_WRITE))) {
      complete(p, wr, IBV_WC_LOC_PROT_ERR, wcop, 0);
      return 0;
    }
  }
  long maxmsg;
  envint("FAKEVERBS_MAX_MSG", 1l << 30, &maxmsg);
  if (len > (uint64_t)maxmsg || (atomic && len != 8)) {
    complete(p, wr, IBV_WC_LOC_LEN_ERR, wcop, 0);
    return 0;
  }
  struct fake_qp* t = find_qp(p->dest_qpn);
  // A target not yet connected drops the packets; the requester retries
  // (a real NIC for retry_cnt × timeout; here until it connects).
  if (t && t->qp.state == IBV_QPS_INIT && addressed(p, t)) return 1;
  if (!t || !addressed(p, t) || t->dest_qpn != p->qp.qp_num || (t->qp.state != IBV_QPS_RTR && t->qp.state != IBV_QPS_RTS)) {
    complete(p, wr, IBV_WC_RETRY_EXC_ERR, wcop, 0);
    return 0;
  }
  uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
  uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
  struct fake_mr* rm = NULL;
  if (len > 0 || atomic) {
    rm = find_mr(t->qp.pd, rkey, 1, raddr, atomic ? 8 : len);
    int need = atomic ? IBV_ACCESS_REMOTE_ATOMIC : IBV_ACCESS_REMOTE_WRITE;
    if (!rm || !(rm->access & need) || !(t->access & need) || (atomic && raddr % 8 != 0)) {
      complete(p, wr, IBV_WC_REM_ACCESS_ERR, wcop, 0);
      return 0;
    }
  }
  if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && t->rq_count == 0) {
    if (p->rnr_retry == 7) return 1;
    complete(p, wr, IBV_WC_RNR_RETRY_EXC_ERR, wcop, 0);
    return 0;
  }
  if (atomic) {
    uint64_t* target = (uint64_t*)(rm->host + (raddr - rm->iova));
    uint64_t old = __atomic_fetch_add(target, wr->wr.atomic.compare_add, __ATOMIC_SEQ_CST);
    memcpy(lm->host + (s->sge.addr - lm->iova), &old, 8);
  } else if (len > 0) {
    memcpy(rm->host + (raddr - rm->iova), lm->host + (s->sge.addr - lm->iova), len);
    __atomic_thread_fence(__ATOMIC_RELEASE);
  }
  if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    struct fake_rwr r = t->rq[t->rq_head];
    t->rq_head = (t->rq_head + 1) % t->rq_cap;
    t->rq_count--;
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    wc.byte_len = len;
    wc.imm_data = wr->imm_data;
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.qp_num = t->qp.qp_num;
    wc.src_qp = p->qp.qp_num;
    push_cqe(t->qp.recv_cq, &wc);
  }
  complete(p, wr, IBV_WC_SUCCESS, wcop, len);
  return 0;
}

// progress executes p's queued requests in order, at most max of them.
static void progress(struct fake_qp* p, int max) {
  while (p->sq_count > 0 && max-- > 0) {
    if (exec_one(p, &p->sq[p->sq_head])) return;
    p->sq_head = (p->sq_head + 1) % p->sq_cap;
    p->sq_count--;
  }
}

static int fake_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  struct fake_qp* p = (struct fake_qp*)qp;
  int rc = 0;
  pthread_mutex_lock(&mu);
  for (; wr; wr = wr->next) {
    if (p->qp.state != IBV_QPS_RTS) {
      rc = EINVAL;
      break;
    }
    if (wr->num_sge > 1 || (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
                            wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD)) {
      rc = EINVAL;
      break;
    }
    if (p->inflight >= p->sq_cap) {
      rc = ENOMEM;
      break;
    }
    struct fake_swr* s = &p->sq[(p->sq_head + p->sq_count) % p->sq_cap];
    s->wr = *wr;
    s->wr.next = NULL;
    if (wr->num_sge == 1) s->sge = wr->sg_list[0];
    s->wr.sg_list = &s->sge;
    p->sq_count++;
    p->inflight++;
  }
  if (rc && bad) *bad = wr;
  if (!deferred()) progress(p, 1 << 30);
  pthread_mutex_unlock(&mu);
  return rc;
}

static int fake_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  struct fake_qp* p = (struct fake_qp*)qp;
  int rc = 0;
  pthread_mutex_lock(&mu);
  for (; wr; wr = wr->next) {
    if (p->qp.state == IBV_QPS_RESET || p->qp.state == IBV_QPS_ERR || wr->num_sge > 1) {
      rc = EINVAL;
      break;
    }
    if (p->rq_count == p->rq_cap) {
      rc = ENOMEM;
      break;
    }
    struct fake_rwr* r = &p->rq[(p->rq_head + p->rq_count) % p->rq_cap];
    r->wr_id = wr->wr_id;
    r->has_sge = wr->num_sge;
    if (wr->num_sge) r->sge = wr->sg_list[0];
    p->rq_count++;
  }
  if (rc && bad) *bad = wr;
  // Requests waiting for a receive request of this queue pair go on.
  if (!deferred())
    for (struct fake_qp* s = qps; s; s = s->next)
      if (s->dest_qpn == p->qp.qp_num && s->sq_count) progress(s, 1 << 30);
  pthread_mutex_unlock(&mu);
  return rc;
}

static int fake_poll_cq(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
  struct fake_cq* q = (struct fake_cq*)cq;
  pthread_mutex_lock(&mu);
  int defer = deferred();
  int budget = defer ? (++polls % (unsigned long)defer == 0) : 1 << 30;
  for (struct fake_qp* p = qps; p; p = p->next)
    if (p->qp.send_cq == cq && p->sq_count && budget > 0) {
      int before = p->sq_count;
      progress(p, budget);
      if (defer) budget -= before - p->sq_count;
    }
  if (q->overrun) {
    pthread_mutex_unlock(&mu);
    return -1;
  }
  int got = 0;
  while (got < n && q->count > 0) {
    wc[got] = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    if (!(wc[got].opcode & IBV_WC_RECV)) {
      struct fake_qp* p = find_qp(wc[got].qp_num);
      if (p && p->inflight > 0) p->inflight--;
    }
    got++;
  }
  pthread_mutex_unlock(&mu);
  return got;
}

static const char* status_names[] = {
    "success", "local length error", "local QP operation error", "local EE context operation error",
    "local protection error", "Work Request Flushed Error", "memory management operation error",
    "bad response error", "local access error", "remote invalid request error", "remote access error",
    "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
    "local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
    "invalid EE context state", "fatal error", "response timeout error", "general error",
};

const char* ibv_wc_status_str(int status) {
  if (status < 0 || status >= (int)(sizeof(status_names) / sizeof(status_names[0]))) return "unknown";
  return status_names[status];
}
