// weft_hal.h: the device-side primitives of weft's AMD backend (hal/xgmi).
//
// The HIP twin of internal/cudadev/device/weft_hal.h: the same names and
// semantics, so that channels/device/*.h and generated plan kernels compile
// unchanged for AMD Instinct GPUs (gfx90a: MI200; gfx942: MI300). Written
// with clang's AMDGPU builtins, it compiles in two modes:
//   - under hipRTC (__HIPCC_RTC__ defined), which already declares the HIP
//     runtime names (threadIdx, __syncthreads_or, fmaxf, __int_as_float, …);
//   - under the system clang's HIP front end without ROCm (-nogpuinc
//     -nogpulib, as hal/xgmi/hipcc_test.go does), where the block below
//     declares the ones the channel library uses.
//
// What each primitive becomes, and why that is right. The memory model is
// the one LLVM's AMDGPU backend implements (AMDGPUUsage, "Memory Model
// GFX90A" and "GFX942"):
//   - Scopes: system (__HIP_MEMORY_SCOPE_SYSTEM; fence scope "") reaches
//     peer GPUs over xGMI and the host; agent is this GPU. A system-scope
//     acquire is the load then an invalidate of the caches that are not
//     coherent (gfx942: sc0 sc1, buffer_inv sc0 sc1; gfx90a: glc,
//     buffer_invl2 + buffer_wbinvl1_vol); a release writes L2 back and waits
//     (buffer_wbl2, s_waitcnt) before the store. That makes peers coherent
//     on fine-grained memory, which hal/xgmi allocates for every buffer
//     these primitives touch (hipExtMallocWithFlags fine-grained; coherent
//     hipHostMalloc for the host side).
//   - Semaphores: __hip_atomic_* with the order and scope of the NVIDIA
//     primitive (red_add_* issue the atomic without return); fence_sys is
//     __builtin_amdgcn_fence(acq_rel, system).
//   - LL packets: one volatile global_store_dwordx4 (LL16) or dwordx2 (LL8)
//     of data and flag words, polled with one volatile load of the same
//     width. Volatile global accesses bypass the non-coherent caches
//     (gfx942: sc0 sc1; gfx90a: glc on loads) and are each followed by
//     s_waitcnt vmcnt(0). LL relies only on each naturally aligned 8-byte
//     {data, flag} half being single-copy atomic: LL16 repeats the flag in
//     both halves and the reader checks both. AMDGPU gives aligned 64-bit
//     accesses that property (the backend implements 64-bit atomic loads and
//     stores as plain dwordx2 instructions), and RCCL's LL protocol rests
//     on the same fact; whether the 16 bytes land at once does not matter.
//   - globaltimer_ns: s_memrealtime, a device-wide counter at a constant
//     rate (HIP's wall_clock64): 100 MHz on gfx90a and gfx942, or
//     WEFT_HIP_WALLCLOCK_MHZ (hal/xgmi passes hipDeviceAttributeWallClockRate).
//     backoff: s_sleep 2 (about 128 clocks).
//   - f16x2: packed v_pk_* instructions (round to nearest even). bf16x2:
//     gfx90a/gfx942 have no bfloat16 arithmetic, so lanes widen exactly to
//     float, operate, and round back to nearest even; float's 24 bits are
//     at least 2·8+2, so that double rounding gives the correctly rounded
//     bfloat16 result.
//   - FP8 pairs: the OCP E4M3/E5M2 encodings of NVIDIA's cvt instructions;
//     gfx942's FP8 instructions use the FNUZ encodings instead, so the
//     conversions are software, exact, rounding to nearest even and
//     saturating as cvt.rn.satfinite does (NaN becomes 0x7f, as
//     internal/half).
//   - f32_mul_rn, f64_mul_rn, f16x2_mul: inline v_mul_*, never contracted
//     with a following add into an FMA, whatever -ffp-contract hipRTC uses.
// Wavefronts are 64 lanes wide here; nothing in this header or the channel
// library depends on the width (no warp-synchronous code, no shuffles).
#pragma once

#if !defined(__HIPCC_RTC__)
// ---- what HIP's runtime headers would declare ------------------------------
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))

