// fakehip.c: a fake HIP runtime (libamdhip64.so) for the tests of
// internal/hip and hal/xgmi on machines without ROCm. The tests build it
// with the system C compiler (cc -shared -fPIC) and load it with
// hip.LoadFrom. It implements every call weft binds, with host memory:
//
//   - device memory is memfd-backed host memory (filled with 0xa5, so that
//     a test sees whether weft zeroes it), host memory likewise; an IPC
//     handle names the exporter's pid and memfd, and opening it maps the
//     same memory again at another address (also from another process,
//     through /proc/<pid>/fd);
//   - streams and events execute synchronously; hipStreamWriteValue64
//     stores; stream capture records kernel launches into a graph that
//     hipGraphLaunch replays;
//   - hipModuleLoadData takes the code objects of the fake hipRTC
//     (fakertc.c), and hipModuleLaunchKernel checks its "extra" argument
//     and appends a line describing the launch (kernel, grid, block,
//     shared bytes, parameter bytes in hex) to the file FAKEHIP_LOG names.
//
// Pointers and handles are checked (unknown, freed, out of range), so that
// a broken binding fails. Environment:
//
//   FAKEHIP_FAIL     comma-separated calls to fail: "hipMalloc" (hipError
//                    999) or "hipStreamQuery=600" (that code);
//   FAKEHIP_DEVICES  number of devices (default 2);
//   FAKEHIP_NO_PEER  when set, hipDeviceCanAccessPeer answers 0;
//   FAKEHIP_ARCH     gcnArchName (default "gfx942:sramecc+:xnack-");
//   FAKEHIP_LOG      file that launches are appended to.
//
// Built with -DFAKE_ROCM5 it has the shape of ROCm 5: no
// hipGetDevicePropertiesR0600 (hipGetDeviceProperties, with another
// layout, instead), no hipDeviceGetUuid, and hipHostAlloc in place of
// hipHostMalloc.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../weft_hip.h"

#define WEFT_DECLARE(name, ret, params) ret name params;
WEFT_HIP_FUNCS(WEFT_DECLARE)

// ---- error injection ---------------------------------------------------------

// fake_fail returns the code FAKEHIP_FAIL gives for call, or 0.
static hipError_t fake_fail(const char* call) {
  const char* env = getenv("FAKEHIP_FAIL");
  if (env == NULL) return 0;
  size_t n = strlen(call);
  for (const char* p = env; *p;) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len >= n && strncmp(p, call, n) == 0 && (len == n || p[n] == '=')) {
      return len == n ? 999 : atoi(p + n + 1);
    }
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

#define FAIL(call)                       \
  {                                      \
    hipError_t injected = fake_fail(call); \
    if (injected) return injected;       \
  }

