/* cbench: an NCCL client in C that sweeps message sizes for each collective, the way
 * nccl-tests does, so that the same binary can be timed against the system's libnccl.so.2 and,
 * unchanged, with LD_PRELOAD=libweft_nccl.so.
 *
 * Build (GPU host):  make -C examples/cbench      (gcc + /usr/include/nccl.h + -lnccl -lcudart)
 * Run, one process per GPU, started by cbench itself (fork + exec of itself):
 *   examples/cbench/cbench -g 2 -t allreduce,allgather -b 8 -e 256M -f 4 -G 20 -c 1
 * or by a launcher (mpirun, torchrun-style RANK/WORLD_SIZE):
 *   mpirun -np 2 examples/cbench/cbench -b 8 -e 256M -f 4 -G 20
 * MPI is not linked: rank 0 writes the ncclUniqueId to a file that the other ranks read
 * (-u PATH, default /tmp/cbench.<job>.id with <job> from PMIX_NAMESPACE, MASTER_PORT or the
 * launching cbench's pid).
 *
 * Columns: size in bytes (nccl-tests' convention: allgather the received total, reducescatter
 * the sent total, alltoall each rank's send buffer, gather the root's received total, scatter the
 * root's sent total), time in us per operation (the largest over
 * ranks), algbw = size/time, busbw = algbw x factor: allreduce 2(n-1)/n; allgather,
 * reducescatter and alltoall (n-1)/n; broadcast, reduce and sendrecv 1. #wrong counts wrong
 * elements over all ranks after one checked run per size (-c 1); inputs are small integers so
 * every result is exact in every type. -o premulsum checks NCCL's per-rank rule: every rank
 * creates its PreMulSum operator with its own scalar (1 + rank % 2), host-immediate or, with
 * -S device, in device memory, and rank r's input is multiplied by rank r's scalar before the
 * sum. -d all runs every NCCL 2.28 type in turn on one communicator. -G N captures the -n
 * iterations in a CUDA graph and replays it N times (time = total / (n x N)); -G 0 times plain launches.
 * -R 1 allocates the send and receive buffers with ncclMemAlloc and registers both with
 * ncclCommRegister (as nccl-tests -R 1): NCCL and weft may then move point-to-point data straight
 * into the receive buffer (weft's zero-copy path, docs/collectives.md); -R 2 allocates them with
 * ncclMemAlloc and registers each as a window with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)
 * (NCCL 2.27+: NCCL's symmetric kernels; weft's zero-copy copy-engine AllReduce, docs/nccl.md);
 * -R 0 (default) uses cudaMalloc.
 * -s 1 issues the receives of grouped send/recv (sendrecv, and alltoall with -a p2p) on a second
 * stream, forked from the main stream by an event before the group and joined back after it (the
 * fork/join PyTorch uses, legal inside a graph capture): NCCL runs one group's operations on
 * several streams as one launch, and a library that ordered them one after the other would hang.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#define CUDACHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "[rank %d] %s:%d %s: %s\n", g_rank, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(2); } } while (0)
#define NCCLCHECK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { \
  fprintf(stderr, "[rank %d] %s:%d %s: %s (%s)\n", g_rank, __FILE__, __LINE__, #x, ncclGetErrorString(r_), \
          ncclGetLastError(g_comm)); exit(3); } } while (0)

enum { AR, AG, RS, BC, RD, A2A, SR, GA, SC, NCOLL };
static const char *coll_name[NCOLL] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
                                        "sendrecv",  "gather",    "scatter"};

static int g_rank, g_n, g_dev;
static ncclComm_t g_comm;
static cudaStream_t g_stream;
static cudaStream_t g_rstream;          /* -s 1: the stream of grouped receives (else g_stream) */
static cudaEvent_t g_fork, g_join;      /* -s 1: fork g_rstream from g_stream, join it back */
static ncclDataType_t g_dt = ncclFloat;
static ncclRedOp_t g_op = ncclSum;
static size_t g_tsize = 4;
static int g_root = 0;
static enum cudaStreamCaptureMode g_capmode = cudaStreamCaptureModeGlobal; /* PyTorch's default */
static const char *g_tname = "float", *g_oname = "sum";
/* -o premulsum: g_op is made by ncclRedOpCreatePreMulSum with this rank's own scalar
 * (premul_scalar), host-immediate or, with -S device, read from device memory by every call. */
static int g_premul, g_scalar_device;
static void *g_scalar_dev; /* the device-resident scalar (-S device) */
typedef ncclResult_t (*alltoall_fn)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
static alltoall_fn g_alltoall; /* ncclAlltoAll where the library has it (NCCL >= 2.28), else grouped p2p */
/* ncclGather and ncclScatter (NCCL >= 2.28): root gathers / scatters count elements per rank. */
typedef ncclResult_t (*rooted_fn)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
static rooted_fn g_gather, g_scatter;

