// weft_switch_hal.h: the multimem primitives of hal/nvswitch (NVLink SHARP).
//
// This is the switch HAL header of weft's NVSwitch backend
// (hal.SwitchMapped.SwitchHeader, architecture.md §2): load-reduce and
// store through the multicast address of a multicast group, which the
// channel library's switch transfers (channels/device/weft_switch.h) are
// written against. A multicast address reaches the same offset of every
// member's bound memory: a store through it writes every member's copy, a
// load-reduce returns the element-wise reduction of every member's copy,
// computed in the NVSwitch.
//
// The instructions are PTX multimem.ld_reduce and multimem.st (PTX ISA 8.1,
// sm_90 and newer), relaxed, at system scope (the other members are other
// GPUs), in the .global state space. Ordering with the plan's other
// accesses comes from the memory-channel semaphores around switch phases
// and from fence_proxy_alias. Every address is a multicast address of a
// group (hal.Multicast.Addr plus an offset): a multimem instruction on any
// other address is undefined behaviour. 16-byte forms need 16-byte aligned
// addresses, 4-byte forms 4-byte aligned ones.
//
// Data types and operators are the codes of weft_reduce.h (DT_*, OP_*: the
// values of plan.DataType, i.e. ncclDataType_t, and the base operators),
// repeated in weft::hal::mm so that this header needs no channel header.
// The combinations are those of PTX multimem.ld_reduce, the set NCCL serves
// with NVLS and hal/plan's SwitchSupports accepts:
//
//   DT           OP_SUM            OP_MAX / OP_MIN
//   DT_I32       .add.s32          .max.s32 / .min.s32
//   DT_U32       .add.u32          .max.u32 / .min.u32
//   DT_I64       .add.u64 (*)      .max.s64 / .min.s64
//   DT_U64       .add.u64          .max.u64 / .min.u64
//   DT_F16       .add.v4.f16x2     .max.v4.f16x2 / .min.v4.f16x2
//   DT_BF16      .add.v4.bf16x2    .max.v4.bf16x2 / .min.v4.bf16x2
//   DT_F32       .add.v4.f32       -
//   DT_F64       .add.f64          -
//
// (*) PTX has no .add.s64; two's complement addition is the same as .u64.
// Integer and .f64 forms have no vector variant (PTX: ".f64 cannot be used
// with .vec"), so their 16-byte load-reduce issues four 4-byte or two
// 8-byte instructions. OP_PROD, 8-bit and FP8 types are not reduced by the
// switch; using them is a compile error (static_assert). Half and bfloat16
// sums may round differently from a sequence of packed adds (the switch
// accumulates at its own precision); inputs whose sums are exact, as
// weft's tests use, give equal results.
#pragma once
#include "weft_hal.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "weft_switch_hal.h: multimem instructions need sm_90 or newer (PTX ISA 8.1)"
#endif