static int env_int(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static int ndevices(void) { return env_int("FAKEHIP_DEVICES", 2); }

static const char* arch_name(void) {
  const char* v = getenv("FAKEHIP_ARCH");
  return v && *v ? v : "gfx942:sramecc+:xnack-";
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int current = 0;

static void fake_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void fake_log(const char* fmt, ...) {
  const char* path = getenv("FAKEHIP_LOG");
  if (path == NULL || *path == 0) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

// ---- errors and versions -------------------------------------------------------

static const struct {
  int code;
  const char* name;
} names[] = {
    {0, "hipSuccess"},         {1, "hipErrorInvalidValue"},   {2, "hipErrorOutOfMemory"},
    {100, "hipErrorNoDevice"}, {101, "hipErrorInvalidDevice"}, {200, "hipErrorInvalidImage"},
    {209, "hipErrorNoBinaryForGpu"}, {400, "hipErrorInvalidHandle"}, {401, "hipErrorIllegalState"},
    {500, "hipErrorNotFound"}, {600, "hipErrorNotReady"},      {704, "hipErrorPeerAccessAlreadyEnabled"},
    {801, "hipErrorNotSupported"}, {900, "hipErrorStreamCaptureUnsupported"}, {999, "hipErrorUnknown"},
};

const char* hipGetErrorName(hipError_t r) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == r) return names[i].name;
  static __thread char buf[64];
  snprintf(buf, sizeof buf, "hipErrorFake%d", r);
  return buf;
}

const char* hipGetErrorString(hipError_t r) {
  static __thread char buf[96];
  snprintf(buf, sizeof buf, "fake HIP error %d", r);
  return buf;
}

hipError_t hipInit(unsigned int flags) {
  FAIL("hipInit");
  return flags == 0 ? 0 : 1;
}

hipError_t hipDriverGetVersion(int* v) {
  FAIL("hipDriverGetVersion");
  *v = 60342134;
  return 0;
}

hipError_t hipRuntimeGetVersion(int* v) {
  FAIL("hipRuntimeGetVersion");
  *v = 60342134;
  return 0;
}

// ---- devices --------------------------------------------------------------------

static int valid_dev(int d) { return d >= 0 && d < ndevices(); }

hipError_t hipGetDeviceCount(int* n) {
  FAIL("hipGetDeviceCount");
  *n = ndevices();
  return *n ? 0 : 100;
}

hipError_t hipSetDevice(int d) {
  FAIL("hipSetDevice");
  if (!valid_dev(d)) return 101;
  current = d;
  return 0;
}

hipError_t hipDeviceGetName(char* name, int len, hipDevice_t d) {
  FAIL("hipDeviceGetName");
  if (!valid_dev(d)) return 101;
  snprintf(name, len, "AMD Instinct MI300X (fake %d)", d);
  return 0;
}

hipError_t hipDeviceGetAttribute(int* v, int attr, int d) {
  FAIL("hipDeviceGetAttribute");
  if (!valid_dev(d)) return 101;
  switch (attr) {
    case 23: *v = 9; return 0;            // compute capability major
    case 56: *v = 1024; return 0;         // max threads per block
    case 61: *v = 4; return 0;            // compute capability minor
    case 63: *v = 304; return 0;          // compute units
    case 74: *v = 65536; return 0;        // shared memory per block
    case 87: *v = 64; return 0;           // wavefront size
    case 10016: *v = 1; return 0;         // fine-grain support
    case 10017: *v = env_int("FAKEHIP_WALLCLOCK_KHZ", 100000); return 0;
  }
  return 1;
}

hipError_t hipDeviceGetPCIBusId(char* id, int len, int d) {
  FAIL("hipDeviceGetPCIBusId");
  if (!valid_dev(d)) return 101;
  snprintf(id, len, "0000:%02X:00.0", 0x0c + 0x10 * d);
  return 0;
}

hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t d) {
  FAIL("hipDeviceTotalMem");
  if (!valid_dev(d)) return 101;
  *bytes = (size_t)192 << 30;
  return 0;
}

#ifndef FAKE_ROCM5
hipError_t hipDeviceGetUuid(hipUUID* u, hipDevice_t d) {
  FAIL("hipDeviceGetUuid");
  if (!valid_dev(d)) return 101;
  for (int i = 0; i < 16; i++) u->bytes[i] = (char)(0x10 * d + i);
  return 0;
}

// The R0600 layout: name at 0, gcnArchName at 1160 of 1472 bytes.
hipError_t hipGetDevicePropertiesR0600(void* p, int d) {
  FAIL("hipGetDevicePropertiesR0600");
  if (!valid_dev(d)) return 101;
  memset(p, 0, 1472);
  snprintf((char*)p, 256, "AMD Instinct MI300X (fake %d)", d);
  snprintf((char*)p + 1160, 256, "%s", arch_name());
  return 0;
}
#else
// An older layout, with the name elsewhere: weft searches for it.
hipError_t hipGetDeviceProperties(void* p, int d) {
  FAIL("hipGetDeviceProperties");
  if (!valid_dev(d)) return 101;
  memset(p, 0, 792);
  snprintf((char*)p, 256, "AMD Instinct MI250X (fake %d)", d);
  int gcn = 910;
  memcpy((char*)p + 392, &gcn, sizeof gcn);
  snprintf((char*)p + 396, 256, "%s", arch_name());
  return 0;
}
#endif

hipError_t hipDeviceCanAccessPeer(int* can, int d, int peer) {
  FAIL("hipDeviceCanAccessPeer");
  if (!valid_dev(d) || !valid_dev(peer)) return 101;
  *can = d != peer && getenv("FAKEHIP_NO_PEER") == NULL;
  return 0;
}

static unsigned char peers[64][64];

hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
  FAIL("hipDeviceEnablePeerAccess");
  if (!valid_dev(peer) || flags != 0 || peer == current) return 1;
  if (getenv("FAKEHIP_NO_PEER")) return 217;
  pthread_mutex_lock(&mu);
  int was = peers[current][peer];
  peers[current][peer] = 1;
  pthread_mutex_unlock(&mu);
  return was ? 704 : 0;
}

