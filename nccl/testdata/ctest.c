// ctest.c: a C program that uses weft's NCCL ABI as any NCCL client does.
// The Go test (ctest_test.go) compiles it against include/nccl.h, links it
// with libweft_nccl.so and runs it as several processes on hal/host:
//
//   RANK, WORLD_SIZE  this process's rank and the number of ranks
//   WEFT_ID_FILE      where rank 0 writes the unique id for the others
//
// On hal/host, memory from ncclMemAlloc is host memory, so the program
// fills and checks buffers directly; stream arguments are NULL. It prints
// "N passed, M failed" and exits 1 when anything failed.

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

static int rank, nranks, passed, failed;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (cond) {                                              \
      passed++;                                              \
    } else {                                                 \
      failed++;                                              \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                          \
      fprintf(stderr, "\n");                                 \
    }                                                        \
  } while (0)

// CALL checks that an NCCL call succeeded and says which otherwise.
#define CALL(call)                                                                                   \
  do {                                                                                               \
    ncclResult_t r_ = (call);                                                                        \
    CHECK(r_ == ncclSuccess, "%s = %d (%s): %s", #call, r_, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
  } while (0)

static size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// Half, bfloat16 and FP8 (OCP e4m3: bias 7, no infinities; e5m2: bias 15)
// for the small integers the tests use. Encoding finds the exact code, so
// a value a type cannot hold shows up as a wrong element.
static float halfTo(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float f = e ? ldexpf(1.0f + m / 1024.0f, e - 15) : ldexpf(m / 1024.0f, -14);
  return (h & 0x8000) ? -f : f;
}
static uint16_t toHalf(float f) {  // normal values, rounded to nearest (the tests' are exact)
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int e = (int)((x >> 23) & 0xff) - 127 + 15;
  if ((x & 0x7fffffff) == 0 || e <= 0) return sign;
  if (e >= 31) return sign | 0x7c00;
  uint32_t m = x & 0x7fffff, rest = m & 0x1fff;
  uint16_t h = (uint16_t)(sign | (e << 10) | (m >> 13));
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return h;
}
static float bf16To(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static uint16_t toBf16(float f) {  // exact for the values used: truncation keeps them
  uint32_t x;
  memcpy(&x, &f, 4);
  return (uint16_t)(x >> 16);
}
static float fp8To(uint8_t b, int mbits, int bias) {
  int e = (b >> mbits) & ((1 << (7 - mbits)) - 1), m = b & ((1 << mbits) - 1);
  float f = e ? ldexpf(1.0f + (float)m / (1 << mbits), e - bias) : ldexpf((float)m / (1 << mbits), 1 - bias);
  return (b & 0x80) ? -f : f;
}
static uint8_t toFp8(float f, int mbits, int bias) {  // small integers: a table filled once
  static uint8_t table[2][33];
  static int filled[2];
  int k = mbits == 3 ? 0 : 1;
  if (!filled[k]) {
    for (int v = 0; v <= 32; v++) {
      table[k][v] = 0x7f;  // NaN: a value the type cannot hold shows up as wrong
      for (int c = 0; c < 128; c++)
        if (fp8To((uint8_t)c, mbits, bias) == (float)v) { table[k][v] = (uint8_t)c; break; }
    }
    filled[k] = 1;
  }
  float a = fabsf(f);
  uint8_t c = (a == (float)(int)a && a <= 32) ? table[k][(int)a] : 0x7f;
  return (uint8_t)(c | (f < 0 ? 0x80 : 0));
}

// Values are small integers, exact in every type used here.
static void put(void* buf, ncclDataType_t t, size_t i, double v) {
  switch (t) {
    case ncclUint8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case ncclInt64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case ncclFloat32: ((float*)buf)[i] = (float)v; break;
    case ncclFloat64: ((double*)buf)[i] = v; break;
    case ncclInt8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case ncclUint32: ((uint32_t*)buf)[i] = (uint32_t)v; break;
    case ncclUint64: ((uint64_t*)buf)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t*)buf)[i] = toHalf((float)v); break;
    case ncclBfloat16: ((uint16_t*)buf)[i] = toBf16((float)v); break;
    case ncclFloat8e4m3: ((uint8_t*)buf)[i] = toFp8((float)v, 3, 7); break;
    case ncclFloat8e5m2: ((uint8_t*)buf)[i] = toFp8((float)v, 2, 15); break;
    default: abort();
  }
}

static double get(const void* buf, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclUint8: return ((const uint8_t*)buf)[i];
    case ncclInt32: return ((const int32_t*)buf)[i];
    case ncclInt64: return (double)((const int64_t*)buf)[i];
    case ncclFloat32: return ((const float*)buf)[i];
    case ncclFloat64: return ((const double*)buf)[i];
    case ncclInt8: return ((const int8_t*)buf)[i];
    case ncclUint32: return ((const uint32_t*)buf)[i];
    case ncclUint64: return (double)((const uint64_t*)buf)[i];
    case ncclFloat16: return halfTo(((const uint16_t*)buf)[i]);
    case ncclBfloat16: return bf16To(((const uint16_t*)buf)[i]);
    case ncclFloat8e4m3: return fp8To(((const uint8_t*)buf)[i], 3, 7);
    case ncclFloat8e5m2: return fp8To(((const uint8_t*)buf)[i], 2, 15);
    default: abort();
  }
}

// in(r, i): rank r's input element i.
static double in(int r, size_t i) { return (double)((r + 1) * (int)(i % 7 + 1)); }

static int isInt(ncclDataType_t t) { return t == ncclUint8 || t == ncclInt32 || t == ncclInt64; }

static double avgTolerance(ncclRedOp_t op, ncclDataType_t t) {
  if (op != ncclAvg || isInt(t)) return 0;
  return t == ncclFloat32 ? 1e-6 : 1e-14;
}

// reduced(op, i): the exact reduction of in(0..n-1, i).
static double reduced(ncclRedOp_t op, ncclDataType_t t, size_t i, double scalar) {
  double m = (double)(i % 7 + 1), acc;
  int n = nranks;
  switch (op) {
    case ncclSum: return m * n * (n + 1) / 2;
    case ncclProd: acc = 1; for (int r = 1; r <= n; r++) acc *= r * m; return acc;
    case ncclMax: return m * n;
    case ncclMin: return m;
    case ncclAvg: acc = m * n * (n + 1) / 2; return isInt(t) ? floor(acc / n) : acc / n;
    default: return scalar * m * n * (n + 1) / 2;  // PreMulSum
  }
}

static void* alloc(size_t bytes) {
  void* p = NULL;
  ncclResult_t r = ncclMemAlloc(&p, bytes ? bytes : 1);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclMemAlloc(%zu) = %d: %s\n", rank, bytes, r, ncclGetLastError(NULL));
    exit(2);
  }
  return p;
}