namespace weft {
namespace hal {

// mm holds the type and operator codes and the table of what the switch
// reduces. It is a namespace of its own so that `using namespace weft::hal`
// next to weft_reduce.h's DT_* and OP_* enumerators is never ambiguous.
namespace mm {

// The values of weft_reduce.h's DT_* and OP_* (plan.DataType, ncclDataType_t;
// plan.RedOp base operators).
enum { DT_I32 = 2, DT_U32 = 3, DT_I64 = 4, DT_U64 = 5, DT_F16 = 6, DT_F32 = 7, DT_F64 = 8, DT_BF16 = 9 };
enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3 };

// supported<DT, OP>: multimem.ld_reduce reduces type DT with operator OP.
template <int DT, int OP>
struct supported {
  static constexpr bool integer = DT == DT_I32 || DT == DT_U32 || DT == DT_I64 || DT == DT_U64;
  static constexpr bool half = DT == DT_F16 || DT == DT_BF16;
  static constexpr bool value = ((integer || half) && (OP == OP_SUM || OP == OP_MAX || OP == OP_MIN)) ||
                                ((DT == DT_F32 || DT == DT_F64) && OP == OP_SUM);
};

// size<DT>: bytes per element of a type the switch reduces (0 otherwise).
template <int DT>
struct size {
  static constexpr int value = (DT == DT_F16 || DT == DT_BF16)                   ? 2
                               : (DT == DT_I32 || DT == DT_U32 || DT == DT_F32) ? 4
                               : (DT == DT_I64 || DT == DT_U64 || DT == DT_F64) ? 8
                                                                                : 0;
};

// One multimem.ld_reduce of 4 bytes: .s32/.u32 lanes, one .f32, or two
// .f16x2/.bf16x2 lanes.
template <int DT, int OP>
WEFT_DEV weft_u32 ld_reduce4(const void* mc) {
  weft_u32 v;
#define WEFT_MM_LD4(suffix) \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." suffix " %0, [%1];" : "=r"(v) : "l"(mc) : "memory")
  if constexpr (DT == DT_I32) {
    if constexpr (OP == OP_SUM) WEFT_MM_LD4("add.s32");
    else if constexpr (OP == OP_MAX) WEFT_MM_LD4("max.s32");
    else WEFT_MM_LD4("min.s32");
  } else if constexpr (DT == DT_U32) {
    if constexpr (OP == OP_SUM) WEFT_MM_LD4("add.u32");
    else if constexpr (OP == OP_MAX) WEFT_MM_LD4("max.u32");
    else WEFT_MM_LD4("min.u32");
  } else if constexpr (DT == DT_F32) {
    WEFT_MM_LD4("add.f32");
  } else if constexpr (DT == DT_F16) {
    if constexpr (OP == OP_SUM) WEFT_MM_LD4("add.f16x2");
    else if constexpr (OP == OP_MAX) WEFT_MM_LD4("max.f16x2");
    else WEFT_MM_LD4("min.f16x2");
  } else {  // DT_BF16
    if constexpr (OP == OP_SUM) WEFT_MM_LD4("add.bf16x2");
    else if constexpr (OP == OP_MAX) WEFT_MM_LD4("max.bf16x2");
    else WEFT_MM_LD4("min.bf16x2");
  }
#undef WEFT_MM_LD4
  return v;
}

// One multimem.ld_reduce of 8 bytes: one .s64/.u64 or .f64 lane.
template <int DT, int OP>
WEFT_DEV weft_u64 ld_reduce8(const void* mc) {
  weft_u64 v;
#define WEFT_MM_LD8(suffix) \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." suffix " %0, [%1];" : "=l"(v) : "l"(mc) : "memory")
  if constexpr (DT == DT_I64) {
    if constexpr (OP == OP_SUM) WEFT_MM_LD8("add.u64");
    else if constexpr (OP == OP_MAX) WEFT_MM_LD8("max.s64");
    else WEFT_MM_LD8("min.s64");
  } else if constexpr (DT == DT_U64) {
    if constexpr (OP == OP_SUM) WEFT_MM_LD8("add.u64");
    else if constexpr (OP == OP_MAX) WEFT_MM_LD8("max.u64");
    else WEFT_MM_LD8("min.u64");
  } else {  // DT_F64
    WEFT_MM_LD8("add.f64");
  }
#undef WEFT_MM_LD8
  return v;
}

}  // namespace mm

// multimem_ld_reduce16 returns the element-wise reduction with OP of the 16
// bytes at multicast address mc (16-byte aligned) over every member's copy:
// multimem.ld_reduce.relaxed.sys.global.<op>.v4.<type> for F32, F16 and
// BF16, four 4-byte or two 8-byte load-reduces for the integer types and
// F64. Lanes are in memory order.
template <int DT, int OP>
WEFT_DEV weft_u32x4 multimem_ld_reduce16(const void* mc) {
  static_assert(mm::supported<DT, OP>::value,
                "multimem.ld_reduce does not reduce this data type with this operator (PTX ISA 8.1, sm_90; see "
                "weft_switch_hal.h and hal/plan SwitchSupports)");
  weft_u32x4 v;
#define WEFT_MM_LD16(suffix)                                                                \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." suffix " {%0, %1, %2, %3}, [%4];" \
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                 \
               : "l"(mc)                                                                    \
               : "memory")
  if constexpr (DT == mm::DT_F32) {
    WEFT_MM_LD16("add.v4.f32");
  } else if constexpr (DT == mm::DT_F16) {
    if constexpr (OP == mm::OP_SUM) WEFT_MM_LD16("add.v4.f16x2");
    else if constexpr (OP == mm::OP_MAX) WEFT_MM_LD16("max.v4.f16x2");
    else WEFT_MM_LD16("min.v4.f16x2");
  } else if constexpr (DT == mm::DT_BF16) {
    if constexpr (OP == mm::OP_SUM) WEFT_MM_LD16("add.v4.bf16x2");
    else if constexpr (OP == mm::OP_MAX) WEFT_MM_LD16("max.v4.bf16x2");
    else WEFT_MM_LD16("min.v4.bf16x2");
  } else if constexpr (DT == mm::DT_I32 || DT == mm::DT_U32) {
    const char* p = (const char*)mc;
    v.x = mm::ld_reduce4<DT, OP>(p);
    v.y = mm::ld_reduce4<DT, OP>(p + 4);
    v.z = mm::ld_reduce4<DT, OP>(p + 8);
    v.w = mm::ld_reduce4<DT, OP>(p + 12);
  } else {  // DT_I64, DT_U64, DT_F64
    const char* p = (const char*)mc;
    const weft_u64 lo = mm::ld_reduce8<DT, OP>(p), hi = mm::ld_reduce8<DT, OP>(p + 8);
    v.x = (weft_u32)lo;
    v.y = (weft_u32)(lo >> 32);
    v.z = (weft_u32)hi;
    v.w = (weft_u32)(hi >> 32);
  }
#undef WEFT_MM_LD16
  return v;
}