// ---- memory -----------------------------------------------------------------

enum kind { K_FREE, K_DEVICE, K_HOST, K_IPC };

struct alloc {
  enum kind kind;
  char* base;
  size_t size;
  int fd;
  int dev;
  unsigned flags;
};

#define MAX_ALLOCS 8192
static struct alloc allocs[MAX_ALLOCS];

static hipError_t new_alloc(enum kind k, size_t n, unsigned flags, void** out) {
  int fd = memfd_create("fakehip", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)(n ? n : 1)) != 0) return 2;
  void* p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return 2;
  }
  memset(p, 0xa5, n);
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++) {
    if (allocs[i].kind == K_FREE) {
      allocs[i] = (struct alloc){k, p, n, fd, current, flags};
      pthread_mutex_unlock(&mu);
      *out = p;
      return 0;
    }
  }
  pthread_mutex_unlock(&mu);
  munmap(p, n ? n : 1);
  close(fd);
  return 2;
}

// find returns the live allocation holding [p, p+n), or NULL.
static struct alloc* find(const void* p, size_t n) {
  const char* c = p;
  for (int i = 0; i < MAX_ALLOCS; i++) {
    struct alloc* a = &allocs[i];
    if (a->kind != K_FREE && c >= a->base && c < a->base + (a->size ? a->size : 1) && n <= (size_t)(a->base + a->size - c))
      return a;
  }
  return NULL;
}

static struct alloc* find_base(const void* p, enum kind k) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].kind == k && allocs[i].base == p) return &allocs[i];
  return NULL;
}

static hipError_t release(const void* p, enum kind k) {
  pthread_mutex_lock(&mu);
  struct alloc* a = find_base(p, k);
  if (a == NULL) {
    pthread_mutex_unlock(&mu);
    return 1;
  }
  munmap(a->base, a->size ? a->size : 1);
  close(a->fd);
  a->kind = K_FREE;
  pthread_mutex_unlock(&mu);
  return 0;
}

hipError_t hipExtMallocWithFlags(void** p, size_t n, unsigned int flags) {
  FAIL("hipExtMallocWithFlags");
  if (flags > 4) return 1;
  return new_alloc(K_DEVICE, n, flags, p);
}

hipError_t hipFree(void* p) {
  FAIL("hipFree");
  return p == NULL ? 0 : release(p, K_DEVICE);
}

static hipError_t host_alloc(void** p, size_t n, unsigned int flags) {
  if (flags & ~(0x1u | 0x2u | 0x4u | 0x40000000u | 0x80000000u)) return 1;
  return new_alloc(K_HOST, n, flags, p);
}

#ifndef FAKE_ROCM5
hipError_t hipHostMalloc(void** p, size_t n, unsigned int flags) {
  FAIL("hipHostMalloc");
  return host_alloc(p, n, flags);
}
#else
hipError_t hipHostAlloc(void** p, size_t n, unsigned int flags) {
  FAIL("hipHostAlloc");
  return host_alloc(p, n, flags);
}
#endif

hipError_t hipHostGetDevicePointer(void** d, void* h, unsigned int flags) {
  FAIL("hipHostGetDevicePointer");
  pthread_mutex_lock(&mu);
  struct alloc* a = find(h, 0);
  int ok = a != NULL && a->kind == K_HOST && (a->flags & 0x2) && flags == 0;
  pthread_mutex_unlock(&mu);
  if (!ok) return 1;
  *d = h;
  return 0;
}

hipError_t hipHostFree(void* p) {
  FAIL("hipHostFree");
  return release(p, K_HOST);
}

// check_copy accepts a copy whose device-side ranges are inside live
// allocations; host memory of the caller (Go memory) is accepted on one
// side when async is 0.
static hipError_t check_copy(void* dst, const void* src, size_t n, int async) {
  pthread_mutex_lock(&mu);
  struct alloc* d = find(dst, n);
  struct alloc* s = find(src, n);
  pthread_mutex_unlock(&mu);
  if (async ? (d == NULL || s == NULL) : (d == NULL && s == NULL)) return 1;
  return 0;
}

hipError_t hipMemcpy(void* dst, const void* src, size_t n, int kind) {
  FAIL("hipMemcpy");
  if (kind != 4) return 21;
  hipError_t r = check_copy(dst, src, n, 0);
  if (r == 0) memmove(dst, src, n);
  return r;
}