/* The data types cbench knows, by the names -d takes. */
static const struct { const char *name; ncclDataType_t dt; size_t size; } type_table[] = {
  {"int8", ncclInt8, 1},       {"uint8", ncclUint8, 1},       {"int32", ncclInt32, 4},
  {"uint32", ncclUint32, 4},   {"int64", ncclInt64, 8},       {"uint64", ncclUint64, 8},
  {"half", ncclHalf, 2},       {"float", ncclFloat, 4},       {"double", ncclDouble, 8},
  {"bfloat16", ncclBfloat16, 2}, {"fp8e4m3", ncclFloat8e4m3, 1}, {"fp8e5m2", ncclFloat8e5m2, 1},
};
#define NTYPES ((int)(sizeof type_table / sizeof type_table[0]))
static int set_type(const char *name) { /* 0 if name is not a type */
  for (int i = 0; i < NTYPES; i++)
    if (!strcmp(name, type_table[i].name)) {
      g_dt = type_table[i].dt, g_tsize = type_table[i].size, g_tname = type_table[i].name;
      return 1;
    }
  return 0;
}

static double busfactor(int c) {
  if (c == AR) return 2.0 * (g_n - 1) / g_n;
  if (c == AG || c == RS || c == A2A || c == GA || c == SC) return (double)(g_n - 1) / g_n;
  return 1.0;
}