// tolerance is the relative error accepted: 0 (exact) except for ncclAvg
// of floating types, which NCCL (and weft) compute as a PreMulSum by
// 1/nranks, rounded in the element type.
static double tolerance;

static int wrong(const void* buf, ncclDataType_t t, size_t off, size_t n, double (*want)(size_t, void*), void* ctx) {
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double w = want(i, ctx), g = get(buf, t, off + i);
    if (g != w && !(tolerance > 0 && fabs(g - w) <= tolerance * fabs(w))) {
      if (bad < 3) fprintf(stderr, "rank %d:   element %zu: got %g, want %g\n", rank, off + i, g, w);
      bad++;
    }
  }
  return bad;
}

struct redCtx { ncclRedOp_t op; ncclDataType_t t; double scalar; size_t base; };
static double wantReduced(size_t i, void* p) {
  struct redCtx* c = p;
  return reduced(c->op, c->t, c->base + i, c->scalar);
}
struct srcCtx { int r; size_t base; };
static double wantFrom(size_t i, void* p) {
  struct srcCtx* c = p;
  return in(c->r, c->base + i);
}

static const ncclDataType_t types[] = {ncclInt32, ncclFloat32, ncclInt64, ncclFloat64, ncclUint8};
static const char* typeNames[] = {"int32", "float", "int64", "double", "uint8"};
static const size_t counts[] = {0, 1, 7, 1000, 65537};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void testAllReduce(ncclComm_t comm) {
  for (size_t ti = 0; ti < N(types); ti++) {
    ncclDataType_t t = types[ti];
    for (int op = 0; op < ncclNumOps; op++) {
      if (op == ncclProd && t == ncclUint8) continue;  // 3! * 7^3 overflows uint8
      for (size_t ci = 0; ci < N(counts); ci++) {
        size_t n = counts[ci];
        for (int inplace = 0; inplace < 2; inplace++) {
          void* s = alloc(n * typeSize(t));
          void* d = inplace ? s : alloc(n * typeSize(t));
          for (size_t i = 0; i < n; i++) put(s, t, i, in(rank, i));
          CALL(ncclAllReduce(s, d, n, t, op, comm, NULL));
          struct redCtx c = {op, t, 0, 0};
          tolerance = avgTolerance(op, t);
          int bad = wrong(d, t, 0, n, wantReduced, &c);
          tolerance = 0;
          CHECK(bad == 0, "AllReduce %s op %d count %zu inplace %d: %d wrong", typeNames[ti], op, n, inplace, bad);
          if (!inplace) ncclMemFree(d);
          ncclMemFree(s);
        }
      }
    }
  }
}

static void testPreMulSum(ncclComm_t comm) {
  float fs = 2.0f;
  int32_t is = 3;
  struct { ncclDataType_t t; void* scalar; double v; } cases[] = {{ncclFloat32, &fs, 2}, {ncclInt32, &is, 3}};
  for (size_t k = 0; k < N(cases); k++) {
    ncclRedOp_t op;
    CALL(ncclRedOpCreatePreMulSum(&op, cases[k].scalar, cases[k].t, ncclScalarHostImmediate, comm));
    CHECK(op >= ncclNumOps, "PreMulSum op handle %d, want >= ncclNumOps", op);
    size_t n = 1000;
    void* s = alloc(n * typeSize(cases[k].t));
    void* d = alloc(n * typeSize(cases[k].t));
    for (size_t i = 0; i < n; i++) put(s, cases[k].t, i, in(rank, i));
    CALL(ncclAllReduce(s, d, n, cases[k].t, op, comm, NULL));
    struct redCtx c = {ncclNumOps, cases[k].t, cases[k].v, 0};
    int bad = wrong(d, cases[k].t, 0, n, wantReduced, &c);
    CHECK(bad == 0, "AllReduce PreMulSum type %d: %d wrong", cases[k].t, bad);
    // Another datatype than the operator's is refused.
    ncclResult_t r = ncclAllReduce(s, d, n, ncclInt64, op, comm, NULL);
    CHECK(r == ncclInvalidArgument, "PreMulSum with another datatype = %d, want ncclInvalidArgument", r);
    CALL(ncclRedOpDestroy(op, comm));
    r = ncclAllReduce(s, d, n, cases[k].t, op, comm, NULL);
    CHECK(r == ncclInvalidArgument, "destroyed op = %d, want ncclInvalidArgument", r);
    ncclMemFree(s);
    ncclMemFree(d);
  }
}

// testPreMulSumPerRank: every rank passes its own scalar, as a host
// immediate and in device memory (on hal/host, ncclMemAlloc memory is host
// memory the program writes directly), for every NCCL 2.28 type. Wide
// types: scalar r + 2 and input (r + 1)(j % 7 + 1), so the result is
// (j % 7 + 1)·Σ_r (r + 1)(r + 2), exact up to 3 ranks (at most 7 × 20 =
// 140: uint8, half and bfloat16 hold it). Narrow types (int8, FP8): scalar
// r + 1 and input j % 2 + 1, so every partial sum of (r + 1)(j % 2 + 1) is
// at most 12 and exact in e4m3 and e5m2.
static const ncclDataType_t allTypes[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                                          ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
static const char* allTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                     "half", "float", "double", "bfloat16", "fp8e4m3", "fp8e5m2"};
static void testPreMulSumPerRank(ncclComm_t comm) {
  const ncclScalarResidence_t where[] = {ncclScalarHostImmediate, ncclScalarDevice};
  const size_t ns[] = {7, 65537};
  for (size_t ti = 0; ti < N(allTypes); ti++) {
    ncclDataType_t t = allTypes[ti];
    size_t es = typeSize(t);
    int narrow = t == ncclInt8 || t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
    double k = 0;  // Σ_r of rank r's scalar × its input's per-rank factor
    for (int r = 0; r < nranks; r++) k += narrow ? (double)(r + 1) : (double)(r + 1) * (r + 2);
    for (size_t wi = 0; wi < N(where); wi++) {
      void* sc = alloc(8);
      put(sc, t, 0, narrow ? rank + 1 : rank + 2);
      ncclRedOp_t op;
      CALL(ncclRedOpCreatePreMulSum(&op, sc, t, where[wi], comm));
      for (size_t ci = 0; ci < N(ns); ci++) {
        size_t n = ns[ci];
        void* s = alloc(n * nranks * es);
        void* d = alloc(n * nranks * es);
        for (size_t i = 0; i < n * nranks; i++) put(s, t, i, narrow ? (double)(i % 2 + 1) : in(rank, i));
        for (int coll = 0; coll < 3; coll++) {
          size_t base = 0;
          int check = 1;
          switch (coll) {
            case 0: CALL(ncclAllReduce(s, d, n, t, op, comm, NULL)); break;
            case 1: CALL(ncclReduceScatter(s, d, n, t, op, comm, NULL)); base = (size_t)rank * n; break;
            default: CALL(ncclReduce(s, d, n, t, op, nranks - 1, comm, NULL)); check = rank == nranks - 1;
          }
          int bad = 0;
          for (size_t i = 0; check && i < n; i++) {
            double want = (double)(narrow ? (base + i) % 2 + 1 : (base + i) % 7 + 1) * k, got = get(d, t, i);
            if (got != want && bad++ < 3) fprintf(stderr, "rank %d:   element %zu: got %g, want %g\n", rank, i, got, want);
          }
          CHECK(bad == 0, "PreMulSum per rank, type %s, scalar residence %d, collective %d, count %zu: %d wrong", allTypeNames[ti],
                (int)where[wi], coll, n, bad);
        }
        ncclMemFree(s);
        ncclMemFree(d);
      }
      CALL(ncclRedOpDestroy(op, comm));
      ncclMemFree(sc);
    }
  }
}