hipError_t hipMemset(void* dst, int v, size_t n) {
  FAIL("hipMemset");
  pthread_mutex_lock(&mu);
  struct alloc* a = find(dst, n);
  pthread_mutex_unlock(&mu);
  if (a == NULL) return 1;
  memset(dst, v, n);
  return 0;
}

hipError_t hipMemGetAddressRange(void** base, size_t* size, void* p) {
  FAIL("hipMemGetAddressRange");
  pthread_mutex_lock(&mu);
  struct alloc* a = find(p, 0);
  if (a != NULL) {
    *base = a->base;
    *size = a->size;
  }
  pthread_mutex_unlock(&mu);
  return a ? 0 : 1;
}

// ---- IPC --------------------------------------------------------------------

struct ipc {
  char magic[8];  // "FAKEIPC1"
  int32_t pid;
  int32_t fd;
  uint64_t size;
};

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* h, void* p) {
  FAIL("hipIpcGetMemHandle");
  pthread_mutex_lock(&mu);
  struct alloc* a = find_base(p, K_DEVICE);
  struct ipc v = {{'F', 'A', 'K', 'E', 'I', 'P', 'C', '1'}, getpid(), a ? a->fd : -1, a ? a->size : 0};
  pthread_mutex_unlock(&mu);
  if (a == NULL) return 400;
  memset(h, 0, sizeof *h);
  memcpy(h, &v, sizeof v);
  return 0;
}

hipError_t hipIpcOpenMemHandle(void** p, hipIpcMemHandle_t h, unsigned int flags) {
  FAIL("hipIpcOpenMemHandle");
  struct ipc v;
  memcpy(&v, &h, sizeof v);
  if (memcmp(v.magic, "FAKEIPC1", 8) != 0 || flags != 1) return 1;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", v.pid, v.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 205;
  void* q = mmap(NULL, v.size ? v.size : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (q == MAP_FAILED) {
    close(fd);
    return 205;
  }
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++) {
    if (allocs[i].kind == K_FREE) {
      allocs[i] = (struct alloc){K_IPC, q, v.size, fd, current, 0};
      pthread_mutex_unlock(&mu);
      *p = q;
      return 0;
    }
  }
  pthread_mutex_unlock(&mu);
  munmap(q, v.size ? v.size : 1);
  close(fd);
  return 2;
}

hipError_t hipIpcCloseMemHandle(void* p) {
  FAIL("hipIpcCloseMemHandle");
  return release(p, K_IPC);
}

// ---- streams, events, graphs ----------------------------------------------------

#define MAX_NODES 256

struct launch {
  char kernel[128];
  unsigned g[3], b[3], shared;
  size_t bytes;
  unsigned char params[4096];
};

struct graph {
  uint32_t magic;  // 0x47524146 live, 0 destroyed
  int n;
  struct launch nodes[MAX_NODES];
};

struct ihipStream_t {
  uint32_t magic;  // 0x5354524d live
  int dev;
  unsigned flags;
  struct graph* capture;
};

struct ihipEvent_t {
  uint32_t magic;  // 0x45564e54 live
  unsigned flags;
  int recorded;
  double t;
};

static int live_stream(hipStream_t s) { return s == NULL || s->magic == 0x5354524d; }

hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned int flags) {
  FAIL("hipStreamCreateWithFlags");
  if (flags > 1) return 1;
  struct ihipStream_t* q = calloc(1, sizeof *q);
  q->magic = 0x5354524d;
  q->dev = current;
  q->flags = flags;
  *s = q;
  return 0;
}

hipError_t hipStreamQuery(hipStream_t s) {
  FAIL("hipStreamQuery");
  return live_stream(s) ? 0 : 400;
}

hipError_t hipStreamSynchronize(hipStream_t s) {
  FAIL("hipStreamSynchronize");
  return live_stream(s) ? 0 : 400;
}

hipError_t hipStreamDestroy(hipStream_t s) {
  FAIL("hipStreamDestroy");
  if (s == NULL || !live_stream(s)) return 400;
  s->magic = 0;  // kept, so that a later use is seen
  return 0;
}

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, int kind, hipStream_t s) {
  FAIL("hipMemcpyAsync");
  if (!live_stream(s)) return 400;
  if (s && s->capture) return 900;
  if (kind != 4) return 21;
  hipError_t r = check_copy(dst, src, n, 1);
  if (r == 0) memmove(dst, src, n);
  return r;
}