/* ---------------------------------------------------------------- element conversions */
static uint16_t f2h(float f) { /* round to nearest even; our values are small integers */
  uint32_t x; memcpy(&x, &f, 4);
  uint16_t sign = (x >> 16) & 0x8000;
  int e = (int)((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0 || e <= 0) return sign;
  if (e >= 31) return sign | 0x7c00;
  uint16_t h = sign | (uint16_t)(e << 10) | (uint16_t)(m >> 13);
  uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return h;
}
static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) { float f = ldexpf((float)m, -24); return sign ? -f : f; }
  x = e == 31 ? (sign | 0x7f800000 | (m << 13)) : (sign | ((e - 15 + 127) << 23) | (m << 13));
  float f; memcpy(&f, &x, 4); return f;
}
static uint16_t f2b(float f) {
  uint32_t x; memcpy(&x, &f, 4);
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
static float b2f(uint16_t b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }
/* fp8 (OCP formats: e4m3 with bias 7, no infinities; e5m2 with bias 15). The values cbench
 * stores are small integers, all exact in both formats, so encoding searches the exact code. */
static float fp8_decode(uint8_t b, int mbits, int bias) {
  int e = (b >> mbits) & ((1 << (7 - mbits)) - 1), m = b & ((1 << mbits) - 1);
  float f = e ? ldexpf(1.0f + (float)m / (1 << mbits), e - bias) : ldexpf((float)m / (1 << mbits), 1 - bias);
  return (b & 0x80) ? -f : f;
}
static uint8_t fp8_search(float f, int mbits, int bias) {
  for (int b = 0; b < 256; b++)
    if (fp8_decode((uint8_t)b, mbits, bias) == f && !(f == 0 && (b & 0x80))) return (uint8_t)b;
  return 0x7f; /* NaN in e4m3, a NaN pattern in e5m2: a value that is not exact shows as wrong */
}
/* fp8_encode looks small integers up in a table filled on first use (the inputs are small
 * integers; a search per element made -d all sweeps take minutes). */
static uint8_t fp8_encode(float f, int mbits, int bias) {
  static uint8_t table[2][257];
  static int filled[2];
  int k = mbits == 3 ? 0 : 1;
  if (!filled[k]) {
    for (int v = -128; v <= 128; v++) table[k][v + 128] = fp8_search((float)v, mbits, bias);
    filled[k] = 1;
  }
  if (f == (float)(int)f && f >= -128 && f <= 128) return table[k][(int)f + 128];
  return fp8_search(f, mbits, bias);
}

static void put(void *p, size_t i, double v) {
  switch (g_dt) {
  case ncclFloat: ((float *)p)[i] = (float)v; break;
  case ncclDouble: ((double *)p)[i] = v; break;
  case ncclHalf: ((uint16_t *)p)[i] = f2h((float)v); break;
  case ncclBfloat16: ((uint16_t *)p)[i] = f2b((float)v); break;
  case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
  case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
  case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
  case ncclFloat8e4m3: ((uint8_t *)p)[i] = fp8_encode((float)v, 3, 7); break;
  case ncclFloat8e5m2: ((uint8_t *)p)[i] = fp8_encode((float)v, 2, 15); break;
  default: ((uint8_t *)p)[i] = (uint8_t)v; break;
  }
}
static double get(const void *p, size_t i) {
  switch (g_dt) {
  case ncclFloat: return ((const float *)p)[i];
  case ncclDouble: return ((const double *)p)[i];
  case ncclHalf: return h2f(((const uint16_t *)p)[i]);
  case ncclBfloat16: return b2f(((const uint16_t *)p)[i]);
  case ncclInt32: return ((const int32_t *)p)[i];
  case ncclInt64: return (double)((const int64_t *)p)[i];
  case ncclUint32: return ((const uint32_t *)p)[i];
  case ncclUint64: return (double)((const uint64_t *)p)[i];
  case ncclInt8: return ((const int8_t *)p)[i];
  case ncclFloat8e4m3: return fp8_decode(((const uint8_t *)p)[i], 3, 7);
  case ncclFloat8e5m2: return fp8_decode(((const uint8_t *)p)[i], 2, 15);
  default: return ((const uint8_t *)p)[i];
  }
}

static int unsigned_type(void) {
  return g_dt == ncclUint8 || g_dt == ncclUint32 || g_dt == ncclUint64;
}
/* Rank s's input element i: a small integer, exact in every type, sums exact too (fp8 and
 * PreMulSum draw from a narrower range so that every scaled sum stays exact in e4m3). */
static double val(int s, size_t i) {
  int narrow = g_dt == ncclFloat8e4m3 || g_dt == ncclFloat8e5m2 || g_premul;
  int span = narrow ? 5 : 17;
  int64_t v = (int64_t)((i * 7 + (size_t)s * 13 + 3) % span) - span / 2;
  return unsigned_type() ? (double)(v + span / 2) : (double)v;
}
/* premul_scalar is rank s's PreMulSum multiplier: a different one on every rank (1, 2, 1, 2,
 * ... keeps n-rank sums of the narrow inputs exact in every type). */
static double premul_scalar(int s) { return (double)(1 + s % 2); }
static double red(size_t i, size_t off) { /* reduction of element off+i over the ranks */
  double a = g_premul ? premul_scalar(0) * val(0, off + i) : val(0, off + i);
  for (int s = 1; s < g_n; s++) {
    double b = val(s, off + i);
    if (g_premul) a += premul_scalar(s) * b;
    else a = g_op == ncclSum ? a + b : g_op == ncclMax ? (a > b ? a : b) : (a < b ? a : b);
  }
  return a;
}

/* ---------------------------------------------------------------- one operation */
/* count: elements of the size column (see the header comment). */
static void fork_recv_stream(void) {
  if (g_rstream == g_stream) return;
  CUDACHECK(cudaEventRecord(g_fork, g_stream));
  CUDACHECK(cudaStreamWaitEvent(g_rstream, g_fork, 0));
}

static void join_recv_stream(void) {
  if (g_rstream == g_stream) return;
  CUDACHECK(cudaEventRecord(g_join, g_rstream));
  CUDACHECK(cudaStreamWaitEvent(g_stream, g_join, 0));
}

static void issue(int c, const void *s, void *r, size_t count) {
  size_t part = count / g_n;
  switch (c) {
  case AR: NCCLCHECK(ncclAllReduce(s, r, count, g_dt, g_op, g_comm, g_stream)); break;
  case AG: NCCLCHECK(ncclAllGather(s, r, part, g_dt, g_comm, g_stream)); break;
  case RS: NCCLCHECK(ncclReduceScatter(s, r, part, g_dt, g_op, g_comm, g_stream)); break;
  case BC: NCCLCHECK(ncclBroadcast(s, r, count, g_dt, g_root, g_comm, g_stream)); break;
  case RD: NCCLCHECK(ncclReduce(s, r, count, g_dt, g_op, g_root, g_comm, g_stream)); break;
  case A2A:
    if (g_alltoall) { NCCLCHECK(g_alltoall(s, r, part, g_dt, g_comm, g_stream)); break; }
    fork_recv_stream();
    NCCLCHECK(ncclGroupStart());
    for (int p = 0; p < g_n; p++) {
      NCCLCHECK(ncclSend((const char *)s + p * part * g_tsize, part, g_dt, p, g_comm, g_stream));
      NCCLCHECK(ncclRecv((char *)r + p * part * g_tsize, part, g_dt, p, g_comm, g_rstream));
    }
    NCCLCHECK(ncclGroupEnd());
    join_recv_stream();
    break;
  case GA: NCCLCHECK(g_gather(s, r, part, g_dt, g_root, g_comm, g_stream)); break;
  case SC: NCCLCHECK(g_scatter(s, r, part, g_dt, g_root, g_comm, g_stream)); break;
  case SR:
    fork_recv_stream();
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(s, count, g_dt, (g_rank + 1) % g_n, g_comm, g_stream));
    NCCLCHECK(ncclRecv(r, count, g_dt, (g_rank - 1 + g_n) % g_n, g_comm, g_rstream));
    NCCLCHECK(ncclGroupEnd());
    join_recv_stream();
    break;
  }
}

