// weft_hal.h: the device-side primitives of weft's NVIDIA backends.
//
// This is the HAL device header of weft's CUDA backends, hal/nvlink and
// hal/pcie (architecture.md §2): the memory-model primitives that channels/
// and generated plan kernels are written against. A backend for other hardware (hal/xgmi) provides the same
// names in its own header. Everything here compiles under NVRTC with no
// include path: no CUDA toolkit header is used, and half/bfloat16
// arithmetic is written in inline PTX.
//
// Scopes are explicit on every atomic: ".sys", because the other side is a
// peer GPU or the host (memory reached through NVLink or PCIe).
#pragma once

typedef unsigned char weft_u8;
typedef unsigned short weft_u16;
typedef unsigned int weft_u32;
typedef int weft_i32;
typedef unsigned long long weft_u64;
typedef long long weft_i64;

#define WEFT_DEV __device__ __forceinline__

struct __align__(16) weft_u32x4 {
  weft_u32 x, y, z, w;
};

namespace weft {
namespace hal {

// ---- ordinary loads and stores -----------------------------------------

// Plain C++ accesses, not inline assembly: the compiler may then issue the
// loads of several sources and unrolled steps before the first use, which
// is what keeps enough NVLink reads in flight. Ordering against semaphore
// waits comes from the block barrier that follows every wait.
WEFT_DEV weft_u32x4 ld16(const void* p) { return *(const weft_u32x4*)p; }

WEFT_DEV void st16(void* p, weft_u32x4 v) { *(weft_u32x4*)p = v; }

// ---- semaphores: 64-bit counters in local or peer memory ------------------

// Acquire load at system scope: later reads see what the releasing writer
// wrote before its release.
WEFT_DEV weft_u64 ld_acquire_sys(const weft_u64* p) {
  weft_u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV weft_u64 ld_relaxed_sys(const weft_u64* p) {
  weft_u64 v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV weft_u32 ld_relaxed_sys32(const weft_u32* p) {
  weft_u32 v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV void st_release_sys(weft_u64* p, weft_u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void st_relaxed_sys(weft_u64* p, weft_u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void st_relaxed_sys32(weft_u32* p, weft_u32 v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Atomic add with release semantics at system scope, result unused.
WEFT_DEV void red_add_release_sys(weft_u64* p, weft_u64 v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void red_add_relaxed_sys(weft_u64* p, weft_u64 v) {
  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV weft_u32 atomic_cas_sys32(weft_u32* p, weft_u32 cmp, weft_u32 val) {
  weft_u32 old;
  asm volatile("atom.acq_rel.sys.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(cmp), "r"(val) : "memory");
  return old;
}

// Atomic add at GPU scope returning the old value: the head counter of a
// port-channel FIFO, which only this device's blocks push to.
WEFT_DEV weft_u64 atomic_add_gpu64(weft_u64* p, weft_u64 v) {
  weft_u64 old;
  asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}

// Relaxed load and max at GPU scope: the seen tail beside a FIFO's head
// (plan.FifoSeenTail), which only this device's blocks read and raise.
WEFT_DEV weft_u64 ld_relaxed_gpu64(const weft_u64* p) {
  weft_u64 v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

WEFT_DEV void red_max_gpu64(weft_u64* p, weft_u64 v) {
  asm volatile("red.relaxed.gpu.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

WEFT_DEV void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

// ---- LL packets: data and flags in one single-instruction store ----------

// LL16: {data0, flag, data1, flag}; the 16-byte store is single-copy
// atomic on NVIDIA GPUs for naturally aligned v4.u32 volatile accesses,
// which is what LL relies on (as NCCL's LL and MSCCL++'s LL16Packet do).
WEFT_DEV void st_ll16(void* p, weft_u32 d0, weft_u32 d1, weft_u32 flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(d0), "r"(flag), "r"(d1), "r"(flag)
               : "memory");
}

// Returns true and the data when both flags equal flag.
WEFT_DEV bool ld_ll16(const void* p, weft_u32 flag, weft_u32& d0, weft_u32& d1) {
  weft_u32 f0, f1;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
               : "l"(p)
               : "memory");
  return f0 == flag && f1 == flag;
}

// LL8: {data, flag}.
WEFT_DEV void st_ll8(void* p, weft_u32 d, weft_u32 flag) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(d), "r"(flag) : "memory");
}

// LL128: one thread's 16 bytes of a 128-byte line. The 8 threads of a
// line store (and load) it with one warp-wide instruction, which NVLink
// carries as one write (one read): what NCCL's LL128 relies on. Sound
// over NVLink only (plan.LL128).
WEFT_DEV void st_ll128(void* p, weft_u64 a, weft_u64 b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

WEFT_DEV void ld_ll128(const void* p, weft_u64& a, weft_u64& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

// warp_sync: the warp's lanes reconverge here (bar.warp.sync, as
// __syncwarp), so that the next instruction runs on all of them at once.
WEFT_DEV void warp_sync() { asm volatile("bar.warp.sync 0xffffffff;" ::: "memory"); }

// warp_any: true when pred is true on any lane of the warp; every lane
// must call it (vote.sync over the full mask, as __any_sync).
WEFT_DEV bool warp_any(bool pred) {
  weft_u32 r;
  asm volatile(
      "{ .reg .pred p, q;\n\t"
      "setp.ne.u32 p, %1, 0;\n\t"
      "vote.sync.any.pred q, p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, q; }"
      : "=r"(r)
      : "r"((weft_u32)pred));
  return r != 0;
}

WEFT_DEV bool ld_ll8(const void* p, weft_u32 flag, weft_u32& d) {
  weft_u32 f;
  asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(d), "=r"(f) : "l"(p) : "memory");
  return f == flag;
}

// ---- time -------------------------------------------------------------------

// Nanoseconds of the GPU's global timer (coarse, but monotonic and
// comparable across SMs): used only for wait deadlines.
WEFT_DEV weft_u64 globaltimer_ns() {
  weft_u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

WEFT_DEV void backoff() { __nanosleep(64); }

// ---- packed half and bfloat16 arithmetic (two lanes per 32-bit word) -------

WEFT_DEV weft_u32 f16x2_add(weft_u32 a, weft_u32 b) { weft_u32 r; asm("add.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 f16x2_mul(weft_u32 a, weft_u32 b) { weft_u32 r; asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 f16x2_min(weft_u32 a, weft_u32 b) { weft_u32 r; asm("min.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 f16x2_max(weft_u32 a, weft_u32 b) { weft_u32 r; asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 bf16x2_add(weft_u32 a, weft_u32 b) { weft_u32 r; asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 bf16x2_mul(weft_u32 a, weft_u32 b) { weft_u32 r; asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 bf16x2_min(weft_u32 a, weft_u32 b) { weft_u32 r; asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
WEFT_DEV weft_u32 bf16x2_max(weft_u32 a, weft_u32 b) { weft_u32 r; asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }

// ---- FP8 pairs <-> packed half (sm_89 and later) --------------------------
//
// Two FP8 values in a 16-bit word convert exactly to two binary16 lanes
// (lane order kept: the low byte becomes the low half); the way back
// rounds to nearest even and saturates to the largest finite FP8 value
// (.satfinite: ±448 for E4M3, ±57344 for E5M2, infinities included); NaN
// stays NaN. These instructions exist from sm_89 (PTX ISA 7.8) on.

WEFT_DEV weft_u32 e4m3x2_to_f16x2(weft_u16 v) { weft_u32 r; asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v)); return r; }
WEFT_DEV weft_u32 e5m2x2_to_f16x2(weft_u16 v) { weft_u32 r; asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"(v)); return r; }
WEFT_DEV weft_u16 f16x2_to_e4m3x2(weft_u32 v) { weft_u16 r; asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(v)); return r; }
WEFT_DEV weft_u16 f16x2_to_e5m2x2(weft_u32 v) { weft_u16 r; asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(r) : "r"(v)); return r; }

// ---- multiplies that are never fused ----------------------------------------

// A multiply with an explicit rounding modifier is never contracted with a
// following add into an FMA, so a scaled contribution is rounded before it
// is summed, as hal/host does.
WEFT_DEV float f32_mul_rn(float a, float b) { float r; asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
WEFT_DEV double f64_mul_rn(double a, double b) { double r; asm("mul.rn.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b)); return r; }

}  // namespace hal
}  // namespace weft