hipError_t hipStreamWriteValue64(hipStream_t s, void* p, uint64_t v, unsigned int flags) {
  FAIL("hipStreamWriteValue64");
  if (!live_stream(s)) return 400;
  if (s && s->capture) return 900;
  pthread_mutex_lock(&mu);
  struct alloc* a = find(p, 8);
  pthread_mutex_unlock(&mu);
  if (a == NULL || ((uintptr_t)p & 7) || flags != 0) return 1;
  __atomic_store_n((uint64_t*)p, v, __ATOMIC_RELEASE);
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned int flags) {
  FAIL("hipEventCreateWithFlags");
  if (flags & ~0x7u) return 1;
  struct ihipEvent_t* q = calloc(1, sizeof *q);
  q->magic = 0x45564e54;
  q->flags = flags;
  *e = q;
  return 0;
}

static int live_event(hipEvent_t e) { return e != NULL && e->magic == 0x45564e54; }

hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  FAIL("hipEventRecord");
  if (!live_event(e) || !live_stream(s)) return 400;
  e->recorded = 1;
  e->t = now();
  return 0;
}

hipError_t hipEventQuery(hipEvent_t e) {
  FAIL("hipEventQuery");
  return live_event(e) ? 0 : 400;
}

hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t end) {
  FAIL("hipEventElapsedTime");
  if (!live_event(start) || !live_event(end)) return 400;
  if (!start->recorded || !end->recorded || (start->flags & 2) || (end->flags & 2)) return 400;
  *ms = (float)((end->t - start->t) * 1e3);
  return 0;
}

hipError_t hipEventDestroy(hipEvent_t e) {
  FAIL("hipEventDestroy");
  if (!live_event(e)) return 400;
  e->magic = 0;
  return 0;
}

// The fake runs work when it is queued, so a wait is already satisfied.
hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags) {
  FAIL("hipStreamWaitEvent");
  if (!live_stream(s) || !live_event(e) || flags != 0) return 400;
  return 0;
}

hipError_t hipStreamIsCapturing(hipStream_t s, int* status) {
  FAIL("hipStreamIsCapturing");
  if (!live_stream(s)) return 400;
  *status = (s && s->capture) ? 1 : 0;
  return 0;
}

hipError_t hipStreamBeginCapture(hipStream_t s, int mode) {
  FAIL("hipStreamBeginCapture");
  if (s == NULL || !live_stream(s) || s->capture || mode < 0 || mode > 2) return 1;
  s->capture = calloc(1, sizeof *s->capture);
  s->capture->magic = 0x47524146;
  return 0;
}

hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t* g) {
  FAIL("hipStreamEndCapture");
  if (s == NULL || !live_stream(s) || !s->capture) return 401;
  *g = (hipGraph_t)s->capture;
  s->capture = NULL;
  return 0;
}

static int live_graph(const void* g) { return g != NULL && ((const struct graph*)g)->magic == 0x47524146; }

hipError_t hipGraphInstantiate(hipGraphExec_t* e, hipGraph_t g, hipGraphNode_t* node, char* log, size_t n) {
  FAIL("hipGraphInstantiate");
  if (!live_graph(g) || node || log || n) return 1;
  struct graph* x = malloc(sizeof *x);
  memcpy(x, g, sizeof *x);
  *e = (hipGraphExec_t)x;
  return 0;
}

static void log_launch(const struct launch* l, int graph) {
  char hex[2 * sizeof l->params + 1];
  for (size_t i = 0; i < l->bytes; i++) sprintf(hex + 2 * i, "%02x", l->params[i]);
  hex[2 * l->bytes] = 0;
  fake_log("launch kernel=%s grid=%u,%u,%u block=%u,%u,%u shared=%u bytes=%zu graph=%d params=%s", l->kernel, l->g[0],
           l->g[1], l->g[2], l->b[0], l->b[1], l->b[2], l->shared, l->bytes, graph, hex);
}

hipError_t hipGraphLaunch(hipGraphExec_t e, hipStream_t s) {
  FAIL("hipGraphLaunch");
  if (!live_graph(e) || !live_stream(s)) return 400;
  const struct graph* x = (const struct graph*)e;
  for (int i = 0; i < x->n; i++) log_launch(&x->nodes[i], 1);
  return 0;
}