/* The send and receive pointers of collective c in or out of place. */
static void buffers(int c, int inplace, char *S, char *R, size_t count, const void **s, void **r) {
  size_t part = count / g_n * g_tsize;
  *s = S; *r = R;
  if (!inplace) return;
  if (c == AG) { *r = R; *s = R + g_rank * part; }
  else if (c == RS) { *s = S; *r = S + g_rank * part; }
  else { *s = R; *r = R; }
}

/* One run on known inputs; returns this rank's wrong elements. */
/* PAR_MIN: the fewest elements whose fill or check runs on every core (check). */
#define PAR_MIN ((size_t)1 << 22)

/* expect is element i of this rank's result of collective c (part: elements per rank segment). */
static double expect(int c, size_t i, size_t part) {
  switch (c) {
  case AR: case RD: return red(i, 0);
  case AG: return val((int)(i / part), i % part);
  case RS: return red(i, g_rank * part);
  case BC: return val(g_root, i);
  case A2A: return val((int)(i / part), g_rank * part + i % part);
  case GA: return val((int)(i / part), i % part);
  case SC: return val(g_root, g_rank * part + i);
  default: return val((g_rank - 1 + g_n) % g_n, i);
  }
}

static size_t check(int c, int inplace, char *S, char *R, size_t count, void *h) {
  size_t part = count / g_n, nin = (c == AG || c == GA) ? part : count, nout = (c == RS || c == SC) ? part : count;
  const void *s; void *r;
  buffers(c, inplace, S, R, count, &s, &r);
  /* On g_stream, and waited for: g_stream is non-blocking, so a copy from pageable memory on the
   * legacy stream could still be landing in an in-place buffer while the collective runs. */
  CUDACHECK(cudaMemsetAsync(R, 0xff, count * g_tsize, g_stream)); /* NaN / -1: a result not written shows */
  /* The fill and the check run on every core where the compiler has OpenMP (the Makefile's OMP,
   * -fopenmp): a 1 GB buffer is 256 M elements, seconds on one core per collective. Only from
   * PAR_MIN elements, and self_launch makes OpenMP's idle threads sleep (OMP_WAIT_POLICY=PASSIVE
   * unless set): threads that spin for work after a parallel region take the cores that the timed
   * calls' host threads (NCCL's proxy, weft's) need. The first OpenMP sweep on 2×H100 had calls
   * of a few µs taking 20–40 µs at random sizes in both libraries; a rerun of the same binary
   * had none (docs/bench/2026-11-26k-h100x2/, calls 6–7), so this is insurance, not a fix. fp8's
   * encoding tables are filled on first use: fill them here, before threads share them. */
  if (nin > 0) put(h, 0, val(g_rank, 0));
#pragma omp parallel for schedule(static) if (nin >= PAR_MIN)
  for (size_t i = 0; i < nin; i++) put(h, i, val(g_rank, i));
  CUDACHECK(cudaMemcpyAsync((void *)s, h, nin * g_tsize, cudaMemcpyHostToDevice, g_stream));
  CUDACHECK(cudaStreamSynchronize(g_stream));
  issue(c, s, r, count);
  CUDACHECK(cudaStreamSynchronize(g_stream));
  CUDACHECK(cudaMemcpy(h, r, nout * g_tsize, cudaMemcpyDeviceToHost));
  if ((c == RD || c == GA) && g_rank != g_root) return 0;
  size_t wrong = 0;
#pragma omp parallel for reduction(+ : wrong) schedule(static) if (nout >= PAR_MIN)
  for (size_t i = 0; i < nout; i++) wrong += get(h, i) != expect(c, i, part);
  if (wrong > 0) {
    /* Where they are: the first few wrong elements and the span of all of them (in bytes too,
     * for matching against a plan's chunks, block parts and packet lines). */
    size_t first = nout, last = 0;
    int shown = 0;
    for (size_t i = 0; i < nout; i++) {
      double got = get(h, i), want = expect(c, i, part);
      if (got == want) continue;
      if (first == nout) first = i;
      last = i;
      if (shown++ < 8)
        fprintf(stderr, "cbench: rank %d %s %s count %zu: element %zu (byte %zu) = %g, want %g\n", g_rank, coll_name[c],
                inplace ? "in place" : "out of place", count, i, i * g_tsize, got, want);
    }
    fprintf(stderr, "cbench: rank %d %s count %zu: %zu wrong elements in [%zu, %zu] (bytes [%zu, %zu])\n", g_rank, coll_name[c],
            count, wrong, first, last, first * g_tsize, (last + 1) * g_tsize);
  }
  return wrong;
}

/* g_host_us: host microseconds per enqueue of the last timeit without graphs (-H 1): the
 * library's host cost per call (argument checks, plan choice, launch), the part of a call a
 * framework's CPU thread pays. */