struct weft_hip_dim3 {
  unsigned x, y, z;
};
#define threadIdx \
  (weft_hip_dim3{__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(), __builtin_amdgcn_workitem_id_z()})
#define blockIdx \
  (weft_hip_dim3{__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(), __builtin_amdgcn_workgroup_id_z()})
#define blockDim \
  (weft_hip_dim3{__builtin_amdgcn_workgroup_size_x(), __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z()})

// Block barrier with workgroup-scope release and acquire, as HIP's.
__device__ __forceinline__ void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// Non-zero when pred is in any thread of the block: one word of LDS,
// cleared between two barriers so that consecutive calls never mix votes.
__device__ __forceinline__ int __syncthreads_or(int pred) {
  __shared__ int vote;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) vote = 0;
  __syncthreads();
  if (pred) __hip_atomic_store(&vote, 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __syncthreads();
  return vote;
}

__device__ __forceinline__ float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__device__ __forceinline__ unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
__device__ __forceinline__ double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
__device__ __forceinline__ long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
__device__ __forceinline__ float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
__device__ __forceinline__ float fminf(float a, float b) { return __builtin_fminf(a, b); }
__device__ __forceinline__ double fmax(double a, double b) { return __builtin_fmax(a, b); }
__device__ __forceinline__ double fmin(double a, double b) { return __builtin_fmin(a, b); }
#endif  // !__HIPCC_RTC__

// HIP defines neither; clang has defined the scopes since version 14.
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif
#ifndef __grid_constant__
#define __grid_constant__
#endif
#ifndef __HIP_MEMORY_SCOPE_WORKGROUP
#define __HIP_MEMORY_SCOPE_WORKGROUP 3
#endif
#ifndef __HIP_MEMORY_SCOPE_AGENT
#define __HIP_MEMORY_SCOPE_AGENT 4
#endif
#ifndef __HIP_MEMORY_SCOPE_SYSTEM
#define __HIP_MEMORY_SCOPE_SYSTEM 5
#endif
#ifndef WEFT_HIP_WALLCLOCK_MHZ
#define WEFT_HIP_WALLCLOCK_MHZ 100
#endif

typedef unsigned char weft_u8;
typedef unsigned short weft_u16;
typedef unsigned int weft_u32;
typedef int weft_i32;
typedef unsigned long long weft_u64;
typedef long long weft_i64;

#ifndef WEFT_DEV
#define WEFT_DEV __device__ __forceinline__
#endif

struct __align__(16) weft_u32x4 {
  weft_u32 x, y, z, w;
};

