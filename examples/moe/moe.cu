// moe.cu: expert-parallel MoE dispatch and combine on weft's device API
// (weft_gin.h). The same three kernels as host.go, which runs them as Go
// code on hal/host:
//
//   moe_dispatch  grid n×B: block (d, b) packs its share of the rows this
//                 rank routes to rank d into the stage, then puts the count
//                 (b = 0), the rows' experts and the rows into d's window,
//                 the last put with signal SIG_DISPATCH;
//   moe_expert    grid n×B: block (s, b) waits until all B blocks of rank s
//                 have signalled, applies each of its rows' expert in place
//                 and puts the rows back into s's window (SIG_COMBINE);
//   moe_combine   grid G: waits for every rank's returned rows and forms
//                 each token as the gate-weighted sum of its rows.
//
// Whether a peer is reached by stores or through the copy engine is the
// communicator's business: the kernels are the same. With use_gin = 0 the
// kernels only pack, transform and combine, and the host moves the rows
// with NCCL (the baseline).
//
// Window layout: model.go's Layout.
#include "weft_hal.h"
#include "weft_channels.h"
#include "weft_gin.h"

using namespace weft;

enum { SIG_DISPATCH = 0, SIG_COMBINE = 1 };

struct moe_params {
  weft_gin_params g;
  weft_u64 x;             // tokens × hidden bf16
  weft_u64 src_tok;       // [n][capacity] i32: token of row p sent to rank d
  weft_u64 local_expert;  // [n][capacity] i32: expert (local to d) of that row
  weft_u64 counts;        // [n] i32: rows sent to rank d
  weft_u64 dest, pos;     // [tokens][topk] i32: rank and row of each copy
  weft_u64 weight;        // [tokens][topk] f32: gate weights
  weft_u64 out;           // tokens × hidden bf16
  weft_u64 epoch;         // iteration, from 1: signals expected = epoch × blocks_per_peer
  weft_u64 meta_bytes;    // Layout.MB
  weft_u64 rows_off;      // Layout.Rows
  weft_i32 tokens, hidden, topk, experts_per_rank, capacity, blocks_per_peer, use_gin, pad;
};

struct Lay {
  weft_u64 n, C, R, MB, rows;
  WEFT_DEV weft_u64 meta_send(int d) const { return d * MB; }
  WEFT_DEV weft_u64 meta_recv(int s) const { return (n + s) * MB; }
  WEFT_DEV weft_u64 stage(int d) const { return rows + d * C * R; }
  WEFT_DEV weft_u64 recv(int s) const { return rows + (n + s) * C * R; }
  WEFT_DEV weft_u64 ret(int d) const { return rows + (2 * n + d) * C * R; }
};

WEFT_DEV Lay layout(const moe_params& p) {
  Lay l;
  l.n = p.g.nranks, l.C = p.capacity, l.R = 2ull * p.hidden, l.MB = p.meta_bytes, l.rows = p.rows_off;
  return l;
}

WEFT_DEV void chunk(int count, int b, int blocks, int& lo, int& hi) {
  int per = (count + blocks - 1) / blocks;
  lo = b * per < count ? b * per : count;
  hi = (b + 1) * per < count ? (b + 1) * per : count;
}

WEFT_DEV float bf16_to_f32(weft_u32 b) { return __int_as_float((int)(b << 16)); }