hipError_t hipGraphExecDestroy(hipGraphExec_t e) {
  FAIL("hipGraphExecDestroy");
  if (!live_graph(e)) return 400;
  ((struct graph*)e)->magic = 0;
  return 0;
}

hipError_t hipGraphDestroy(hipGraph_t g) {
  FAIL("hipGraphDestroy");
  if (!live_graph(g)) return 400;
  ((struct graph*)g)->magic = 0;
  return 0;
}

// ---- modules and launches -----------------------------------------------------

// A code object of the fake hipRTC: "FAKEHSACO\n" then "key=value\n"
// lines (arch, opt, kernel), NUL-terminated.
struct ihipModuleSymbol_t {
  char name[128];
};

struct ihipModule_t {
  uint32_t magic;  // 0x4d4f4455 live
  int n;
  struct ihipModuleSymbol_t kernels[32];
};

hipError_t hipModuleLoadData(hipModule_t* m, const void* image) {
  FAIL("hipModuleLoadData");
  const char* s = image;
  if (strncmp(s, "FAKEHSACO\n", 10) != 0) return 200;
  struct ihipModule_t* q = calloc(1, sizeof *q);
  q->magic = 0x4d4f4455;
  int archOK = 0;
  size_t base = strcspn(arch_name(), ":");
  for (const char* line = s + 10; *line;) {
    const char* end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len > 5 && strncmp(line, "arch=", 5) == 0 && len - 5 >= base && strncmp(line + 5, arch_name(), base) == 0)
      archOK = 1;
    if (len > 7 && strncmp(line, "kernel=", 7) == 0 && q->n < 32 && len - 7 < 128) {
      memcpy(q->kernels[q->n].name, line + 7, len - 7);
      q->n++;
    }
    if (!end) break;
    line = end + 1;
  }
  if (!archOK) {
    free(q);
    return 209;  // hipErrorNoBinaryForGpu
  }
  *m = q;
  return 0;
}

hipError_t hipModuleGetFunction(hipFunction_t* f, hipModule_t m, const char* name) {
  FAIL("hipModuleGetFunction");
  if (m == NULL || m->magic != 0x4d4f4455) return 400;
  for (int i = 0; i < m->n; i++) {
    if (strcmp(m->kernels[i].name, name) == 0) {
      *f = &m->kernels[i];
      return 0;
    }
  }
  return 500;
}

// Occupancy: FAKEHIP_OCCUPANCY blocks per compute unit, else 2048 threads'
// worth.
hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* n, hipFunction_t f, int threads, size_t shared) {
  FAIL("hipModuleOccupancyMaxActiveBlocksPerMultiprocessor");
  (void)shared;
  if (f == NULL || threads <= 0) return 1;
  const char* e = getenv("FAKEHIP_OCCUPANCY");
  *n = e != NULL ? atoi(e) : 2048 / threads;
  return 0;
}

hipError_t hipModuleUnload(hipModule_t m) {
  FAIL("hipModuleUnload");
  if (m == NULL || m->magic != 0x4d4f4455) return 400;
  m->magic = 0;
  return 0;
}

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                 unsigned int by, unsigned int bz, unsigned int shared, hipStream_t s, void** kernelParams,
                                 void** extra) {
  FAIL("hipModuleLaunchKernel");
  if (f == NULL || !live_stream(s)) return 400;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024) return 9;
  struct launch l;
  memset(&l, 0, sizeof l);
  snprintf(l.kernel, sizeof l.kernel, "%s", f->name);
  l.g[0] = gx, l.g[1] = gy, l.g[2] = gz, l.b[0] = bx, l.b[1] = by, l.b[2] = bz, l.shared = shared;
  if (kernelParams != NULL) return 1;  // weft passes its arguments through extra
  if (extra != NULL) {
    if (extra[0] != WEFT_HIP_LAUNCH_PARAM_BUFFER_POINTER || extra[2] != WEFT_HIP_LAUNCH_PARAM_BUFFER_SIZE ||
        extra[4] != WEFT_HIP_LAUNCH_PARAM_END)
      return 1;
    l.bytes = *(size_t*)extra[3];
    if (l.bytes > sizeof l.params) return 1;
    memcpy(l.params, extra[1], l.bytes);
  }
  if (s && s->capture) {
    if (s->capture->n == MAX_NODES) return 2;
    s->capture->nodes[s->capture->n++] = l;
    return 0;
  }
  log_launch(&l, 0);
  return 0;
}