static void testAllGather(ncclComm_t comm) {
  for (size_t ti = 0; ti < 2; ti++) {
    ncclDataType_t t = types[ti];
    size_t es = typeSize(t);
    for (size_t ci = 0; ci < N(counts); ci++) {
      size_t n = counts[ci];
      for (int inplace = 0; inplace < 2; inplace++) {
        char* d = alloc(n * nranks * es);
        char* s = inplace ? d + rank * n * es : alloc(n * es);
        for (size_t i = 0; i < n; i++) put(s, t, i, in(rank, i));
        CALL(ncclAllGather(s, d, n, t, comm, NULL));
        int bad = 0;
        for (int r = 0; r < nranks; r++) {
          struct srcCtx c = {r, 0};
          bad += wrong(d + r * n * es, t, 0, n, wantFrom, &c);
        }
        CHECK(bad == 0, "AllGather %s count %zu inplace %d: %d wrong", typeNames[ti], n, inplace, bad);
        if (!inplace) ncclMemFree(s);
        ncclMemFree(d);
      }
    }
  }
}

static void testReduceScatter(ncclComm_t comm) {
  ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclAvg};
  for (size_t ti = 0; ti < 2; ti++) {
    ncclDataType_t t = types[ti];
    size_t es = typeSize(t);
    for (size_t oi = 0; oi < N(ops); oi++) {
      for (size_t ci = 0; ci < N(counts); ci++) {
        size_t n = counts[ci];
        for (int inplace = 0; inplace < 2; inplace++) {
          char* s = alloc(n * nranks * es);
          char* d = inplace ? s + rank * n * es : alloc(n * es);
          for (size_t i = 0; i < n * nranks; i++) put(s, t, i, in(rank, i));
          CALL(ncclReduceScatter(s, d, n, t, ops[oi], comm, NULL));
          struct redCtx c = {ops[oi], t, 0, rank * n};
          tolerance = avgTolerance(ops[oi], t);
          int bad = wrong(d, t, 0, n, wantReduced, &c);
          tolerance = 0;
          CHECK(bad == 0, "ReduceScatter %s op %d count %zu inplace %d: %d wrong", typeNames[ti], ops[oi], n, inplace, bad);
          if (!inplace) ncclMemFree(d);
          ncclMemFree(s);
        }
      }
    }
  }
}

static void testBroadcastReduce(ncclComm_t comm) {
  ncclDataType_t t = ncclInt32;
  size_t es = typeSize(t);
  for (int root = 0; root < nranks; root += nranks - 1) {
    for (size_t ci = 0; ci < N(counts); ci++) {
      size_t n = counts[ci];
      for (int inplace = 0; inplace < 3; inplace++) {  // 2: ncclBcast
        char* s = alloc(n * es);
        char* d = inplace ? s : alloc(n * es);
        for (size_t i = 0; i < n; i++) put(s, t, i, in(rank, i));
        if (inplace == 2) {
          CALL(ncclBcast(s, n, t, root, comm, NULL));
        } else {
          CALL(ncclBroadcast(s, d, n, t, root, comm, NULL));
        }
        struct srcCtx c = {root, 0};
        int bad = wrong(d, t, 0, n, wantFrom, &c);
        CHECK(bad == 0, "Broadcast root %d count %zu mode %d: %d wrong", root, n, inplace, bad);
        if (inplace == 0) ncclMemFree(d);
        ncclMemFree(s);

        if (inplace == 2) continue;
        s = alloc(n * es);
        d = inplace ? s : alloc(n * es);
        for (size_t i = 0; i < n; i++) put(s, t, i, in(rank, i));
        CALL(ncclReduce(s, d, n, t, ncclSum, root, comm, NULL));
        if (rank == root) {
          struct redCtx rc = {ncclSum, t, 0, 0};
          bad = wrong(d, t, 0, n, wantReduced, &rc);
          CHECK(bad == 0, "Reduce root %d count %zu inplace %d: %d wrong", root, n, inplace, bad);
        }
        if (!inplace) ncclMemFree(d);
        ncclMemFree(s);
      }
      if (nranks == 1) break;
    }
    if (nranks == 1) break;
  }
}

static double wantA2A(size_t i, void* p) {
  struct srcCtx* c = p;  // element i of the block rank c->r sent to this rank
  return in(c->r, (size_t)rank * c->base + i);
}

static void testAlltoAllGatherScatter(ncclComm_t comm) {
  ncclDataType_t t = ncclFloat32;
  size_t es = typeSize(t);
  size_t sizes[] = {0, 1, 333};
  for (size_t k = 0; k < N(sizes); k++) {
    size_t n = sizes[k];
    char* s = alloc(n * nranks * es);
    char* d = alloc(n * nranks * es);
    for (size_t i = 0; i < n * nranks; i++) put(s, t, i, in(rank, i));
    CALL(ncclAlltoAll(s, d, n, t, comm, NULL));
    int bad = 0;
    for (int r = 0; r < nranks; r++) {
      struct srcCtx c = {r, n};
      bad += wrong(d + r * n * es, t, 0, n, wantA2A, &c);
    }
    CHECK(bad == 0, "AlltoAll count %zu: %d wrong", n, bad);

    int root = nranks - 1;
    memset(d, 0, n * nranks * es);
    CALL(ncclGather(s, d, n, t, root, comm, NULL));
    if (rank == root) {
      bad = 0;
      for (int r = 0; r < nranks; r++) {
        struct srcCtx c = {r, 0};
        bad += wrong(d + r * n * es, t, 0, n, wantFrom, &c);
      }
      CHECK(bad == 0, "Gather count %zu: %d wrong", n, bad);
    }
    memset(d, 0, n * nranks * es);
    CALL(ncclScatter(s, d, n, t, root, comm, NULL));
    struct srcCtx c = {root, (size_t)rank * n};
    bad = wrong(d, t, 0, n, wantFrom, &c);
    CHECK(bad == 0, "Scatter count %zu: %d wrong", n, bad);
    ncclMemFree(s);
    ncclMemFree(d);
  }
}

