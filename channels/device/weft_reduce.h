// weft_reduce.h: element-wise math of reducing transfers.
//
// For every data type (DT_*, the values of plan.DataType) and base operator
// (OP_*): red* combines two words of lanes, scale* multiplies every lane by
// a scalar (PreMulSum, and Avg of floating types), div* divides every lane
// by the number of ranks (Avg of integer types). The results are bit for
// bit those of hal/host (reduce.go):
//
//   - Integer lanes wrap (two's complement); Max, Min and division are
//     unsigned for unsigned types; division truncates toward zero.
//   - Float32 and Float64 round once per operation; scale multiplies with
//     an explicit rounding mode, so it is never fused with the sum that
//     follows into an FMA.
//   - Half and bfloat16 use the packed x2 instructions (one rounding each).
//   - FP8 converts a pair of lanes exactly to binary16, operates in packed
//     half precision (rounding to binary16) and converts back rounding to
//     nearest even with saturation to the largest finite value. For one
//     operation on FP8 operands that is the correctly rounded, saturated
//     result.
//
// Words hold lanes in memory order: ES = 1 types have 4 lanes per 32-bit
// word, ES = 2 two, ES = 4 one, ES = 8 one per 64-bit word. The tail path of
// a transfer holds one element in the low bytes of a u64 with the other
// bytes zero; every function leaves the low lane right in that case (zero
// lanes stay finite and never divide by zero).
//
// Only the HAL device header is used (weft_hal.h: packed half math, FP8
// pair conversions, unfused multiplies), plus the compiler builtins
// __int_as_float, __float_as_uint, __longlong_as_double,
// __double_as_longlong, fmaxf, fminf, fmax and fmin.
#pragma once
#include "weft_hal.h"

namespace weft {

using namespace weft::hal;

enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3 };

// Data type codes (plan.DataType, the values of ncclDataType_t).
enum {
  DT_I8 = 0, DT_U8 = 1, DT_I32 = 2, DT_U32 = 3, DT_I64 = 4, DT_U64 = 5,
  DT_F16 = 6, DT_F32 = 7, DT_F64 = 8, DT_BF16 = 9, DT_F8E4M3 = 10, DT_F8E5M2 = 11,
};

template <int DT> struct dtype_size;
template <> struct dtype_size<DT_I8> { static constexpr int value = 1; };
template <> struct dtype_size<DT_U8> { static constexpr int value = 1; };
template <> struct dtype_size<DT_I32> { static constexpr int value = 4; };
template <> struct dtype_size<DT_U32> { static constexpr int value = 4; };
template <> struct dtype_size<DT_I64> { static constexpr int value = 8; };
template <> struct dtype_size<DT_U64> { static constexpr int value = 8; };
template <> struct dtype_size<DT_F16> { static constexpr int value = 2; };
template <> struct dtype_size<DT_F32> { static constexpr int value = 4; };
template <> struct dtype_size<DT_F64> { static constexpr int value = 8; };
template <> struct dtype_size<DT_BF16> { static constexpr int value = 2; };
template <> struct dtype_size<DT_F8E4M3> { static constexpr int value = 1; };
template <> struct dtype_size<DT_F8E5M2> { static constexpr int value = 1; };

// ---- lanes ----------------------------------------------------------------------

// red_int combines integer lanes held in U: Sum and Prod on the unsigned
// bits (wrapping), Max and Min comparing as T (signed or unsigned).
template <typename T, typename U, int OP>
WEFT_DEV U red_int(U a, U b) {
  if (OP == OP_SUM) return a + b;
  if (OP == OP_PROD) return a * b;
  T x = (T)a, y = (T)b;
  return (OP == OP_MAX ? x > y : x < y) ? a : b;
}

template <int OP>
WEFT_DEV weft_u32 red_f16x2(weft_u32 a, weft_u32 b) {
  return OP == OP_SUM ? f16x2_add(a, b) : OP == OP_PROD ? f16x2_mul(a, b) : OP == OP_MAX ? f16x2_max(a, b) : f16x2_min(a, b);
}

template <int OP>
WEFT_DEV weft_u32 red_bf16x2(weft_u32 a, weft_u32 b) {
  return OP == OP_SUM ? bf16x2_add(a, b) : OP == OP_PROD ? bf16x2_mul(a, b) : OP == OP_MAX ? bf16x2_max(a, b) : bf16x2_min(a, b);
}

