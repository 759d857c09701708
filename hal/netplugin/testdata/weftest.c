// weftest.c: a small NCCL net plugin for weft's tests. It exports the
// ncclNet v8 table (symbol ncclNetPlugin_v8, layout from weft's
// internal/ncclnet/weft_ncclnet.h) and moves messages over TCP on the
// loopback interface:
//
//   - listen binds 127.0.0.1:0; the handle carries a magic, the connect
//     stage, the connecting socket and the listening address;
//   - connect is non-blocking: the first call starts a non-blocking
//     connect and returns no comm, later calls return the comm once the
//     socket is writable; accept is non-blocking too;
//   - a message is an 8-byte frame header (size, tag; little-endian)
//     and size bytes; a comm's requests progress strictly in the order
//     they were posted, inside test;
//   - regMr takes host memory only (ptrSupport NCCL_PTR_HOST) and isend
//     and irecv check that their buffer lies in the registration;
//   - a receive shorter than the message, a tag mismatch or a peer that
//     closed mid-stream fail the comm: test returns ncclRemoteError (6)
//     or ncclInvalidUsage (5).
//
// Environment (read when called): WEFTEST_NDEV, the number of devices
// (default 1).

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "weft_ncclnet.h"

enum { OK = 0, SYSTEM = 2, INTERNAL = 3, USAGE = 5, REMOTE = 6 };
enum { MAXREQ = WEFT_NCCL_NET_MAX_REQUESTS, MAGIC = 0x57545354 /* "WTST" */ };

static weft_ncclDebugLogger_t logfn;
#define INFO(...) \
  do { if (logfn) logfn(3, 16, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define WARN(...) \
  do { if (logfn) logfn(2, 16, __FILE__, __LINE__, __VA_ARGS__); } while (0)

typedef struct {
  uint32_t magic;
  uint32_t stage;  // 0: connect not started, 1: in progress
  int32_t fd;      // the connecting socket (stage 1)
  uint32_t pad;
  struct sockaddr_in addr;
} handle_t;

_Static_assert(sizeof(handle_t) <= WEFT_NCCL_NET_HANDLE_MAXSIZE, "handle too large");

struct listen_comm {
  int fd;
};

struct mr {
  char* base;
  size_t size;
};

struct comm;

struct req {
  int used;
  struct comm* c;
  char* data;
  int size;  // send: bytes; receive: room
  int tag;
  unsigned char hdr[8];
  size_t hdone;  // header bytes moved
  size_t done;   // payload bytes moved
  int got;       // receive: message size
  int finished;
};

struct comm {
  int fd;
  int is_send;
  int failed;  // ncclResult of a broken comm
  struct req reqs[MAXREQ];
  int queue[MAXREQ];  // request indices in posting order
  int qhead, qlen;
};

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static weft_ncclResult_t wt_init(weft_ncclDebugLogger_t f) {
  logfn = f;
  INFO("weftest net plugin: loopback TCP");
  return OK;
}

static weft_ncclResult_t wt_devices(int* n) {
  const char* s = getenv("WEFTEST_NDEV");
  *n = s ? atoi(s) : 1;
  return OK;
}

static weft_ncclResult_t wt_properties(int dev, weft_ncclNetProperties_v8_t* p) {
  memset(p, 0, sizeof *p);
  p->name = "weftest0";
  p->pciPath = NULL;
  p->guid = (uint64_t)dev;
  p->ptrSupport = WEFT_NCCL_PTR_HOST;
  p->speed = 10000;
  p->port = 1;
  p->latency = 0;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  return OK;
}

static weft_ncclResult_t wt_listen(int dev, void* handle, void** out) {
  (void)dev;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return SYSTEM;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, (struct sockaddr*)&a, sizeof a) || listen(fd, 64) || set_nonblock(fd) ||
      getsockname(fd, (struct sockaddr*)&a, &len)) {
    close(fd);
    return SYSTEM;
  }
  struct listen_comm* l = calloc(1, sizeof *l);
  if (!l) {
    close(fd);
    return SYSTEM;
  }
  l->fd = fd;
  handle_t* h = handle;
  memset(h, 0, sizeof *h);
  h->magic = MAGIC;
  h->addr = a;
  *out = l;
  return OK;
}

