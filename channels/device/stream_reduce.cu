// stream_reduce.cu: the kernel of hal.StreamReduce, dst[i] = src[i] ⊕ src2[i]
// for the elements of one data type (WEFT_DT, a DT_* code) and base operator
// (WEFT_OP, an OP_* code), both defined by the compiler options
// (channels.StreamReduceKernel), and weft_stream_copy, the kernel of a
// hal.StreamCopy done on SMs (channels.StreamCopyKernel). Host-issued plans queue it between copy-engine
// copies and stream flag operations (hal.StreamOps), e.g. the copy-engine
// AllReduce's reduction of a landed window.
//
// Its one by-value parameter is hal.StreamReduceParams: four 64-bit words.
// Any grid works: threads stride over 16-byte vectors (four per thread in
// flight) where the three addresses are 16-byte aligned, and over single
// elements otherwise and for the tail.
#include "weft_reduce.h"

using namespace weft;

struct StreamReduceParams {
  weft_u64 dst, src, src2;
  weft_i64 bytes;
};

// ldel and stel move one element of ES bytes between memory and the low
// bytes of a u64 (the other bytes zero), the tail form of weft_reduce.h.
template <int ES>
WEFT_DEV weft_u64 ldel(const char* p) {
  if (ES == 8) return *(const weft_u64*)p;
  if (ES == 4) return *(const weft_u32*)p;
  if (ES == 2) return *(const weft_u16*)p;
  return *(const weft_u8*)p;
}

template <int ES>
WEFT_DEV void stel(char* p, weft_u64 v) {
  if (ES == 8) *(weft_u64*)p = v;
  else if (ES == 4) *(weft_u32*)p = (weft_u32)v;
  else if (ES == 2) *(weft_u16*)p = (weft_u16)v;
  else *(weft_u8*)p = (weft_u8)v;
}

extern "C" __global__ void __launch_bounds__(1024) weft_stream_reduce(StreamReduceParams p) {
  constexpr int ES = dtype_size<WEFT_DT>::value;
  const weft_u64 tid = (weft_u64)blockIdx.x * blockDim.x + threadIdx.x;
  const weft_u64 stride = (weft_u64)gridDim.x * blockDim.x;
  const weft_u64 bytes = (weft_u64)p.bytes;
  weft_u64 nvec = 0;
  if (((p.dst | p.src | p.src2) & 15) == 0) nvec = bytes / 16;
  const weft_u32x4* a = (const weft_u32x4*)p.src;
  const weft_u32x4* b = (const weft_u32x4*)p.src2;
  weft_u32x4* d = (weft_u32x4*)p.dst;
  weft_u64 i = tid;
  for (; i + 3 * stride < nvec; i += 4 * stride) {
    weft_u32x4 a0 = a[i], a1 = a[i + stride], a2 = a[i + 2 * stride], a3 = a[i + 3 * stride];
    weft_u32x4 b0 = b[i], b1 = b[i + stride], b2 = b[i + 2 * stride], b3 = b[i + 3 * stride];
    d[i] = red128<WEFT_DT, WEFT_OP>(a0, b0);
    d[i + stride] = red128<WEFT_DT, WEFT_OP>(a1, b1);
    d[i + 2 * stride] = red128<WEFT_DT, WEFT_OP>(a2, b2);
    d[i + 3 * stride] = red128<WEFT_DT, WEFT_OP>(a3, b3);
  }
  for (; i < nvec; i += stride) d[i] = red128<WEFT_DT, WEFT_OP>(a[i], b[i]);
  const char* ca = (const char*)p.src;
  const char* cb = (const char*)p.src2;
  char* cd = (char*)p.dst;
  for (weft_u64 e = nvec * 16 / ES + tid; e < bytes / ES; e += stride) {
    weft_u64 x = ldel<ES>(ca + e * ES), y = ldel<ES>(cb + e * ES);
    stel<ES>(cd + e * ES, red64<WEFT_DT, WEFT_OP>(x, y));
  }
}

// weft_stream_copy copies p.bytes from p.src to p.dst (p.src2 unused): 16-byte
// vectors, four per thread in flight, where both addresses are 16-byte
// aligned, bytes otherwise and for the tail.
extern "C" __global__ void __launch_bounds__(1024) weft_stream_copy(StreamReduceParams p) {
  const weft_u64 tid = (weft_u64)blockIdx.x * blockDim.x + threadIdx.x;
  const weft_u64 stride = (weft_u64)gridDim.x * blockDim.x;
  const weft_u64 bytes = (weft_u64)p.bytes;
  weft_u64 nvec = 0;
  if (((p.dst | p.src) & 15) == 0) nvec = bytes / 16;
  const weft_u32x4* a = (const weft_u32x4*)p.src;
  weft_u32x4* d = (weft_u32x4*)p.dst;
  weft_u64 i = tid;
  for (; i + 3 * stride < nvec; i += 4 * stride) {
    weft_u32x4 a0 = a[i], a1 = a[i + stride], a2 = a[i + 2 * stride], a3 = a[i + 3 * stride];
    d[i] = a0;
    d[i + stride] = a1;
    d[i + 2 * stride] = a2;
    d[i + 3 * stride] = a3;
  }
  for (; i < nvec; i += stride) d[i] = a[i];
  const weft_u8* ca = (const weft_u8*)p.src;
  weft_u8* cd = (weft_u8*)p.dst;
  for (weft_u64 e = nvec * 16 + tid; e < bytes; e += stride) cd[e] = ca[e];
}