// FP8 pairs (the low 16 bits of v) to and from packed half.
template <int DT>
WEFT_DEV weft_u32 f8x2_to_f16x2(weft_u32 v) {
  return DT == DT_F8E4M3 ? e4m3x2_to_f16x2((weft_u16)v) : e5m2x2_to_f16x2((weft_u16)v);
}
template <int DT>
WEFT_DEV weft_u32 f16x2_to_f8x2(weft_u32 v) {
  return DT == DT_F8E4M3 ? f16x2_to_e4m3x2(v) : f16x2_to_e5m2x2(v);
}

// bytes applies f to the four byte lanes of a and b.
template <typename F>
WEFT_DEV weft_u32 bytes4(weft_u32 a, weft_u32 b, F f) {
  weft_u32 r = 0;
#pragma unroll
  for (int i = 0; i < 32; i += 8) r |= (f((a >> i) & 0xff, (b >> i) & 0xff) & 0xff) << i;
  return r;
}

// ---- reduction ----------------------------------------------------------------------

// red32 reduces one 32-bit word holding 4/ES lanes (ES ≤ 4).
template <int DT, int OP>
WEFT_DEV weft_u32 red32(weft_u32 a, weft_u32 b) {
  if (DT == DT_F32) {
    float x = __int_as_float(a), y = __int_as_float(b);
    float r = OP == OP_SUM ? x + y : OP == OP_PROD ? x * y : OP == OP_MAX ? fmaxf(x, y) : fminf(x, y);
    return __float_as_uint(r);
  } else if (DT == DT_I32) {
    return red_int<int, weft_u32, OP>(a, b);
  } else if (DT == DT_U32) {
    return red_int<weft_u32, weft_u32, OP>(a, b);
  } else if (DT == DT_F16) {
    return red_f16x2<OP>(a, b);
  } else if (DT == DT_BF16) {
    return red_bf16x2<OP>(a, b);
  } else if (DT == DT_F8E4M3 || DT == DT_F8E5M2) {
    weft_u32 lo = f16x2_to_f8x2<DT>(red_f16x2<OP>(f8x2_to_f16x2<DT>(a), f8x2_to_f16x2<DT>(b)));
    weft_u32 hi = f16x2_to_f8x2<DT>(red_f16x2<OP>(f8x2_to_f16x2<DT>(a >> 16), f8x2_to_f16x2<DT>(b >> 16)));
    return (hi << 16) | (lo & 0xffff);
  } else if (DT == DT_I8) {
    return bytes4(a, b, [](weft_u32 x, weft_u32 y) { return red_int<signed char, weft_u32, OP>(x, y); });
  } else {  // DT_U8
    return bytes4(a, b, [](weft_u32 x, weft_u32 y) { return red_int<weft_u8, weft_u32, OP>(x, y); });
  }
}

// red64 reduces 8 bytes of lanes.
template <int DT, int OP>
WEFT_DEV weft_u64 red64(weft_u64 a, weft_u64 b) {
  if (DT == DT_I64) return red_int<long long, weft_u64, OP>(a, b);
  if (DT == DT_U64) return red_int<weft_u64, weft_u64, OP>(a, b);
  if (DT == DT_F64) {
    double x = __longlong_as_double((long long)a), y = __longlong_as_double((long long)b);
    double r = OP == OP_SUM ? x + y : OP == OP_PROD ? x * y : OP == OP_MAX ? fmax(x, y) : fmin(x, y);
    return (weft_u64)__double_as_longlong(r);
  }
  weft_u32 lo = red32<DT, OP>((weft_u32)a, (weft_u32)b);
  weft_u32 hi = red32<DT, OP>((weft_u32)(a >> 32), (weft_u32)(b >> 32));
  return ((weft_u64)hi << 32) | lo;
}

WEFT_DEV weft_u64 lo64(weft_u32x4 v) { return ((weft_u64)v.y << 32) | v.x; }
WEFT_DEV weft_u64 hi64(weft_u32x4 v) { return ((weft_u64)v.w << 32) | v.z; }
WEFT_DEV weft_u32x4 mk128(weft_u64 lo, weft_u64 hi) {
  weft_u32x4 v;
  v.x = (weft_u32)lo; v.y = (weft_u32)(lo >> 32); v.z = (weft_u32)hi; v.w = (weft_u32)(hi >> 32);
  return v;
}