static int g_hostcost;
static double g_host_us;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Microseconds per operation on this rank. */
static double timeit(int c, int inplace, char *S, char *R, size_t count, int warmup, int iters, int graphs) {
  const void *s; void *r;
  cudaEvent_t e0, e1;
  float ms;
  buffers(c, inplace, S, R, count, &s, &r);
  for (int i = 0; i < warmup; i++) issue(c, s, r, count);
  CUDACHECK(cudaStreamSynchronize(g_stream));
  CUDACHECK(cudaEventCreate(&e0));
  CUDACHECK(cudaEventCreate(&e1));
  if (graphs > 0) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDACHECK(cudaStreamBeginCapture(g_stream, g_capmode));
    for (int i = 0; i < iters; i++) issue(c, s, r, count);
    CUDACHECK(cudaStreamEndCapture(g_stream, &g));
    CUDACHECK(cudaGraphInstantiate(&ge, g, 0));
    CUDACHECK(cudaGraphLaunch(ge, g_stream)); /* warm the graph */
    CUDACHECK(cudaStreamSynchronize(g_stream));
    CUDACHECK(cudaEventRecord(e0, g_stream));
    for (int k = 0; k < graphs; k++) CUDACHECK(cudaGraphLaunch(ge, g_stream));
    CUDACHECK(cudaEventRecord(e1, g_stream));
    CUDACHECK(cudaStreamSynchronize(g_stream));
    CUDACHECK(cudaGraphExecDestroy(ge));
    CUDACHECK(cudaGraphDestroy(g));
  } else {
    CUDACHECK(cudaEventRecord(e0, g_stream));
    double h0 = now_us();
    for (int i = 0; i < iters; i++) issue(c, s, r, count);
    g_host_us = (now_us() - h0) / iters;
    CUDACHECK(cudaEventRecord(e1, g_stream));
    CUDACHECK(cudaStreamSynchronize(g_stream));
  }
  CUDACHECK(cudaEventElapsedTime(&ms, e0, e1));
  CUDACHECK(cudaEventDestroy(e0));
  CUDACHECK(cudaEventDestroy(e1));
  return ms * 1e3 / ((double)iters * (graphs > 0 ? graphs : 1));
}

/* Element-wise sum (wrong) or max (time) over ranks, through the library under test. */
static double across(double v, ncclRedOp_t op, double *dev) {
  /* On g_stream: a cudaMemcpy from pageable memory on the legacy stream may still be landing
   * when the non-blocking g_stream's AllReduce reads dev. */
  CUDACHECK(cudaMemcpyAsync(dev, &v, sizeof v, cudaMemcpyHostToDevice, g_stream));
  NCCLCHECK(ncclAllReduce(dev, dev, 1, ncclDouble, op, g_comm, g_stream));
  CUDACHECK(cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, g_stream));
  CUDACHECK(cudaStreamSynchronize(g_stream));
  return v;
}

/* listed reports whether the comma-separated list names name exactly ("reduce" is not in
 * "allreduce,reducescatter"). */
static int listed(const char *list, const char *name) {
  size_t L = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += L)
    if ((p == list || p[-1] == ',') && (p[L] == 0 || p[L] == ',')) return 1;
  return 0;
}

/* premul_create makes this rank's PreMulSum operator for the current type (-o premulsum). */
static void premul_create(void) {
  unsigned char sc[8];
  put(sc, 0, premul_scalar(g_rank));
  if (g_scalar_device) {
    if (!g_scalar_dev) CUDACHECK(cudaMalloc(&g_scalar_dev, 8));
    CUDACHECK(cudaMemcpy(g_scalar_dev, sc, g_tsize, cudaMemcpyHostToDevice));
  }
  NCCLCHECK(ncclRedOpCreatePreMulSum(&g_op, g_scalar_device ? g_scalar_dev : (void *)sc, g_dt,
                                     g_scalar_device ? ncclScalarDevice : ncclScalarHostImmediate, g_comm));
}

/* ---------------------------------------------------------------- ranks and the unique id */
static size_t parse_size(const char *a) {
  char *end;
  double v = strtod(a, &end);
  switch (*end) {
  case 'K': case 'k': v *= 1 << 10; break;
  case 'M': case 'm': v *= 1 << 20; break;
  case 'G': case 'g': v *= 1 << 30; break;
  }
  return (size_t)v;
}
static int env_int(const char *const *names, int dflt) {
  for (; *names; names++) { const char *v = getenv(*names); if (v && *v) return atoi(v); }
  return dflt;
}