// a2aByte is byte j of the send buffer of rank r in testAlltoAllInPlace.
static uint8_t a2aByte(int r, size_t j) { return (uint8_t)(r * 97 + j * 31 + (j >> 9)); }

// testAlltoAllInPlace: ncclAlltoAll with sendbuff == recvbuff, which NCCL
// 2.28 takes, for every NCCL type, from one element to segments past the
// LL limit (256 KiB) and across many hal/host HB windows (16 KiB). AlltoAll
// moves elements without converting them, so the check is bytewise:
// block r of the result must be block `rank` of rank r's buffer.
static void testAlltoAllInPlace(ncclComm_t comm) {
  const size_t segBytes[] = {0, 1, 37, (16 << 10) + 8, (256 << 10) + 24};
  for (int t = 0; t < (int)ncclNumTypes; t++) {
    size_t es = t == ncclInt8 || t == ncclUint8 || t == ncclFloat8e4m3 || t == ncclFloat8e5m2 ? 1
                : t == ncclFloat16 || t == ncclBfloat16                                        ? 2
                : t == ncclInt32 || t == ncclUint32 || t == ncclFloat32                        ? 4
                                                                                               : 8;
    for (size_t k = 0; k < N(segBytes); k++) {
      size_t n = k < 2 ? k : segBytes[k] / es + 1;  // elements per peer
      size_t seg = n * es;
      uint8_t* b = alloc(seg * nranks);
      for (size_t j = 0; j < seg * nranks; j++) b[j] = a2aByte(rank, j);
      CALL(ncclAlltoAll(b, b, n, (ncclDataType_t)t, comm, NULL));
      int bad = 0;
      for (int r = 0; r < nranks; r++) {
        for (size_t j = 0; j < seg; j++) {
          uint8_t want = a2aByte(r, (size_t)rank * seg + j), got = b[(size_t)r * seg + j];
          if (got != want && bad++ < 3)
            fprintf(stderr, "rank %d:   byte %zu of block %d: got %u, want %u\n", rank, j, r, got, want);
        }
      }
      CHECK(bad == 0, "AlltoAll in place, type %d, count %zu: %d wrong bytes", t, n, bad);
      ncclMemFree(b);
    }
  }
}

// a2avCount is the number of elements rank from sends to rank to.
static size_t a2avCount(int from, int to) { return (size_t)((from + 2 * to) % 3 + 1) * 5; }

static void testSendRecv(ncclComm_t comm) {
  ncclDataType_t t = ncclInt64;
  size_t es = typeSize(t), n = 4099;
  // A ring: send to the next rank, receive from the previous one.
  char* s = alloc(n * es);
  char* d = alloc(n * es);
  for (size_t i = 0; i < n; i++) put(s, t, i, in(rank, i));
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  CALL(ncclGroupStart());
  CALL(ncclSend(s, n, t, next, comm, NULL));
  CALL(ncclRecv(d, n, t, prev, comm, NULL));
  CALL(ncclGroupEnd());
  struct srcCtx c = {prev, 0};
  int bad = wrong(d, t, 0, n, wantFrom, &c);
  CHECK(bad == 0, "ring send/recv: %d wrong", bad);
  ncclMemFree(s);
  ncclMemFree(d);

  // All-to-all-v: uneven counts between every pair (self included), in a
  // nested group.
  size_t soff[64], roff[64], stot = 0, rtot = 0;
  for (int p = 0; p < nranks; p++) {
    soff[p] = stot;
    stot += a2avCount(rank, p);
    roff[p] = rtot;
    rtot += a2avCount(p, rank);
  }
  s = alloc(stot * es);
  d = alloc(rtot * es);
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < a2avCount(rank, p); i++) put(s, t, soff[p] + i, rank * 1000 + p * 100 + (double)i);
  CALL(ncclGroupStart());
  CALL(ncclGroupStart());
  for (int p = 0; p < nranks; p++) CALL(ncclSend(s + soff[p] * es, a2avCount(rank, p), t, p, comm, NULL));
  CALL(ncclGroupEnd());
  for (int p = nranks - 1; p >= 0; p--) CALL(ncclRecv(d + roff[p] * es, a2avCount(p, rank), t, p, comm, NULL));
  CALL(ncclGroupEnd());
  bad = 0;
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < a2avCount(p, rank); i++)
      if (get(d, t, roff[p] + i) != p * 1000 + rank * 100 + (double)i) bad++;
  CHECK(bad == 0, "all-to-all-v send/recv: %d wrong", bad);
  ncclMemFree(s);
  ncclMemFree(d);
}

// regByte is byte j of what rank r sends in round k of testRegistered.
static uint8_t regByte(int r, int k, size_t j) { return (uint8_t)(r * 97 + k * 53 + j * 31 + (j >> 9)); }

static int regWrong(const char* got, int r, int k, size_t n) {
  int bad = 0;
  for (size_t j = 0; j < n; j++)
    if ((uint8_t)got[j] != regByte(r, k, j)) bad++;
  return bad;
}

