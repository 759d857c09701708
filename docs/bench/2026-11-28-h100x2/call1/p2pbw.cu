// p2pbw: NVLink bandwidth between GPU 0 and GPU 1 by SM stores, SM loads,
// copy engines and SM+CE mixes, one way and both ways (session 14, call 1).
// Build: nvcc -O3 -arch=sm_90 -o p2pbw p2pbw.cu
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void copyk(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Contiguous parts per block (as weft's 2PA gives each block its own range).
__global__ void copyblk(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  size_t per = (n + gridDim.x - 1) / gridDim.x;
  size_t lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
  size_t i = lo + threadIdx.x;
  size_t s = blockDim.x;
  for (; i + 3 * s < hi; i += 4 * s) {
    int4 a = src[i], b = src[i + s], c = src[i + 2 * s], d = src[i + 3 * s];
    dst[i] = a; dst[i + s] = b; dst[i + 2 * s] = c; dst[i + 3 * s] = d;
  }
  for (; i < hi; i += s) dst[i] = src[i];
}

static const size_t BYTES = 512ull << 20;
static char *buf[2][2];  // buf[gpu][0] source, buf[gpu][1] destination
static cudaStream_t st[2][4];

struct Part { int gpu; bool sm; bool pull; int blocks; int threads; bool blk; size_t off, len; int stream; };

// One op: move [off, off+len) of src(from) to dst(to). gpu issues it.
static void issue(const Part& p) {
  int from = p.pull ? 1 - p.gpu : p.gpu;
  int to = 1 - from;
  const char* s = buf[from][0] + p.off;
  char* d = buf[to][1] + p.off;
  CK(cudaSetDevice(p.gpu));
  if (p.sm) {
    size_t n = p.len / 16;
    if (p.blk) copyblk<<<p.blocks, p.threads, 0, st[p.gpu][p.stream]>>>((const int4*)s, (int4*)d, n);
    else copyk<<<p.blocks, p.threads, 0, st[p.gpu][p.stream]>>>((const int4*)s, (int4*)d, n);
  } else {
    CK(cudaMemcpyAsync(d, s, p.len, cudaMemcpyDefault, st[p.gpu][p.stream]));
  }
}

static void syncall() {
  for (int g = 0; g < 2; g++) { CK(cudaSetDevice(g)); CK(cudaDeviceSynchronize()); }
}

// bytesPerDir: bytes moved per direction used (for GB/s per direction).
static void run(const char* name, const std::vector<Part>& parts, size_t bytesPerDir, int reps = 8) {
  for (int w = 0; w < 2; w++) { for (auto& p : parts) issue(p); syncall(); }
  double best = 1e30, sum = 0;
  for (int r = 0; r < reps; r++) {
    auto t0 = std::chrono::steady_clock::now();
    for (auto& p : parts) issue(p);
    syncall();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    best = us < best ? us : best; sum += us;
  }
  printf("%-44s %9.1f us best %9.1f mean  %6.1f GB/s/dir (best) %6.1f (mean)\n", name, best, sum / reps,
         bytesPerDir / best / 1e3, bytesPerDir / (sum / reps) / 1e3);
  fflush(stdout);
}

int main() {
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaDeviceEnablePeerAccess(1 - g, 0));
    for (int k = 0; k < 2; k++) { CK(cudaMalloc(&buf[g][k], BYTES)); CK(cudaMemset(buf[g][k], g + 1, BYTES)); }
    for (int k = 0; k < 4; k++) CK(cudaStreamCreateWithFlags(&st[g][k], cudaStreamNonBlocking));
  }
  syncall();
  const size_t B = BYTES;
  char nm[128];
  // One way, SM stores (push from GPU 0) and loads (pull by GPU 1).
  for (int blocks : {32, 64, 128, 132}) for (int th : {512, 1024}) {
    snprintf(nm, sizeof nm, "1way SM push %dx%d", blocks, th);
    run(nm, {{0, true, false, blocks, th, false, 0, B, 0}}, B);
  }
  run("1way SM push 128x512 blk", {{0, true, false, 128, 512, true, 0, B, 0}}, B);
  run("1way SM pull 132x512", {{1, true, true, 132, 512, false, 0, B, 0}}, B);
  run("1way SM pull 128x512 blk", {{1, true, true, 128, 512, true, 0, B, 0}}, B);
  // One way, copy engines.
  run("1way CE push 1 call", {{0, false, false, 0, 0, false, 0, B, 0}}, B);
  run("1way CE pull 1 call", {{1, false, true, 0, 0, false, 0, B, 0}}, B);
  for (int k : {2, 4}) {
    std::vector<Part> v;
    for (int i = 0; i < k; i++) v.push_back({0, false, false, 0, 0, false, B / k * i, B / k, i});
    snprintf(nm, sizeof nm, "1way CE push %d streams", k); run(nm, v, B);
  }
  {
    // push half by GPU 0's engine, pull half by GPU 1's engine
    std::vector<Part> w = {{0, false, false, 0, 0, false, 0, B / 2, 0}, {1, false, true, 0, 0, false, B / 2, B / 2, 0}};
    run("1way CE push half + CE pull half", w, B);
  }
  // One way, SM + CE mixes (SM stores a fraction f, a copy engine the rest).
  for (int pct : {50, 70, 85}) {
    size_t smb = (B * pct / 100) & ~(size_t)0xFFFFF;
    std::vector<Part> v = {{0, true, false, 128, 512, false, 0, smb, 0}, {0, false, false, 0, 0, false, smb, B - smb, 1}};
    snprintf(nm, sizeof nm, "1way SM push %d%% + CE push", pct); run(nm, v, B);
    std::vector<Part> u = {{0, true, false, 128, 512, false, 0, smb, 0}, {1, false, true, 0, 0, false, smb, B - smb, 1}};
    snprintf(nm, sizeof nm, "1way SM push %d%% + CE pull", pct); run(nm, u, B);
  }
  // Both ways.
  run("2way SM push 128x512", {{0, true, false, 128, 512, false, 0, B, 0}, {1, true, false, 128, 512, false, 0, B, 0}}, B);
  run("2way SM push 132x1024", {{0, true, false, 132, 1024, false, 0, B, 0}, {1, true, false, 132, 1024, false, 0, B, 0}}, B);
  run("2way SM pull 128x512", {{0, true, true, 128, 512, false, 0, B, 0}, {1, true, true, 128, 512, false, 0, B, 0}}, B);
  run("2way SM push 64 + pull 64 (x512)", {{0, true, false, 64, 512, false, 0, B / 2, 0}, {0, true, true, 64, 512, false, B / 2, B / 2, 1},
                                            {1, true, false, 64, 512, false, B / 2, B / 2, 0}, {1, true, true, 64, 512, false, 0, B / 2, 1}}, B);
  run("2way CE push", {{0, false, false, 0, 0, false, 0, B, 0}, {1, false, false, 0, 0, false, 0, B, 0}}, B);
  run("2way CE push 2 streams", {{0, false, false, 0, 0, false, 0, B / 2, 0}, {0, false, false, 0, 0, false, B / 2, B / 2, 1},
                                 {1, false, false, 0, 0, false, 0, B / 2, 0}, {1, false, false, 0, 0, false, B / 2, B / 2, 1}}, B);
  for (int pct : {50, 70, 85}) {
    size_t smb = (B * pct / 100) & ~(size_t)0xFFFFF;
    std::vector<Part> v = {{0, true, false, 128, 512, false, 0, smb, 0}, {0, false, false, 0, 0, false, smb, B - smb, 1},
                           {1, true, false, 128, 512, false, 0, smb, 0}, {1, false, false, 0, 0, false, smb, B - smb, 1}};
    snprintf(nm, sizeof nm, "2way SM push %d%% + CE push", pct); run(nm, v, B);
  }
  printf("done\n");
  return 0;
}