template <int DT, int OP>
WEFT_DEV weft_u32x4 red128(weft_u32x4 a, weft_u32x4 b) {
  return mk128(red64<DT, OP>(lo64(a), lo64(b)), red64<DT, OP>(hi64(a), hi64(b)));
}

// ---- scaling by a scalar (PreMulSum; Avg of floating types) ------------------------

// scale32 multiplies every lane of a 32-bit word (ES ≤ 4) by s, one element
// of type DT in the low bytes of s.
template <int DT>
WEFT_DEV weft_u32 scale32(weft_u32 v, weft_u64 s) {
  if (DT == DT_F32) {
    return __float_as_uint(f32_mul_rn(__int_as_float(v), __int_as_float((weft_u32)s)));
  } else if (DT == DT_I32 || DT == DT_U32) {
    return v * (weft_u32)s;
  } else if (DT == DT_F16 || DT == DT_BF16) {
    weft_u32 s2 = ((weft_u32)s & 0xffff) * 0x10001u;
    return DT == DT_F16 ? f16x2_mul(v, s2) : bf16x2_mul(v, s2);
  } else if (DT == DT_F8E4M3 || DT == DT_F8E5M2) {
    weft_u32 s2 = f8x2_to_f16x2<DT>(((weft_u32)s & 0xff) * 0x101u);
    weft_u32 lo = f16x2_to_f8x2<DT>(f16x2_mul(f8x2_to_f16x2<DT>(v), s2));
    weft_u32 hi = f16x2_to_f8x2<DT>(f16x2_mul(f8x2_to_f16x2<DT>(v >> 16), s2));
    return (hi << 16) | (lo & 0xffff);
  } else {  // DT_I8, DT_U8: the low 8 bits of a product do not depend on signedness
    weft_u32 s1 = (weft_u32)s & 0xff;
    return bytes4(v, 0, [s1](weft_u32 x, weft_u32) { return x * s1; });
  }
}

template <int DT>
WEFT_DEV weft_u64 scale64(weft_u64 v, weft_u64 s) {
  if (DT == DT_I64 || DT == DT_U64) return v * s;
  if (DT == DT_F64) {
    return (weft_u64)__double_as_longlong(f64_mul_rn(__longlong_as_double((long long)v), __longlong_as_double((long long)s)));
  }
  return ((weft_u64)scale32<DT>((weft_u32)(v >> 32), s) << 32) | scale32<DT>((weft_u32)v, s);
}

template <int DT>
WEFT_DEV weft_u32x4 scale128(weft_u32x4 v, weft_u64 s) {
  return mk128(scale64<DT>(lo64(v), s), scale64<DT>(hi64(v), s));
}

// ---- division by the number of ranks (Avg of integer types) -----------------------

// div32 divides every integer lane of a 32-bit word by n ≥ 1, truncating
// toward zero; floating types are returned unchanged (their Avg scales).
template <int DT>
WEFT_DEV weft_u32 div32(weft_u32 v, int n) {
  if (DT == DT_I32) return (weft_u32)((int)v / n);
  if (DT == DT_U32) return v / (weft_u32)n;
  if (DT == DT_I8) return bytes4(v, 0, [n](weft_u32 x, weft_u32) { return (weft_u32)((int)(signed char)x / n); });
  if (DT == DT_U8) return bytes4(v, 0, [n](weft_u32 x, weft_u32) { return x / (weft_u32)n; });
  return v;
}

template <int DT>
WEFT_DEV weft_u64 div64(weft_u64 v, int n) {
  if (DT == DT_I64) return (weft_u64)((long long)v / n);
  if (DT == DT_U64) return v / (weft_u64)n;
  if (DT == DT_F64) return v;
  return ((weft_u64)div32<DT>((weft_u32)(v >> 32), n) << 32) | div32<DT>((weft_u32)v, n);
}

template <int DT>
WEFT_DEV weft_u32x4 div128(weft_u32x4 v, int n) {
  return mk128(div64<DT>(lo64(v), n), div64<DT>(hi64(v), n));
}

}  // namespace weft