// testRegistered: zero-copy point-to-point. Receives into ncclMemAlloc'd
// memory registered with ncclCommRegister (the sender stores into it
// directly) and into unregistered memory, mixed in one group (two rounds
// to the same peer), for every type at counts around the LL/HB boundary
// (128 KiB) and at offsets inside the registration; then Gather and
// Scatter into registered buffers.
static void testRegistered(ncclComm_t comm) {
  const size_t regBytes = 4u << 20;
  char* reg = alloc(regBytes);
  void* h = NULL;
  CALL(ncclCommRegister(comm, reg, regBytes, &h));
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  const size_t sizes[] = {8, 131072, 131088, 393224};
  for (size_t ti = 0; ti < N(allTypes); ti++) {
    ncclDataType_t t = allTypes[ti];
    size_t es = typeSize(t);
    for (size_t k = 0; k < N(sizes); k++) {
      size_t n = sizes[k] / es + (k % 2), bytes = n * es;
      char* s = alloc(2 * bytes);
      char* u = alloc(bytes);
      char* d = reg + ((size_t)(rank + 1) * 40961 + ti * 1024) / es * es;  // inside the registration
      for (size_t j = 0; j < bytes; j++) {
        s[j] = (char)regByte(rank, 0, j);
        s[bytes + j] = (char)regByte(rank, 1, j);
      }
      memset(d, 0, bytes);
      memset(u, 0, bytes);
      CALL(ncclGroupStart());
      CALL(ncclSend(s, n, t, next, comm, NULL));
      CALL(ncclRecv(d, n, t, prev, comm, NULL));
      CALL(ncclSend(s + bytes, n, t, next, comm, NULL));
      CALL(ncclRecv(u, n, t, prev, comm, NULL));
      CALL(ncclGroupEnd());
      int bad = regWrong(d, prev, 0, bytes), badU = regWrong(u, prev, 1, bytes);
      CHECK(bad == 0 && badU == 0, "registered send/recv %s × %zu: %d wrong in the registered receive, %d in the other",
            allTypeNames[ti], n, bad, badU);
      ncclMemFree(s);
      ncclMemFree(u);
    }
  }
  // Gather to the last rank and Scatter from it, 160 KB per rank, into the
  // registration.
  size_t n = 40000, bytes = n * sizeof(float);
  int root = nranks - 1;
  char* s = alloc(bytes * nranks);
  for (size_t j = 0; j < bytes * nranks; j++) s[j] = (char)regByte(rank, 2, j);
  if ((size_t)nranks * bytes <= regBytes) {
    memset(reg, 0, bytes * nranks);
    CALL(ncclGather(s, reg, n, ncclFloat32, root, comm, NULL));
    if (rank == root) {
      int bad = 0;
      for (int r = 0; r < nranks; r++) bad += regWrong(reg + r * bytes, r, 2, bytes);
      CHECK(bad == 0, "Gather into a registered buffer: %d wrong", bad);
    }
    memset(reg + 64, 0, bytes);
    CALL(ncclScatter(s, reg + 64, n, ncclFloat32, root, comm, NULL));
    int bad = 0;
    for (size_t j = 0; j < bytes; j++)
      if ((uint8_t)reg[64 + j] != regByte(root, 2, rank * bytes + j)) bad++;
    CHECK(bad == 0, "Scatter into a registered buffer: %d wrong", bad);
  }
  ncclMemFree(s);
  CALL(ncclCommDeregister(comm, h));
  ncclMemFree(reg);
}

static int mentions(const char* text, const char* word) { return text != NULL && strstr(text, word) != NULL; }

// testWindows: ncclCommWindowRegister (NCCL 2.27 and later) with
// NCCL_WIN_COLL_SYMMETRIC, each rank's window at a different offset of its
// ncclMemAlloc buffer: AllReduce into the window (float and int32, Sum and
// Max, out of place and in place, at offsets inside it, above and below
// the size that the test's WEFT_CE_ALLREDUCE_MIN_BYTES makes zero-copy),
// an AllGather into the window and a ReduceScatter from it (float, 100,000
// elements per rank: weft's direct plans), a send/recv ring into a window
// registered without the promise, then bad input and deregistration.
// Every element checked.
static void testWindows(ncclComm_t comm) {
  const size_t winBytes = 2u << 20;
  char* base = alloc(winBytes + 8192);
  char* head = base + 4096 * (rank % 2);
  ncclWindow_t win = NULL;
  CALL(ncclCommWindowRegister(comm, head, winBytes, &win, NCCL_WIN_COLL_SYMMETRIC));
  CHECK(win != NULL, "ncclCommWindowRegister gave a NULL window");
  const ncclDataType_t wt[] = {ncclFloat32, ncclInt32};
  const size_t wcounts[] = {70001, 1000, 131072};
  const size_t woffs[] = {0, 65552, 0};
  for (size_t ti = 0; ti < N(wt); ti++) {
    ncclDataType_t t = wt[ti];
    for (int op = ncclSum; op <= ncclMax; op += ncclMax - ncclSum) {
      for (size_t k = 0; k < N(wcounts); k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
          size_t n = wcounts[k];
          char* d = head + woffs[k];
          void* s = inplace ? (void*)d : alloc(n * typeSize(t));
          for (size_t i = 0; i < n; i++) put(s, t, i, in(rank, i));
          CALL(ncclAllReduce(s, d, n, t, op, comm, NULL));
          struct redCtx c = {op, t, 0, 0};
          int bad = wrong(d, t, 0, n, wantReduced, &c);
          CHECK(bad == 0, "AllReduce into a symmetric window, type %d op %d count %zu inplace %d: %d wrong", t, op, n, inplace, bad);
          if (!inplace) ncclMemFree(s);
        }
      }
    }
  }
  // AllGather into the window, ReduceScatter from it.
  {
    const size_t n = 100000, es = sizeof(float);
    char* o = alloc(n * nranks * es);
    for (size_t i = 0; i < n; i++) put(o, ncclFloat32, i, in(rank, i));
    CALL(ncclAllGather(o, head, n, ncclFloat32, comm, NULL));
    int bad = 0;
    for (int r = 0; r < nranks; r++) {
      struct srcCtx c = {r, 0};
      bad += wrong(head + r * n * es, ncclFloat32, 0, n, wantFrom, &c);
    }
    CHECK(bad == 0, "AllGather into a symmetric window: %d wrong", bad);
    for (size_t i = 0; i < n * nranks; i++) put(head, ncclFloat32, i, in(rank, i));
    CALL(ncclReduceScatter(head, o, n, ncclFloat32, ncclSum, comm, NULL));
    struct redCtx c = {ncclSum, ncclFloat32, 0, rank * n};
    bad = wrong(o, ncclFloat32, 0, n, wantReduced, &c);
    CHECK(bad == 0, "ReduceScatter from a symmetric window: %d wrong", bad);
    ncclMemFree(o);
  }
  // Receives into a window registered without the symmetric promise.
  char* rbuf = alloc(winBytes);
  ncclWindow_t rwin = NULL;
  CALL(ncclCommWindowRegister(comm, rbuf, winBytes, &rwin, NCCL_WIN_DEFAULT));
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  size_t bytes = 393224;
  char* s = alloc(bytes);
  for (size_t j = 0; j < bytes; j++) s[j] = (char)regByte(rank, 3, j);
  memset(rbuf + 4096, 0, bytes);
  CALL(ncclGroupStart());
  CALL(ncclSend(s, bytes, ncclUint8, next, comm, NULL));
  CALL(ncclRecv(rbuf + 4096, bytes, ncclUint8, prev, comm, NULL));
  CALL(ncclGroupEnd());
  int bad = regWrong(rbuf + 4096, prev, 3, bytes);
  CHECK(bad == 0, "receive into a window: %d of %zu bytes wrong", bad, bytes);
  ncclMemFree(s);
  ncclResult_t r = ncclCommWindowRegister(comm, head, winBytes, NULL, NCCL_WIN_DEFAULT);
  CHECK(r == ncclInvalidArgument, "NULL win = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "win"), "NULL win: last error %s does not name win", ncclGetLastError(comm));
  CALL(ncclCommWindowDeregister(comm, rwin));
  CALL(ncclCommWindowDeregister(comm, win));
  r = ncclCommWindowDeregister(comm, win);
  CHECK(r == ncclInvalidArgument, "second deregistration of a window = %d, want ncclInvalidArgument", r);
  ncclMemFree(rbuf);
  ncclMemFree(base);
}