namespace weft {
namespace hal {

typedef weft_u32 v2u32 __attribute__((ext_vector_type(2)));
typedef weft_u32 v4u32 __attribute__((ext_vector_type(4)));
typedef _Float16 v2f16 __attribute__((ext_vector_type(2)));

// gptr views p as a global-memory (address space 1) pointer: semaphores,
// packets and FIFOs never live in LDS, and global_* instructions skip the
// address-space check of flat ones.
#define WEFT_GLOBAL __attribute__((address_space(1)))
template <typename T>
WEFT_DEV WEFT_GLOBAL T* gptr(const T* p) { return (WEFT_GLOBAL T*)(weft_u64)p; }

// ---- ordinary loads and stores -----------------------------------------

// Plain accesses, so that the compiler keeps many loads in flight; ordering
// against semaphore waits comes from the block barrier after every wait.
WEFT_DEV weft_u32x4 ld16(const void* p) { return *(const weft_u32x4*)p; }
WEFT_DEV void st16(void* p, weft_u32x4 v) { *(weft_u32x4*)p = v; }

// ---- semaphores: 64-bit counters in local or peer memory ------------------

#define WEFT_SYS __HIP_MEMORY_SCOPE_SYSTEM
WEFT_DEV weft_u64 ld_acquire_sys(const weft_u64* p) { return __hip_atomic_load(gptr(p), __ATOMIC_ACQUIRE, WEFT_SYS); }
WEFT_DEV weft_u64 ld_relaxed_sys(const weft_u64* p) { return __hip_atomic_load(gptr(p), __ATOMIC_RELAXED, WEFT_SYS); }
WEFT_DEV weft_u32 ld_relaxed_sys32(const weft_u32* p) { return __hip_atomic_load(gptr(p), __ATOMIC_RELAXED, WEFT_SYS); }
WEFT_DEV void st_release_sys(weft_u64* p, weft_u64 v) { __hip_atomic_store(gptr(p), v, __ATOMIC_RELEASE, WEFT_SYS); }
WEFT_DEV void st_relaxed_sys(weft_u64* p, weft_u64 v) { __hip_atomic_store(gptr(p), v, __ATOMIC_RELAXED, WEFT_SYS); }
WEFT_DEV void st_relaxed_sys32(weft_u32* p, weft_u32 v) { __hip_atomic_store(gptr(p), v, __ATOMIC_RELAXED, WEFT_SYS); }

// Atomic add at system scope, result unused.
WEFT_DEV void red_add_release_sys(weft_u64* p, weft_u64 v) {
  (void)__hip_atomic_fetch_add(gptr(p), v, __ATOMIC_RELEASE, WEFT_SYS);
}
WEFT_DEV void red_add_relaxed_sys(weft_u64* p, weft_u64 v) {
  (void)__hip_atomic_fetch_add(gptr(p), v, __ATOMIC_RELAXED, WEFT_SYS);
}

// Returns the old value (cmp when the swap happened).
WEFT_DEV weft_u32 atomic_cas_sys32(weft_u32* p, weft_u32 cmp, weft_u32 val) {
  __hip_atomic_compare_exchange_strong(gptr(p), &cmp, val, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE, WEFT_SYS);
  return cmp;
}
#undef WEFT_SYS

// Atomic add at agent (GPU) scope returning the old value: the head counter
// of a port-channel FIFO, which only this device's blocks push to.
WEFT_DEV weft_u64 atomic_add_gpu64(weft_u64* p, weft_u64 v) {
  return __hip_atomic_fetch_add(gptr(p), v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

// Relaxed load and max at agent (GPU) scope: the seen tail beside a FIFO's
// head (plan.FifoSeenTail), which only this device's blocks read and raise.
WEFT_DEV weft_u64 ld_relaxed_gpu64(const weft_u64* p) {
  return __hip_atomic_load(gptr(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
WEFT_DEV void red_max_gpu64(weft_u64* p, weft_u64 v) {
  (void)__hip_atomic_fetch_max(gptr(p), v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

WEFT_DEV void fence_sys() { __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, ""); }

// ---- LL packets: data and flags in one single-instruction store ----------

// LL16: {data0, flag, data1, flag}.
WEFT_DEV void st_ll16(void* p, weft_u32 d0, weft_u32 d1, weft_u32 flag) {
  *(volatile WEFT_GLOBAL v4u32*)gptr(p) = v4u32{d0, flag, d1, flag};
}

// Returns true and the data when both flags equal flag.
WEFT_DEV bool ld_ll16(const void* p, weft_u32 flag, weft_u32& d0, weft_u32& d1) {
  const v4u32 v = *(const volatile WEFT_GLOBAL v4u32*)gptr(p);
  d0 = v.x;
  d1 = v.z;
  return v.y == flag && v.w == flag;
}

// LL8: {data, flag}.
WEFT_DEV void st_ll8(void* p, weft_u32 d, weft_u32 flag) { *(volatile WEFT_GLOBAL v2u32*)gptr(p) = v2u32{d, flag}; }

// LL128 (plan.LL128) relies on NVLink's single-write lines; hal/xgmi
// refuses LL128 plans, and these exist so that the shared channel library
// compiles.
typedef weft_u64 v2u64 __attribute__((ext_vector_type(2)));
WEFT_DEV void st_ll128(void* p, weft_u64 a, weft_u64 b) { *(volatile WEFT_GLOBAL v2u64*)gptr(p) = v2u64{a, b}; }
WEFT_DEV void ld_ll128(const void* p, weft_u64& a, weft_u64& b) {
  const v2u64 v = *(const volatile WEFT_GLOBAL v2u64*)gptr(p);
  a = v.x;
  b = v.y;
}
WEFT_DEV bool warp_any(bool pred) { return __builtin_amdgcn_ballot_w64(pred) != 0; }
WEFT_DEV void warp_sync() { __builtin_amdgcn_wave_barrier(); }

WEFT_DEV bool ld_ll8(const void* p, weft_u32 flag, weft_u32& d) {
  const v2u32 v = *(const volatile WEFT_GLOBAL v2u32*)gptr(p);
  d = v.x;
  return v.y == flag;
}

// ---- time -------------------------------------------------------------------

// Nanoseconds of the device-wide constant clock: used only for deadlines.
WEFT_DEV weft_u64 globaltimer_ns() { return __builtin_amdgcn_s_memrealtime() * 1000 / WEFT_HIP_WALLCLOCK_MHZ; }
WEFT_DEV void backoff() { __builtin_amdgcn_s_sleep(2); }

// ---- packed half arithmetic (two lanes per 32-bit word) ---------------------

WEFT_DEV v2f16 as_f16x2(weft_u32 a) { return __builtin_bit_cast(v2f16, a); }
WEFT_DEV weft_u32 f16x2_bits(v2f16 a) { return __builtin_bit_cast(weft_u32, a); }

WEFT_DEV weft_u32 f16x2_add(weft_u32 a, weft_u32 b) { return f16x2_bits(as_f16x2(a) + as_f16x2(b)); }
WEFT_DEV weft_u32 f16x2_min(weft_u32 a, weft_u32 b) { return f16x2_bits(__builtin_elementwise_min(as_f16x2(a), as_f16x2(b))); }
WEFT_DEV weft_u32 f16x2_max(weft_u32 a, weft_u32 b) { return f16x2_bits(__builtin_elementwise_max(as_f16x2(a), as_f16x2(b))); }
WEFT_DEV weft_u32 f16x2_mul(weft_u32 a, weft_u32 b) {  // never fused with an add (see f32_mul_rn)
  weft_u32 r;
  asm("v_pk_mul_f16 %0, %1, %2" : "=v"(r) : "v"(a), "v"(b));
  return r;
}

// ---- bfloat16 arithmetic and FP8 conversions ---------------------------------
//
// Plain C++ (integer, float and binary16 arithmetic): hipcc_test.go also
// runs this section on the host and compares it with internal/half.
//
// bfloat16 lanes widen exactly to float; float rounds back to nearest even
// (NaN stays NaN, quietened), as internal/half.BF16FromFloat32.
WEFT_DEV float bf16_lo(weft_u32 v) { return __builtin_bit_cast(float, v << 16); }
WEFT_DEV float bf16_hi(weft_u32 v) { return __builtin_bit_cast(float, v & 0xffff0000u); }
WEFT_DEV weft_u32 f32_to_bf16(float f) {
  const weft_u32 b = __builtin_bit_cast(weft_u32, f);
  return (b & 0x7fffffffu) > 0x7f800000u ? (b >> 16) | 0x40 : (b + 0x7fffu + ((b >> 16) & 1)) >> 16;
}
WEFT_DEV weft_u32 bf16x2_pack(float lo, float hi) { return f32_to_bf16(hi) << 16 | f32_to_bf16(lo); }

WEFT_DEV weft_u32 bf16x2_add(weft_u32 a, weft_u32 b) { return bf16x2_pack(bf16_lo(a) + bf16_lo(b), bf16_hi(a) + bf16_hi(b)); }
WEFT_DEV weft_u32 bf16x2_mul(weft_u32 a, weft_u32 b) { return bf16x2_pack(bf16_lo(a) * bf16_lo(b), bf16_hi(a) * bf16_hi(b)); }
WEFT_DEV weft_u32 bf16x2_min(weft_u32 a, weft_u32 b) {
  return bf16x2_pack(__builtin_fminf(bf16_lo(a), bf16_lo(b)), __builtin_fminf(bf16_hi(a), bf16_hi(b)));
}
WEFT_DEV weft_u32 bf16x2_max(weft_u32 a, weft_u32 b) {
  return bf16x2_pack(__builtin_fmaxf(bf16_lo(a), bf16_lo(b)), __builtin_fmaxf(bf16_hi(a), bf16_hi(b)));
}

// Two FP8 codes in a 16-bit word convert exactly to two binary16 lanes (the
// low byte becomes the low half); the way back rounds to nearest even and
// saturates to ±448 (E4M3) or ±57344 (E5M2), infinities included.

// E4M3 (S.EEEE.MMM, bias 7; S.1111.111 is NaN), both lanes at once: the
// magnitude bits shifted into place are the binary16 bits of value × 2^-8
// (bias 15 = 7 + 8; subnormals too), and × 256 is exact: AMDGPU keeps
// binary16 denormals by default (HIP's flush options concern float only).
WEFT_DEV weft_u32 e4m3x2_to_f16x2(weft_u16 v) {
  const weft_u32 x = (v & 0xffu) | (v & 0xff00u) << 8;  // one code per 16-bit lane
  const weft_u32 mag = x & 0x007f007fu;
  const weft_u32 nan = ((mag + 0x00010001u) & 0x00800080u) >> 7;  // 1 in lanes holding 0x7f
  const weft_u32 r = __builtin_bit_cast(weft_u32, __builtin_bit_cast(v2f16, mag << 7) * __builtin_bit_cast(v2f16, 0x5c005c00u));
  return r | nan * 0x7e00u | (x & 0x00800080u) << 8;
}

// E5M2 is the high byte of binary16 (same exponent and bias).
WEFT_DEV weft_u32 e5m2x2_to_f16x2(weft_u16 v) { return (v & 0xffu) << 8 | (v & 0xff00u) << 16; }

// binary16 to E4M3. From 2^-6 up, the code is the binary16 bits rebiased,
// with 7 mantissa bits rounded off; below, E4M3 is subnormal (steps of
// 2^-9), and adding 2^14 in float (23 fraction bits) rounds the value to a
// multiple of 2^-9: the code is the difference of the float's bits.
WEFT_DEV weft_u32 f16_to_e4m3(weft_u32 h) {
  const weft_u32 s = (h >> 8) & 0x80, a = h & 0x7fff;
  weft_u32 r = a - 0x2000;
  r = (r + 0x3f + ((r >> 7) & 1)) >> 7;
  const float f = (float)__builtin_bit_cast(_Float16, (weft_u16)a) + 16384.0f;
  const weft_u32 sub = __builtin_bit_cast(weft_u32, f) - 0x46800000u;
  return a > 0x7c00 ? 0x7f : s | (a < 0x2400 ? sub : r > 0x7e ? 0x7e : r);
}

// binary16 to E5M2: round off the low 8 bits.
WEFT_DEV weft_u32 f16_to_e5m2(weft_u32 h) {
  const weft_u32 s = (h >> 8) & 0x80, a = h & 0x7fff;
  const weft_u32 r = (a + 0x7f + ((a >> 8) & 1)) >> 8;
  return a > 0x7c00 ? 0x7f : s | (r > 0x7b ? 0x7b : r);
}

WEFT_DEV weft_u16 f16x2_to_e4m3x2(weft_u32 v) { return (weft_u16)(f16_to_e4m3(v >> 16) << 8 | f16_to_e4m3(v & 0xffff)); }
WEFT_DEV weft_u16 f16x2_to_e5m2x2(weft_u32 v) { return (weft_u16)(f16_to_e5m2(v >> 16) << 8 | f16_to_e5m2(v & 0xffff)); }

// ---- multiplies that are never fused ----------------------------------------
//
// An asm multiply is never contracted with the add that follows it, so a
// scaled contribution is rounded before it is summed, as hal/host does.
WEFT_DEV float f32_mul_rn(float a, float b) {
  float r;
  asm("v_mul_f32 %0, %1, %2" : "=v"(r) : "v"(a), "v"(b));
  return r;
}
WEFT_DEV double f64_mul_rn(double a, double b) {
  double r;
  asm("v_mul_f64 %0, %1, %2" : "=v"(r) : "v"(a), "v"(b));
  return r;
}

}  // namespace hal
}  // namespace weft
