// weft_switch.h: switch transfers of weft's channel device library.
//
// Kernels of plans with a switch buffer (hal/plan switch.go) include this
// header after weft_channels.h. A switch buffer is local device memory on
// every rank, bound to a multicast group of all the plan's ranks; the plan
// reaches this rank's copy with plain loads and stores (switch_at, through
// params.switch_local) and every rank's copy through the group's multicast
// address (params.switch_mc):
//
//   - a multicast source is the element-wise reduction of every member's
//     copy, computed in the switch (multimem load-reduce);
//   - a multicast destination is a store to every member's copy (multimem
//     store).
//
// The multimem primitives come from the backend's switch HAL header
// (weft_switch_hal.h, hal.SwitchMapped.SwitchHeader):
//
//   template <int DT, int OP> weft_u32x4 multimem_ld_reduce16(const void* mc);
//       relaxed, system scope: 16 bytes of DT lanes, reduced with OP (the
//       DT_* and OP_* codes of weft_reduce.h);
//   void multimem_st16(void* mc, weft_u32x4 v);
//       relaxed, system scope: 16 bytes to every member's copy;
//   void fence_proxy_alias();
//       orders this thread's accesses of the same memory through the
//       multicast address and through a unicast address (PTX
//       fence.proxy.alias).
//
// The switch moves whole 16-byte vectors. Chunks and block parts start on
// 16-byte boundaries of the switch buffer and every slot region is a
// multiple of 16 bytes, so the last, partial vector of a count is reduced
// and stored whole in the switch buffer (its lanes past the count hold
// unspecified values there); only its valid bytes are written to, or read
// from, a plain buffer. Plain operands (user buffers) may have any
// alignment.
//
// Ordering between phases is the plan's: memory-channel signal and wait
// (weft_channels.h) around the switch transfers, with switch_fence on both
// sides of every transfer that touches the switch buffer.
#pragma once
#include "weft_channels.h"
#include "weft_switch_hal.h"