static struct comm* new_comm(int fd, int is_send) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct comm* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = fd;
  c->is_send = is_send;
  return c;
}

static weft_ncclResult_t wt_connect(int dev, void* handle, void** out, weft_ncclNetDeviceHandle_v8_t** devComm) {
  (void)dev;
  (void)devComm;
  handle_t* h = handle;
  *out = NULL;
  if (h->magic != MAGIC) return INTERNAL;
  if (h->stage == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || set_nonblock(fd)) return SYSTEM;
    if (connect(fd, (struct sockaddr*)&h->addr, sizeof h->addr) && errno != EINPROGRESS) {
      close(fd);
      return SYSTEM;
    }
    h->fd = fd;
    h->stage = 1;
    return OK;  // call again
  }
  struct pollfd p = {.fd = h->fd, .events = POLLOUT};
  if (poll(&p, 1, 0) == 0) return OK;
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
    WARN("weftest: connect: %s", strerror(err ? err : errno));
    close(h->fd);
    h->stage = 0;
    return REMOTE;
  }
  struct comm* c = new_comm(h->fd, 1);
  if (!c) return SYSTEM;
  h->stage = 0;
  *out = c;
  return OK;
}

static weft_ncclResult_t wt_accept(void* listen, void** out, weft_ncclNetDeviceHandle_v8_t** devComm) {
  (void)devComm;
  struct listen_comm* l = listen;
  *out = NULL;
  int fd = accept(l->fd, NULL, NULL);
  if (fd < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? OK : SYSTEM;
  if (set_nonblock(fd)) {
    close(fd);
    return SYSTEM;
  }
  struct comm* c = new_comm(fd, 0);
  if (!c) {
    close(fd);
    return SYSTEM;
  }
  *out = c;
  return OK;
}

static weft_ncclResult_t wt_regmr(void* comm, void* data, size_t size, int type, void** mh) {
  (void)comm;
  if (type != WEFT_NCCL_PTR_HOST) return INTERNAL;
  struct mr* m = malloc(sizeof *m);
  if (!m) return SYSTEM;
  m->base = data;
  m->size = size;
  *mh = m;
  return OK;
}

static weft_ncclResult_t wt_deregmr(void* comm, void* mh) {
  (void)comm;
  free(mh);
  return OK;
}

static int in_mr(struct mr* m, void* data, int size) {
  char* d = data;
  return m && size >= 0 && d >= m->base && d + size <= m->base + m->size;
}

static struct req* post(struct comm* c, void* data, int size, int tag) {
  if (c->qlen == MAXREQ) return NULL;
  for (int i = 0; i < MAXREQ; i++) {
    struct req* r = &c->reqs[i];
    if (r->used) continue;
    memset(r, 0, sizeof *r);
    r->used = 1;
    r->c = c;
    r->data = data;
    r->size = size;
    r->tag = tag;
    c->queue[(c->qhead + c->qlen) % MAXREQ] = i;
    c->qlen++;
    return r;
  }
  return NULL;
}

static weft_ncclResult_t wt_isend(void* comm, void* data, int size, int tag, void* mh, void** req) {
  struct comm* c = comm;
  *req = NULL;
  if (!c->is_send || !in_mr(mh, data, size)) return INTERNAL;
  if (c->failed) return c->failed;
  struct req* r = post(c, data, size, tag);
  if (!r) return OK;  // busy: call again
  uint32_t s = (uint32_t)size, t = (uint32_t)tag;
  memcpy(r->hdr, &s, 4);
  memcpy(r->hdr + 4, &t, 4);
  *req = r;
  return OK;
}

static weft_ncclResult_t wt_irecv(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** req) {
  struct comm* c = comm;
  *req = NULL;
  if (c->is_send || n != 1 || !in_mr(mhs[0], data[0], sizes[0])) return INTERNAL;
  if (c->failed) return c->failed;
  struct req* r = post(c, data[0], sizes[0], tags[0]);
  if (r) *req = r;
  return OK;
}

static weft_ncclResult_t wt_iflush(void* comm, int n, void** data, int* sizes, void** mhs, void** req) {
  (void)comm, (void)n, (void)data, (void)sizes, (void)mhs;
  *req = NULL;  // host memory: nothing to flush
  return OK;
}

// io moves bytes of one request; it returns 1 when it moved some, 0 when
// the socket would block, -1 when the comm broke.
static int io(struct comm* c, char* p, size_t n, size_t* done) {
  while (*done < n) {
    ssize_t k = c->is_send ? send(c->fd, p + *done, n - *done, MSG_NOSIGNAL) : recv(c->fd, p + *done, n - *done, 0);
    if (k > 0) {
      *done += (size_t)k;
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    return -1;  // end of stream or error
  }
  return 1;
}

// progress advances the comm's requests in posting order.
static void progress(struct comm* c) {
  while (c->qlen > 0 && !c->failed) {
    struct req* r = &c->reqs[c->queue[c->qhead]];
    if (r->finished) {  // finished, not yet tested
      break;
    }
    int k = io(c, (char*)r->hdr, sizeof r->hdr, &r->hdone);
    if (k < 0) {
      c->failed = REMOTE;
      return;
    }
    if (k == 0) return;
    if (!c->is_send && r->done == 0 && r->got == 0) {
      uint32_t s, t;
      memcpy(&s, r->hdr, 4);
      memcpy(&t, r->hdr + 4, 4);
      if ((int)s > r->size || s > 0x7fffffffu) {
        WARN("weftest: message of %u bytes for a receive of %d", s, r->size);
        c->failed = USAGE;
        return;
      }
      if ((int)t != r->tag) {
        WARN("weftest: message tag %u, receive tag %d", t, r->tag);
        c->failed = USAGE;
        return;
      }
      r->got = (int)s;
      if (s == 0) r->got = -1;  // zero-byte message: header only
    }
    size_t want = c->is_send ? (size_t)r->size : (r->got < 0 ? 0 : (size_t)r->got);
    k = io(c, r->data, want, &r->done);
    if (k < 0) {
      c->failed = REMOTE;
      return;
    }
    if (k == 0) return;
    r->finished = 1;
    c->qhead = (c->qhead + 1) % MAXREQ;
    c->qlen--;
  }
}

static weft_ncclResult_t wt_test(void* req, int* done, int* size) {
  struct req* r = req;
  struct comm* c = r->c;
  progress(c);
  *done = 0;
  if (r->finished) {
    *done = 1;
    if (size) *size = c->is_send ? r->size : (r->got < 0 ? 0 : r->got);
    r->used = 0;
    return OK;
  }
  return c->failed;
}

static weft_ncclResult_t close_comm(void* comm) {
  struct comm* c = comm;
  close(c->fd);
  free(c);
  return OK;
}

static weft_ncclResult_t wt_close_listen(void* listen) {
  struct listen_comm* l = listen;
  close(l->fd);
  free(l);
  return OK;
}

weft_ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "weftest",
    .init = wt_init,
    .devices = wt_devices,
    .getProperties = wt_properties,
    .listen = wt_listen,
    .connect = wt_connect,
    .accept = wt_accept,
    .regMr = wt_regmr,
    .regMrDmaBuf = NULL,
    .deregMr = wt_deregmr,
    .isend = wt_isend,
    .irecv = wt_irecv,
    .iflush = wt_iflush,
    .test = wt_test,
    .closeSend = close_comm,
    .closeRecv = close_comm,
    .closeListen = wt_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