/* Start n copies of this program, one rank each; returns the worst exit status. */
static int self_launch(int n, char **argv) {
  char idfile[256], buf[32];
  pid_t pids[64];
  int worst = 0, left = n;
  snprintf(idfile, sizeof idfile, "/tmp/cbench.%d.id", (int)getpid());
  unlink(idfile);
  setenv("CBENCH_ID_FILE", idfile, 1);
  snprintf(buf, sizeof buf, "%d", n);
  setenv("CBENCH_NRANKS", buf, 1);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0); /* OpenMP's idle threads sleep (check) */
  for (int i = 0; i < n; i++) {
    snprintf(buf, sizeof buf, "%d", i);
    setenv("CBENCH_RANK", buf, 1);
    if ((pids[i] = fork()) == 0) {
      execv("/proc/self/exe", argv);
      perror("execv");
      _exit(127);
    }
  }
  while (left > 0) {
    int st;
    pid_t p = wait(&st);
    if (p < 0) break;
    left--;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc && !worst) { /* one rank failed: the others would wait for it forever */
      fprintf(stderr, "cbench: rank process %d ended with %d; stopping the others\n", (int)p, rc);
      for (int i = 0; i < n; i++) if (pids[i] != p) kill(pids[i], SIGTERM);
    }
    if (rc && !worst) worst = rc; /* the first failure, not the SIGTERM of the others */
  }
  unlink(idfile);
  return worst;
}

static void exchange_id(ncclUniqueId *id, const char *path) {
  if (g_rank == 0) {
    char tmp[300];
    NCCLCHECK(ncclGetUniqueId(id));
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      fprintf(stderr, "cbench: cannot write %s: %s\n", path, strerror(errno));
      exit(4);
    }
    return;
  }
  for (int t = 0; t < 6000; t++) { /* 60 s */
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t ok = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (ok == 1) return;
    }
    usleep(10000);
  }
  fprintf(stderr, "[rank %d] cbench: no unique id in %s after 60 s\n", g_rank, path);
  exit(4);
}

static void usage(void) {
  fprintf(stderr,
    "usage: cbench [-g nprocs] [-t colls] [-b min] [-e max] [-f factor] [-w warmup] [-n iters] [-G graphs]\n"
    "              [-c 0|1] [-p 0|1] [-d TYPE|all] [-o sum|max|min|premulsum] [-S host|device]\n"
    "              [-r root] [-a auto|p2p] [-u idfile] [-C global|thread|relaxed] [-R 0|1|2] [-s 0|1]\n"
    "  TYPE: float half bfloat16 double int8 uint8 int32 uint32 int64 uint64 fp8e4m3 fp8e5m2;\n"
    "     all: every type in turn, on one communicator\n"
    "  -o premulsum: ncclRedOpCreatePreMulSum with a different scalar on each rank (1 + rank %% 2),\n"
    "     -S host (ncclScalarHostImmediate, default) or -S device (ncclScalarDevice)\n"
    "  colls: comma list of allreduce,allgather,reducescatter,broadcast,reduce,alltoall,sendrecv,gather,scatter\n"
    "     (default all; gather and scatter through ncclGather/ncclScatter of NCCL >= 2.28)\n"
    "  -p 0: out-of-place only; -a p2p: alltoall as grouped send/recv even where ncclAlltoAll exists\n"
    "  -C: the graph capture mode (default global, as PyTorch)\n"
    "  -R 1: buffers from ncclMemAlloc, registered with ncclCommRegister (nccl-tests -R 1)\n"
    "  -R 2: buffers from ncclMemAlloc, registered as symmetric windows (ncclCommWindowRegister)\n"
    "  -s 1: grouped receives on a second stream, forked from and joined to the main one\n"
    "  -H 1: with -G 0, a last column: host microseconds per enqueue (the library's CPU cost per call)\n");
  exit(1);
}