namespace weft {

using namespace weft::hal;

// ---- layout (plan.SwitchStride, SwitchOffset, WindowSwitchOffset) ----------

// switch_at: element elem of slot `slot` of a plan without windows, in the
// copy or the multicast view whose base address is base.
template <int ES>
WEFT_DEV char* switch_at(const Ctx& c, weft_u64 base, int slot, weft_u64 elem) {
  const weft_u64 stride = c.p->switch_bytes / c.p->switch_slots / 16 * 16;
  return (char*)(base + slot * stride + elem * ES);
}

// wswitch_at: element elem (from the window's start) of slot `slot` in
// window w of a windowed plan; windows alternate between the two halves.
template <int ES>
WEFT_DEV char* wswitch_at(const Ctx& c, weft_u64 base, int slot, weft_u64 w, weft_u64 elem) {
  const weft_u64 stride = c.p->switch_bytes / 2 / c.p->switch_slots / 16 * 16;
  return (char*)(base + ((w & 1) * c.p->switch_slots + slot) * stride + elem * ES);
}

// switch_fence orders the calling thread's accesses through the multicast
// view with its accesses of the same bytes through a copy; plans call it on
// both sides of every transfer that touches the switch buffer.
WEFT_DEV void switch_fence() { fence_proxy_alias(); }

// ---- partial vectors ---------------------------------------------------------------

// ld_vec_part loads bytes [0, valid) at p (any alignment; valid a multiple
// of ES, at most 16) into the low bytes of a vector whose other bytes are 0.
template <int ES>
WEFT_DEV weft_u32x4 ld_vec_part(const char* p, int valid) {
  weft_u64 h[2] = {0, 0};
  const bool ea = ((weft_u64)p % ES) == 0;
  for (int b = 0; b < valid; b += ES) {
    const weft_u64 x = ea ? ld_elem<ES>(p + b) : ld_bytes(p + b, ES);
    h[b / 8] |= x << (8 * (b % 8));
  }
  weft_u32x4 v;
  v.x = (weft_u32)h[0];
  v.y = (weft_u32)(h[0] >> 32);
  v.z = (weft_u32)h[1];
  v.w = (weft_u32)(h[1] >> 32);
  return v;
}

// st_vec_part stores bytes [0, valid) of v at p (any alignment).
template <int ES>
WEFT_DEV void st_vec_part(char* p, weft_u32x4 v, int valid) {
  const weft_u64 h[2] = {(weft_u64)v.x | (weft_u64)v.y << 32, (weft_u64)v.z | (weft_u64)v.w << 32};
  const bool ea = ((weft_u64)p % ES) == 0;
  for (int b = 0; b < valid; b += ES) {
    const weft_u64 x = h[b / 8] >> (8 * (b % 8));
    if (ea) st_elem<ES>(p + b, x);
    else st_bytes(p + b, x, ES);
  }
}

// ---- switch transfers -----------------------------------------------------------------

// switch_value is the value of vector `off` (byte offset) of a switch
// transfer: the reduction of the group through mc_src (MCSRC), with the
// combine mode's division applied, or the reduction of the plain sources
// (CMB as xfer_plain). full: the vector is whole and the plain sources are
// 16-byte aligned.
template <int DT, int OP, int NS, int CMB, bool MCSRC>
WEFT_DEV weft_u32x4 switch_value(const Ctx& c, const char* mc_src, const char* const (&srcs)[NS > 0 ? NS : 1], weft_u64 off,
                                 int valid, bool full) {
  constexpr int ES = dtype_size<DT>::value;
  if constexpr (MCSRC) {
    static_assert(CMB != CMB_SCALE, "the switch sums contributions as they are: no PreMulSum, no floating Avg");
    return post128<DT, CMB>(c, multimem_ld_reduce16<DT, OP>(mc_src + off));
  } else {
    weft_u32x4 acc = pre128<DT, CMB>(c, full ? ld16(srcs[0] + off) : ld_vec_part<ES>(srcs[0] + off, valid));
#pragma unroll
    for (int i = 1; i < NS; i++) {
      const weft_u32x4 x = full ? ld16(srcs[i] + off) : ld_vec_part<ES>(srcs[i] + off, valid);
      acc = red128<DT, OP>(acc, pre128<DT, CMB>(c, x));
    }
    return post128<DT, CMB>(c, acc);
  }
}

// xfer_switch: for the len elements of this block's part, v = the
// reduction of the group through mc_src (MCSRC) or of the NS plain sources,
// then dsts[j] = v for the ND plain destinations and, with MCDST, a
// multimem store of v to every member through mc_dst. Pointers point at
// the part's first element; multicast ones are 16-byte aligned. All
// threads of the block take part, one 16-byte vector each per step, UNROLL
// vectors in flight per thread where every plain operand is aligned.
template <int DT, int OP, int NS, int ND, int UNROLL, int CMB, bool MCSRC, bool MCDST>
WEFT_DEV void xfer_switch(const Ctx& c, const char* mc_src, const char* const (&srcs)[NS > 0 ? NS : 1],
                          char* const (&dsts)[ND > 0 ? ND : 1], char* mc_dst, weft_u64 len) {
  static_assert(MCSRC != (NS > 0), "a switch transfer reads the multicast view or plain sources");
  constexpr int ES = dtype_size<DT>::value;
  const weft_u64 bytes = len * ES;
  const weft_u64 full = bytes / 16, nvec = (bytes + 15) / 16;
  bool aligned = true;
#pragma unroll
  for (int i = 0; i < NS; i++) aligned &= ((weft_u64)srcs[i] & 15) == 0;
#pragma unroll
  for (int j = 0; j < ND; j++) aligned &= ((weft_u64)dsts[j] & 15) == 0;
  weft_u64 v = threadIdx.x;
  if (aligned) {
    const weft_u64 stride = (weft_u64)blockDim.x * UNROLL;
    for (; v + (UNROLL - 1) * blockDim.x < full; v += stride) {
      weft_u32x4 acc[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) acc[u] = switch_value<DT, OP, NS, CMB, MCSRC>(c, mc_src, srcs, (v + u * blockDim.x) * 16, 16, true);
#pragma unroll
      for (int j = 0; j < ND; j++)
#pragma unroll
        for (int u = 0; u < UNROLL; u++) st16(dsts[j] + (v + u * blockDim.x) * 16, acc[u]);
      if constexpr (MCDST) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) multimem_st16(mc_dst + (v + u * blockDim.x) * 16, acc[u]);
      }
    }
  }
  // The rest, the partial last vector and unaligned plain operands: one
  // vector per thread per step.
  for (; v < nvec; v += blockDim.x) {
    const int valid = bytes - v * 16 < 16 ? (int)(bytes - v * 16) : 16;
    const bool whole = aligned && valid == 16;
    const weft_u32x4 acc = switch_value<DT, OP, NS, CMB, MCSRC>(c, mc_src, srcs, v * 16, valid, whole);
#pragma unroll
    for (int j = 0; j < ND; j++) {
      if (whole) st16(dsts[j] + v * 16, acc);
      else st_vec_part<ES>(dsts[j] + v * 16, acc, valid);
    }
    if constexpr (MCDST) multimem_st16(mc_dst + v * 16, acc);
  }
}

}  // namespace weft