// multimem_ld_reduce4 is the 4-byte form, for the tail of a transfer: the
// reduction of the 4 bytes at mc (4-byte aligned). 8-byte types have none.
template <int DT, int OP>
WEFT_DEV weft_u32 multimem_ld_reduce4(const void* mc) {
  static_assert(mm::supported<DT, OP>::value,
                "multimem.ld_reduce does not reduce this data type with this operator (PTX ISA 8.1, sm_90; see "
                "weft_switch_hal.h and hal/plan SwitchSupports)");
  static_assert(mm::size<DT>::value != 8, "an 8-byte data type has no 4-byte multimem load-reduce");
  return mm::ld_reduce4<DT, OP>(mc);
}

// multimem_st16 stores the 16 bytes v at multicast address mc (16-byte
// aligned) into every member's copy: multimem.st.relaxed.sys.global.v4.f32,
// which moves the bits unchanged whatever the lanes hold.
WEFT_DEV void multimem_st16(void* mc, weft_u32x4 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(mc), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

// multimem_st4 is the 4-byte form (multimem.st.relaxed.sys.global.u32).
WEFT_DEV void multimem_st4(void* mc, weft_u32 v) {
  asm volatile("multimem.st.relaxed.sys.global.u32 [%0], %1;" ::"l"(mc), "r"(v) : "memory");
}

// fence_proxy_alias orders this thread's accesses of the same bytes through
// a multicast address and through a unicast address (its own copy): the
// two addresses are aliases that the memory model treats as different
// proxies (PTX fence.proxy.alias, PTX ISA 7.5, sm_70).
WEFT_DEV void fence_proxy_alias() { asm volatile("fence.proxy.alias;" ::: "memory"); }

}  // namespace hal
}  // namespace weft