int main(int argc, char **argv) {
  size_t minb = 8, maxb = 32 << 20;
  int factor = 2, warmup = 5, iters = 20, graphs = 0, docheck = 1, inplace = 1, nprocs = 0, a2a_p2p = 0, reg = 0;
  int two_streams = 0;
  const char *types = "float";
  const char *colls = "allreduce,allgather,reducescatter,broadcast,reduce,alltoall,sendrecv,gather,scatter", *idfile = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "g:t:b:e:f:w:n:G:c:p:d:o:r:a:u:C:S:R:s:H:h")) != -1) {
    switch (opt) {
    case 'g': nprocs = atoi(optarg); break;
    case 't': colls = optarg; break;
    case 'b': minb = parse_size(optarg); break;
    case 'e': maxb = parse_size(optarg); break;
    case 'f': factor = atoi(optarg); break;
    case 'w': warmup = atoi(optarg); break;
    case 'n': iters = atoi(optarg); break;
    case 'G': graphs = atoi(optarg); break;
    case 'c': docheck = atoi(optarg); break;
    case 'p': inplace = atoi(optarg); break;
    case 'r': g_root = atoi(optarg); break;
    case 'a': a2a_p2p = !strcmp(optarg, "p2p"); break;
    case 'u': idfile = optarg; break;
    case 'R': reg = atoi(optarg); if (reg < 0 || reg > 2) usage(); break;
    case 's': two_streams = atoi(optarg); if (two_streams != 0 && two_streams != 1) usage(); break;
    case 'H': g_hostcost = atoi(optarg); if (g_hostcost != 0 && g_hostcost != 1) usage(); break;
    case 'S': g_scalar_device = !strcmp(optarg, "device"); if (!g_scalar_device && strcmp(optarg, "host")) usage(); break;
    case 'C':
      g_capmode = !strcmp(optarg, "thread") ? cudaStreamCaptureModeThreadLocal
                : !strcmp(optarg, "relaxed") ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeGlobal;
      break;
    case 'd':
      if (strcmp(optarg, "all") && !set_type(optarg)) usage();
      types = optarg;
      break;
    case 'o':
      g_oname = optarg;
      if (!strcmp(optarg, "sum")) g_op = ncclSum;
      else if (!strcmp(optarg, "max")) g_op = ncclMax;
      else if (!strcmp(optarg, "min")) g_op = ncclMin;
      else if (!strcmp(optarg, "premulsum")) g_premul = 1;
      else usage();
      break;
    default: usage();
    }
  }
  if (factor < 2 || iters < 1 || minb < 1 || minb > maxb) usage();

  static const char *rank_vars[] = {"CBENCH_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK", NULL};
  static const char *size_vars[] = {"CBENCH_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", NULL};
  static const char *local_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK", NULL};
  g_rank = env_int(rank_vars, -1);
  if (g_rank < 0 && nprocs > 1) {
    if (nprocs > 64) usage();
    return self_launch(nprocs, argv);
  }
  if (g_rank < 0) g_rank = 0;
  g_n = env_int(size_vars, 1);
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  g_dev = env_int(local_vars, g_rank) % (ndev > 0 ? ndev : 1);
  CUDACHECK(cudaSetDevice(g_dev));
  CUDACHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  g_rstream = g_stream;
  if (two_streams) {
    CUDACHECK(cudaStreamCreateWithFlags(&g_rstream, cudaStreamNonBlocking));
    CUDACHECK(cudaEventCreateWithFlags(&g_fork, cudaEventDisableTiming));
    CUDACHECK(cudaEventCreateWithFlags(&g_join, cudaEventDisableTiming));
  }

  char path[256];
  if (!idfile) idfile = getenv("CBENCH_ID_FILE");
  if (!idfile) {
    const char *job = getenv("PMIX_NAMESPACE");
    if (!job) job = getenv("MASTER_PORT");
    snprintf(path, sizeof path, "/tmp/cbench.%s.id", job ? job : "default");
    for (char *p = path + 5; *p; p++) if (*p == '/') *p = '_';
    idfile = path;
  }
  ncclUniqueId id;
  exchange_id(&id, idfile);
  NCCLCHECK(ncclCommInitRank(&g_comm, g_n, id, g_rank));
  if (g_rank == 0) unlink(idfile); /* every rank has joined once init returns */

  if (!a2a_p2p) g_alltoall = (alltoall_fn)dlsym(RTLD_DEFAULT, "ncclAlltoAll");
  g_gather = (rooted_fn)dlsym(RTLD_DEFAULT, "ncclGather");
  g_scatter = (rooted_fn)dlsym(RTLD_DEFAULT, "ncclScatter");
  if (g_rank == 0) {
    int ver = 0;
    Dl_info info;
    ncclGetVersion(&ver);
    const char *lib = dladdr((void *)ncclAllReduce, &info) && info.dli_fname ? info.dli_fname : "?";
    printf("# cbench: %d ranks, type %s, op %s, root %d, warmup %d, iters %d, graph %d, check %d, registered %d, receive streams %d\n",
           g_n, types, g_oname, g_root, warmup, iters, graphs, docheck, reg, two_streams + 1);
    printf("# ncclGetVersion %d; ncclAllReduce from %s; alltoall via %s\n", ver, lib,
           g_alltoall ? "ncclAlltoAll" : "grouped ncclSend/ncclRecv");
    fflush(stdout);
  }

  size_t cap = maxb < 64 ? 64 : maxb;
  char *S, *R;
  double *dev1;
  void *h = NULL, *regS = NULL, *regR = NULL;
  ncclWindow_t winS = NULL, winR = NULL;
  if (reg) {
    NCCLCHECK(ncclMemAlloc((void **)&S, cap));
    NCCLCHECK(ncclMemAlloc((void **)&R, cap));
  }
  if (reg == 1) {
    NCCLCHECK(ncclCommRegister(g_comm, S, cap, &regS));
    NCCLCHECK(ncclCommRegister(g_comm, R, cap, &regR));
  } else if (reg == 2) {
    NCCLCHECK(ncclCommWindowRegister(g_comm, S, cap, &winS, NCCL_WIN_COLL_SYMMETRIC));
    NCCLCHECK(ncclCommWindowRegister(g_comm, R, cap, &winR, NCCL_WIN_COLL_SYMMETRIC));
  } else {
    CUDACHECK(cudaMalloc((void **)&S, cap));
    CUDACHECK(cudaMalloc((void **)&R, cap));
  }
  CUDACHECK(cudaMalloc((void **)&dev1, sizeof(double)));
  CUDACHECK(cudaMemset(S, 0, cap));
  CUDACHECK(cudaMemset(R, 0, cap));
  /* cudaMemset runs on the legacy stream, asynchronously, and g_stream is non-blocking: without
   * this wait the zeros of a large buffer could land after check() has filled it (seen once on
   * 2xH100 with 1 GB buffers: the first 8 B sendrecv read 2 wrong elements). */
  CUDACHECK(cudaDeviceSynchronize());
  if (docheck && !(h = malloc(cap))) { fprintf(stderr, "cbench: out of host memory\n"); return 5; }

  double total_wrong = 0;
  for (int ti = 0; ti < NTYPES; ti++) {
    if (strcmp(types, "all") ? !set_type(types) || ti > 0 : !set_type(type_table[ti].name)) break;
    if (g_premul) premul_create();
    if (g_rank == 0 && !strcmp(types, "all")) printf("#\n# type %s\n", g_tname);
    for (int c = 0; c < NCOLL; c++) {
      if (!listed(colls, coll_name[c])) continue;
      /* In place: every collective NCCL serves in place; AlltoAll through ncclAlltoAll only
       * (grouped send/recv on one buffer is not an in-place AlltoAll). */
      int ip_ok = inplace && c != SR && c != GA && c != SC && (c != A2A || g_alltoall);
      if ((c == GA && !g_gather) || (c == SC && !g_scatter)) {
        if (g_rank == 0) printf("#\n# %s: not in this NCCL (needs 2.28 or later)\n", coll_name[c]);
        continue;
      }
      if (g_rank == 0) {
        printf("#\n# %s\n#%12s %12s %9s %6s %5s %10s %8s %8s %7s %10s %8s %8s %7s%s\n", coll_name[c], "size(B)", "count",
               "type", "redop", "root", "oop(us)", "algbw", "busbw", "#wrong", "ip(us)", "algbw", "busbw", "#wrong",
               g_hostcost && graphs == 0 ? "  host(us)" : "");
        fflush(stdout);
      }
      for (size_t bytes = minb; bytes <= maxb; bytes *= factor) {
        size_t count = bytes / g_tsize;
        if (c == AG || c == RS || c == A2A || c == GA || c == SC) count -= count % g_n;
        if (count == 0) continue;
        size_t sz = count * g_tsize;
        double t[2] = {0, 0}, wrong[2] = {0, 0}, host = 0;
        for (int m = 0; m < 1 + ip_ok; m++) {
          if (docheck) wrong[m] = across((double)check(c, m, S, R, count, h), ncclSum, dev1);
          t[m] = across(timeit(c, m, S, R, count, warmup, iters, graphs), ncclMax, dev1);
          if (m == 0) host = across(g_host_us, ncclMax, dev1);
          total_wrong += wrong[m];
        }
        if (g_rank == 0) {
          double bw0 = sz / t[0] / 1e3;
          printf(" %12zu %12zu %9s %6s %5d %10.2f %8.2f %8.2f %7.0f", sz, count, g_tname,
                 (c == AR || c == RS || c == RD) ? g_oname : "none", (c == BC || c == RD || c == GA || c == SC) ? g_root : -1,
                 t[0], bw0, bw0 * busfactor(c), docheck ? wrong[0] : -1.0);
          if (ip_ok) {
            double bw1 = sz / t[1] / 1e3;
            printf(" %10.2f %8.2f %8.2f %7.0f", t[1], bw1, bw1 * busfactor(c), docheck ? wrong[1] : -1.0);
          } else {
            printf(" %10s %8s %8s %7s", "-", "-", "-", "-");
          }
          if (g_hostcost && graphs == 0) printf(" %9.2f", host);
          printf("\n");
          fflush(stdout);
        }
        if (bytes > maxb / factor) break; /* no overflow past maxb */
      }
    }
    if (g_premul) NCCLCHECK(ncclRedOpDestroy(g_op, g_comm));
  }
  if (g_rank == 0) printf("# cbench: %.0f wrong elements in all\n", total_wrong);
  if (reg == 1) {
    NCCLCHECK(ncclCommDeregister(g_comm, regS));
    NCCLCHECK(ncclCommDeregister(g_comm, regR));
  } else if (reg == 2) {
    NCCLCHECK(ncclCommWindowDeregister(g_comm, winS));
    NCCLCHECK(ncclCommWindowDeregister(g_comm, winR));
  }
  if (reg) {
    NCCLCHECK(ncclMemFree(S));
    NCCLCHECK(ncclMemFree(R));
  } else {
    CUDACHECK(cudaFree(S));
    CUDACHECK(cudaFree(R));
  }
  CUDACHECK(cudaFree(dev1));
  free(h);
  if (g_scalar_dev) CUDACHECK(cudaFree(g_scalar_dev));
  NCCLCHECK(ncclCommDestroy(g_comm));
  return total_wrong > 0 ? 6 : 0;
}