// Round to nearest even (model.go's roundBF16; inputs are finite).
WEFT_DEV weft_u32 f32_to_bf16(float f) {
  weft_u32 u = __float_as_uint(f);
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

extern "C" __global__ void __launch_bounds__(512) moe_dispatch(const __grid_constant__ moe_params p) {
  const weft_gin_params& g = p.g;
  const Lay l = layout(p);
  const int d = blockIdx.x / p.blocks_per_peer, b = blockIdx.x % p.blocks_per_peer;
  const int count = ((const weft_i32*)p.counts)[d];
  int lo, hi;
  chunk(count, b, p.blocks_per_peer, lo, hi);
  char* win = (char*)g.window;
  char* stage = win + l.stage(d);
  char* meta = win + l.meta_send(d);
  const weft_i32* tok = (const weft_i32*)p.src_tok + (weft_u64)d * l.C;
  const weft_i32* ex = (const weft_i32*)p.local_expert + (weft_u64)d * l.C;
  // Pack: 16-byte vectors, rows spread over the block.
  const weft_u64 vpr = l.R / 16;  // vectors per row
  for (weft_u64 v = threadIdx.x; v < (weft_u64)(hi - lo) * vpr; v += blockDim.x) {
    const weft_u64 row = lo + v / vpr, col = v % vpr;
    st16(stage + row * l.R + col * 16, ld16((const char*)p.x + (weft_u64)tok[row] * l.R + col * 16));
  }
  for (int r = lo + threadIdx.x; r < hi; r += blockDim.x) ((weft_i32*)(meta + 16))[r] = ex[r];
  if (b == 0 && threadIdx.x == 0) *(weft_u64*)meta = count;
  if (!p.use_gin) return;
  const int me = g.rank;
  if (b == 0 && !gin::put(g, d, l.meta_recv(me), meta, 8, -1)) return;
  if (!gin::put(g, d, l.meta_recv(me) + 16 + 4ull * lo, meta + 16 + 4ull * lo, 4ull * (hi - lo), -1)) return;
  gin::put(g, d, l.recv(me) + lo * l.R, stage + lo * l.R, (weft_u64)(hi - lo) * l.R, SIG_DISPATCH);
}

extern "C" __global__ void __launch_bounds__(512) moe_expert(const __grid_constant__ moe_params p) {
  const weft_gin_params& g = p.g;
  const Lay l = layout(p);
  const int s = blockIdx.x / p.blocks_per_peer, b = blockIdx.x % p.blocks_per_peer;
  if (p.use_gin && !gin::wait_signal(g, s, SIG_DISPATCH, p.epoch * p.blocks_per_peer)) return;
  char* win = (char*)g.window;
  const char* meta = win + l.meta_recv(s);
  char* rows = win + l.recv(s);
  const int count = (int)*(volatile weft_u64*)meta;
  int lo, hi;
  chunk(count, b, p.blocks_per_peer, lo, hi);
  const weft_u64 vpr = l.R / 16;
  for (weft_u64 v = threadIdx.x; v < (weft_u64)(hi - lo) * vpr; v += blockDim.x) {
    const weft_u64 row = lo + v / vpr, col = v % vpr;
    const int e = g.rank * p.experts_per_rank + ((const weft_i32*)(meta + 16))[row];
    const float scale = (float)(e % 4 + 1);
    char* at = rows + row * l.R + col * 16;
    weft_u32x4 x = ld16(at);
    weft_u32* w = (weft_u32*)&x;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      weft_u32 lo16 = f32_to_bf16(f32_mul_rn(bf16_to_f32(w[i] & 0xffffu), scale));
      weft_u32 hi16 = f32_to_bf16(f32_mul_rn(bf16_to_f32(w[i] >> 16), scale));
      w[i] = lo16 | hi16 << 16;
    }
    st16(at, x);
  }
  if (!p.use_gin) return;
  gin::put(g, s, l.ret(g.rank) + lo * l.R, rows + lo * l.R, (weft_u64)(hi - lo) * l.R, SIG_COMBINE);
}

extern "C" __global__ void __launch_bounds__(512) moe_combine(const __grid_constant__ moe_params p) {
  const weft_gin_params& g = p.g;
  const Lay l = layout(p);
  if (p.use_gin) {
    // Thread d waits for rank d; the block follows.
    bool ok = true;
    if (threadIdx.x < (unsigned)g.nranks) {
      const int d = threadIdx.x;
      weft_u64* w = gin::local_sig(g, d, SIG_COMBINE);
      const weft_u64 base = *(volatile weft_u64*)gin::sig_base(g, d, SIG_COMBINE);
      const weft_u64 want = p.epoch * p.blocks_per_peer;
      gin::Deadline dl;
      weft_u64 v;
      while ((v = ld_relaxed_sys(w) - base) < want) {
        if (dl.expired(g)) {
          if (!gin::failed(g)) gin::fail(g, WHAT_SEMAPHORE, d, SIG_COMBINE, want, v);
          ok = false;
          break;
        }
      }
      if (ok) ld_acquire_sys(w);
    }
    if (!gin::all_ok(ok)) return;
  }
  const char* win = (const char*)g.window;
  const weft_u64 vpr = l.R / 16;
  const weft_u64 total = (weft_u64)p.tokens * vpr;
  for (weft_u64 v = blockIdx.x * (weft_u64)blockDim.x + threadIdx.x; v < total; v += (weft_u64)gridDim.x * blockDim.x) {
    const weft_u64 t = v / vpr, col = v % vpr;
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.f;
    for (int j = 0; j < p.topk; j++) {
      const weft_u64 k = t * p.topk + j;
      const int d = ((const weft_i32*)p.dest)[k];
      const weft_u64 row = ((const weft_i32*)p.pos)[k];
      const float wt = ((const float*)p.weight)[k];
      weft_u32x4 x = ld16(win + l.ret(d) + row * l.R + col * 16);
      const weft_u32* w = (const weft_u32*)&x;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        acc[2 * i] += f32_mul_rn(wt, bf16_to_f32(w[i] & 0xffffu));
        acc[2 * i + 1] += f32_mul_rn(wt, bf16_to_f32(w[i] >> 16));
      }
    }
    weft_u32x4 o;
    weft_u32* ow = (weft_u32*)&o;
#pragma unroll
    for (int i = 0; i < 4; i++) ow[i] = f32_to_bf16(acc[2 * i]) | f32_to_bf16(acc[2 * i + 1]) << 16;
    st16((char*)p.out + t * l.R + col * 16, o);
  }
}