static void testBadInput(ncclComm_t comm) {
  void* s = alloc(64);
  void* d = alloc(64);
  ncclResult_t r = ncclAllReduce(s, d, 4, ncclFloat32, ncclSum, NULL, NULL);
  CHECK(r == ncclInvalidArgument, "NULL comm = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(NULL), "comm"), "NULL comm: last error %s does not name comm", ncclGetLastError(NULL));
  r = ncclAllReduce(s, d, 4, (ncclDataType_t)99, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "bad datatype = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "datatype"), "bad datatype: last error %s", ncclGetLastError(comm));
  r = ncclAllReduce(s, d, 4, ncclFloat32, (ncclRedOp_t)42, comm, NULL);
  CHECK(r == ncclInvalidArgument, "bad op = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "op"), "bad op: last error %s", ncclGetLastError(comm));
  r = ncclBroadcast(s, d, 4, ncclFloat32, nranks, comm, NULL);
  CHECK(r == ncclInvalidArgument, "root out of range = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "root"), "bad root: last error %s", ncclGetLastError(comm));
  r = ncclSend(s, 4, ncclFloat32, -1, comm, NULL);
  CHECK(r == ncclInvalidArgument, "peer out of range = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "peer"), "bad peer: last error %s", ncclGetLastError(comm));
  r = ncclAllReduce(NULL, d, 4, ncclFloat32, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "NULL sendbuff = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "sendbuff"), "NULL sendbuff: last error %s", ncclGetLastError(comm));
  char stack[64];
  r = ncclAllReduce(stack, d, 4, ncclFloat32, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidArgument, "non-ncclMemAlloc buffer on hal/host = %d, want ncclInvalidArgument", r);
  r = ncclAllReduce(s, d, 4, ncclFloat32, ncclSum, comm, (cudaStream_t)0x1234);
  CHECK(r == ncclInvalidArgument, "stream on hal/host = %d, want ncclInvalidArgument", r);
  CHECK(mentions(ncclGetLastError(comm), "stream"), "stream: last error %s", ncclGetLastError(comm));
  r = ncclGroupEnd();
  CHECK(r == ncclInvalidUsage, "ncclGroupEnd without start = %d, want ncclInvalidUsage", r);
  ncclUniqueId junk;
  memset(&junk, 7, sizeof junk);
  ncclComm_t c2 = NULL;
  r = ncclCommInitRank(&c2, 2, junk, 0);
  CHECK(r == ncclInvalidArgument, "init with a foreign unique id = %d, want ncclInvalidArgument", r);
  // ncclConfig_t's minCTAs and maxCTAs are checked as NCCL checks them.
  ncclConfig_t badCfg = NCCL_CONFIG_INITIALIZER;
  badCfg.maxCTAs = 0;
  r = ncclCommInitRankConfig(&c2, 2, junk, 0, &badCfg);
  CHECK(r == ncclInvalidArgument && mentions(ncclGetLastError(NULL), "maxCTAs 0"),
        "config maxCTAs 0 = %d (%s), want ncclInvalidArgument naming maxCTAs", r, ncclGetLastError(NULL));
  badCfg.maxCTAs = 4;
  badCfg.minCTAs = 8;
  r = ncclCommInitRankConfig(&c2, 2, junk, 0, &badCfg);
  CHECK(r == ncclInvalidArgument && mentions(ncclGetLastError(NULL), "minCTAs 8, maxCTAs 4"),
        "config minCTAs 8 > maxCTAs 4 = %d (%s), want ncclInvalidArgument", r, ncclGetLastError(NULL));
  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0, "ncclGetErrorString(ncclSuccess) = %s", ncclGetErrorString(ncclSuccess));
  CHECK(ncclGetErrorString((ncclResult_t)1000) != NULL, "ncclGetErrorString(1000) is NULL");
  ncclMemFree(s);
  ncclMemFree(d);
}

static void testSplit(ncclComm_t comm) {
  ncclComm_t sub = NULL;
  int color = rank % 2;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  CALL(ncclCommSplit(comm, color, -rank, &sub, &cfg));
  if (sub == NULL) {
    CHECK(0, "ncclCommSplit gave no communicator");
    return;
  }
  int n = 0, me = -1;
  CALL(ncclCommCount(sub, &n));
  CALL(ncclCommUserRank(sub, &me));
  int want = 0, wantMe = 0;
  for (int r = 0; r < nranks; r++)
    if (r % 2 == color) {
      want++;
      if (r > rank) wantMe++;  // keys are -rank: higher ranks first
    }
  CHECK(n == want && me == wantMe, "split: count %d rank %d, want %d and %d", n, me, want, wantMe);
  int32_t* b = alloc(sizeof(int32_t));
  b[0] = rank;
  CALL(ncclAllReduce(b, b, 1, ncclInt32, ncclSum, sub, NULL));
  int sum = 0;
  for (int r = 0; r < nranks; r++)
    if (r % 2 == color) sum += r;
  CHECK(b[0] == sum, "split allreduce: %d, want %d", b[0], sum);
  ncclMemFree(b);
  // Without a config the new communicator inherits the parent's: it is
  // non-blocking, so the split may return ncclInProgress.
  ncclComm_t none = (ncclComm_t)1;
  ncclResult_t r = ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, 0, &none, NULL);
  CHECK(r == ncclSuccess || r == ncclInProgress, "ncclCommSplit(NOCOLOR on rank 0) = %d: %s", r, ncclGetLastError(NULL));
  if (rank == 0) CHECK(none == NULL, "NCCL_SPLIT_NOCOLOR gave a communicator");
  if (rank != 0 && none != NULL) {
    ncclResult_t async = ncclInProgress;
    for (int i = 0; i < 60000 && async == ncclInProgress; i++) {
      CALL(ncclCommGetAsyncError(none, &async));
      if (async == ncclInProgress) usleep(1000);
    }
    CHECK(async == ncclSuccess, "split without config: async error %d", async);
    CALL(ncclCommCount(none, &n));
    CHECK(n == nranks - 1, "split without rank 0: count %d, want %d", n, nranks - 1);
    CALL(ncclCommDestroy(none));
  }
  CALL(ncclCommDestroy(sub));
}

// One thread driving two ranks: ncclCommInitAll, and ncclCommInitRank of
// two ranks inside a group, then collectives of both communicators in one
// group (weft runs them in parallel; one after the other would deadlock).
static void testOneThreadTwoRanks(void) {
  ncclComm_t all[2] = {NULL, NULL};
  CALL(ncclCommInitAll(all, 2, NULL));
  ncclUniqueId id;
  CALL(ncclGetUniqueId(&id));
  ncclComm_t grouped[2] = {NULL, NULL};
  CALL(ncclGroupStart());
  for (int r = 0; r < 2; r++) CALL(ncclCommInitRank(&grouped[r], 2, id, r));
  CALL(ncclGroupEnd());
  ncclComm_t* sets[2] = {all, grouped};
  for (int k = 0; k < 2; k++) {
    if (sets[k][0] == NULL || sets[k][1] == NULL) {
      CHECK(0, "set %d: no communicators", k);
      continue;
    }
    int32_t* b[2];
    for (int r = 0; r < 2; r++) {
      int me = -1;
      CALL(ncclCommUserRank(sets[k][r], &me));
      CHECK(me == r, "set %d: comm %d has rank %d", k, r, me);
      b[r] = alloc(100 * sizeof(int32_t));
      for (int i = 0; i < 100; i++) b[r][i] = (r + 1) * i;
    }
    CALL(ncclGroupStart());
    for (int r = 0; r < 2; r++) CALL(ncclAllReduce(b[r], b[r], 100, ncclInt32, ncclSum, sets[k][r], NULL));
    CALL(ncclGroupEnd());
    int bad = 0;
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < 100; i++) bad += b[r][i] != 3 * i;
    CHECK(bad == 0, "set %d: grouped AllReduce of two communicators: %d wrong", k, bad);
    for (int r = 0; r < 2; r++) {
      ncclMemFree(b[r]);
      CALL(ncclCommDestroy(sets[k][r]));
    }
  }
}

// Scale mode (WEFT_CTEST_SCALE=1): inputs that stay exact at any number of
// ranks, for every type and operator. The inputs above, (r + 1)(i % 7 + 1),
// overflow uint8 sums and every product past a few ranks; here element i
// is active on 1 + i % 4 consecutive ranks only (rank r is active when
// (r − i) mod n < 1 + i % 4, as check.InputN keeps a window of active
// ranks) and neutral elsewhere (0 for sums and Max, 1 for Prod, 3 for
// Min). Active values are 1 or 2 (1 for PreMulSum, whose per-rank scalar
// is 1 or 2), so every partial sum or product of any reduction order is
// an integer of at most 16 that is a power of two, or of at most 8: exact
// in FP8 e5m2 (3 significant bits), and so in every type. Avg of a
// floating type is Σ·(1/n) in the type (exact when n is a power of two,
// within avgScaleTolerance otherwise); Avg of an integer type is
// floor(Σ/n) (the sums are non-negative, so floor is NCCL's truncation),
// at any n: past 8 ranks the plans with bounded peers divide once, at the
// step that completes each rank's result. Nothing is forwarded: the Go
// test runs with WEFT_NCCL_FALLBACK=0.

static int isInteger(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclUint8 || t == ncclInt32 || t == ncclUint32 || t == ncclInt64 || t == ncclUint64;
}

static int scaleActive(int r, size_t i) {
  int n = nranks, span = 1 + (int)(i % 4);
  if (span > n) span = n;
  int d = ((r - (int)(i % (size_t)n)) % n + n) % n;
  return d < span;
}

static double scaleIn(ncclRedOp_t op, int r, size_t i) {
  if (!scaleActive(r, i)) {
    switch (op) {
      case ncclProd: return 1;
      case ncclMin: return 3;
      default: return 0;
    }
  }
  if (op >= ncclNumOps) return 1;  // PreMulSum: the scalar varies instead
  return (double)(1 + (r + (int)(i / 4)) % 2);
}

static double scaleScalar(int r) { return (double)(1 + r % 2); }

// scaleWant is the exact reduction of scaleIn(op, 0..n−1, i).
static double scaleWant(ncclRedOp_t op, ncclDataType_t t, size_t i) {
  double acc = op == ncclProd ? 1 : op == ncclMin ? INFINITY : 0;
  for (int r = 0; r < nranks; r++) {
    double v = scaleIn(op, r, i);
    switch (op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = v > acc ? v : acc; break;
      case ncclMin: acc = v < acc ? v : acc; break;
      case ncclSum: case ncclAvg: acc += v; break;
      default: acc += scaleScalar(r) * v;  // PreMulSum
    }
  }
  if (op == ncclAvg) acc = isInteger(t) ? floor(acc / nranks) : acc / nranks;
  return acc;
}

// avgScaleTolerance: relative error of Σ·(1/n) rounded in type t, for at
// most 8 terms of at most 2/n each (a few units in the last place).
static double avgScaleTolerance(ncclRedOp_t op, ncclDataType_t t) {
  if (op != ncclAvg || isInteger(t)) return 0;
  switch (t) {
    case ncclFloat64: return 1e-14;
    case ncclFloat32: return 1e-6;
    case ncclFloat16: return 4e-3;
    case ncclBfloat16: return 3e-2;
    case ncclFloat8e4m3: return 0.25;
    default: return 0.5;  // e5m2: 2 mantissa bits
  }
}

struct scaleCtx { ncclRedOp_t op; ncclDataType_t t; size_t base; };
static double wantScale(size_t i, void* p) {
  struct scaleCtx* c = p;
  return scaleWant(c->op, c->t, c->base + i);
}
static int scaleIntAvg;  // integer Avg calls served and checked

// scaleReduce runs one reducing collective (0 AllReduce, 1 ReduceScatter,
// 2 Reduce to root) of count elements per rank of type t with operator
// op (ncclNumOps: PreMulSum with scalar 1 + rank % 2), in or out of
// place, and checks every element.
static void scaleReduce(ncclComm_t comm, int coll, ncclDataType_t t, const char* tn, int op, size_t count, int inplace, int root) {
  size_t es = typeSize(t), elems = coll == 1 ? count * nranks : count;
  char* s = alloc(elems * es);
  char* d = !inplace ? alloc(count * es) : coll == 1 ? s + (size_t)rank * count * es : s;
  for (size_t i = 0; i < elems; i++) put(s, t, i, scaleIn((ncclRedOp_t)op, rank, i));
  ncclRedOp_t rop = (ncclRedOp_t)op;
  char* sc = NULL;
  if (op == ncclNumOps) {
    sc = alloc(8);
    put(sc, t, 0, scaleScalar(rank));
    CALL(ncclRedOpCreatePreMulSum(&rop, sc, t, count % 2 ? ncclScalarHostImmediate : ncclScalarDevice, comm));
  }
  ncclResult_t r;
  switch (coll) {
    case 0: r = ncclAllReduce(s, d, count, t, rop, comm, NULL); break;
    case 1: r = ncclReduceScatter(s, d, count, t, rop, comm, NULL); break;
    default: r = ncclReduce(s, d, count, t, rop, root, comm, NULL);
  }
  static const char* colls[] = {"AllReduce", "ReduceScatter", "Reduce"};
  CHECK(r == ncclSuccess, "%s %s op %d count %zu: %d (%s): %s", colls[coll], tn, op, count, r, ncclGetErrorString(r), ncclGetLastError(comm));
  if (r == ncclSuccess && op == ncclAvg && isInteger(t)) scaleIntAvg++;
  if (r == ncclSuccess && (coll != 2 || rank == root)) {
    struct scaleCtx c = {(ncclRedOp_t)op, t, coll == 1 ? (size_t)rank * count : 0};
    tolerance = avgScaleTolerance((ncclRedOp_t)op, t);
    int bad = wrong(d, t, 0, count, wantScale, &c);
    tolerance = 0;
    CHECK(bad == 0, "%s %s op %d count %zu inplace %d root %d: %d wrong", colls[coll], tn, op, count, inplace, root, bad);
  }
  if (sc != NULL) {
    CALL(ncclRedOpDestroy(rop, comm));
    ncclMemFree(sc);
  }
  if (!inplace) ncclMemFree(d);
  ncclMemFree(s);
}

// testScale: AllReduce for every type and operator (PreMulSum with a
// scalar per rank), ReduceScatter and Reduce for every type with the
// operator rotating (two per type, so each operator runs on four types),
// counts 1 and 3001 (past the LL plans' bounds on hal/host), in and out of
// place alternating, Reduce to both ends.
static void testScale(ncclComm_t comm) {
  const size_t cs[] = {1, 3001};
  for (size_t ti = 0; ti < N(allTypes); ti++) {
    ncclDataType_t t = allTypes[ti];
    for (int op = 0; op <= ncclNumOps; op++)
      for (size_t ci = 0; ci < N(cs); ci++) scaleReduce(comm, 0, t, allTypeNames[ti], op, cs[ci], (int)((ti + op + ci) % 2), 0);
    for (int k = 0; k < 2; k++) {
      int op = (int)(ti + 3 * k) % (ncclNumOps + 1);
      for (size_t ci = 0; ci < N(cs); ci++) {
        scaleReduce(comm, 1, t, allTypeNames[ti], op, cs[ci], (int)((ti + ci) % 2), 0);
        scaleReduce(comm, 2, t, allTypeNames[ti], op, cs[ci], (int)((ti + ci + 1) % 2), k ? 0 : nranks - 1);
      }
    }
  }
}

static void readID(const char* path, ncclUniqueId* id) {
  for (int tries = 0; tries < 6000; tries++) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      size_t n = fread(id, 1, sizeof *id, f);
      fclose(f);
      if (n == sizeof *id) return;
    }
    usleep(10000);
  }
  fprintf(stderr, "rank %d: no unique id in %s\n", rank, path);
  exit(2);
}

int main(void) {
  const char* rs = getenv("RANK");
  const char* ns = getenv("WORLD_SIZE");
  const char* idFile = getenv("WEFT_ID_FILE");
  if (rs == NULL || ns == NULL || idFile == NULL) {
    fprintf(stderr, "set RANK, WORLD_SIZE and WEFT_ID_FILE\n");
    return 2;
  }
  rank = atoi(rs);
  nranks = atoi(ns);

  int v = 0;
  CALL(ncclGetVersion(&v));
  CHECK(v == NCCL_VERSION_CODE, "ncclGetVersion = %d, want %d", v, NCCL_VERSION_CODE);

  ncclUniqueId id;
  if (rank == 0) {
    CALL(ncclGetUniqueId(&id));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", idFile);
    FILE* f = fopen(tmp, "wb");
    fwrite(&id, 1, sizeof id, f);
    fclose(f);
    rename(tmp, idFile);
  } else {
    readID(idFile, &id);
  }

  // A non-blocking communicator, as PyTorch makes them: init returns
  // ncclInProgress until ncclCommGetAsyncError says it is done.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "ctest";
  // WEFT_CTEST_MAX_CTAS: a block budget through the config; the Go test
  // reads the blocks weft's launches held from its NCCL_DEBUG=INFO log.
  const char* maxCTAs = getenv("WEFT_CTEST_MAX_CTAS");
  if (maxCTAs != NULL) cfg.maxCTAs = atoi(maxCTAs);
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  CHECK(r == ncclSuccess || r == ncclInProgress, "ncclCommInitRankConfig = %d: %s", r, ncclGetLastError(NULL));
  ncclResult_t async = ncclInProgress;
  for (int i = 0; i < 60000 && async == ncclInProgress; i++) {
    CALL(ncclCommGetAsyncError(comm, &async));
    if (async == ncclInProgress) usleep(1000);
  }
  CHECK(async == ncclSuccess, "init: async error %d: %s", async, ncclGetLastError(comm));
  if (async != ncclSuccess) {
    printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
    return 1;
  }
  int n = 0, me = -1, dev = -1;
  CALL(ncclCommCount(comm, &n));
  CALL(ncclCommUserRank(comm, &me));
  CALL(ncclCommCuDevice(comm, &dev));
  CHECK(n == nranks && me == rank, "count %d rank %d, want %d and %d", n, me, nranks, rank);

  const char* scale = getenv("WEFT_CTEST_SCALE");
  if (scale != NULL && strcmp(scale, "1") == 0) {
    // Scale mode: every collective with inputs exact at any n (testScale),
    // the data-moving collectives and grouped send/recv, whose inputs
    // stay small at any n.
    testScale(comm);
    testAllGather(comm);
    testBroadcastReduce(comm);
    testAlltoAllGatherScatter(comm);
    testSendRecv(comm);
    testSplit(comm);
    printf("rank %d: %d integer Avg calls served\n", rank, scaleIntAvg);
  } else {
    testBadInput(comm);
    testAllReduce(comm);
    testPreMulSum(comm);
    testPreMulSumPerRank(comm);
    testAllGather(comm);
    testReduceScatter(comm);
    testBroadcastReduce(comm);
    testAlltoAllGatherScatter(comm);
    testAlltoAllInPlace(comm);
    testSendRecv(comm);
    testRegistered(comm);
    testWindows(comm);
    if (nranks >= 2) testSplit(comm);
    if (rank == 0) testOneThreadTwoRanks();
  }

  void* h = NULL;
  void* buf = alloc(256);
  CALL(ncclCommRegister(comm, buf, 256, &h));
  CALL(ncclCommDeregister(comm, h));
  ncclMemFree(buf);

  CALL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error after the tests: %d: %s", async, ncclGetLastError(comm));
  CALL(ncclCommFinalize(comm));
  CALL(ncclCommDestroy(comm));
  r = ncclCommCount(comm, &n);
  CHECK(r == ncclInvalidArgument, "use after destroy = %d, want ncclInvalidArgument", r);

  printf("rank %d: %d passed, %d failed\n", rank, passed, failed);
  return failed ? 1 : 0;
}
