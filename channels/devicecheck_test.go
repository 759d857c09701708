package channels_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftccl/weft/channels"
)

// The device headers have no NVRTC here; a host C++ compiler checks them
// instead. The prelude declares what NVRTC provides built in (execution
// space keywords, the bit-cast and min/max builtins): as CUDA attributes
// for clang's CUDA mode, as nothing for a host compiler.
const devicePrelude = `#if defined(__clang__) && defined(__CUDA__)
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#else
#define __device__
#define __global__
#define __shared__
#define __forceinline__ inline
#endif
#define __align__(n) __attribute__((aligned(n)))
__device__ void __nanosleep(unsigned);
__device__ float __int_as_float(int);
__device__ unsigned __float_as_uint(float);
__device__ double __longlong_as_double(long long);
__device__ long long __double_as_longlong(double);
__device__ float fmaxf(float, float);
__device__ float fminf(float, float);
__device__ double fmax(double, double);
__device__ double fmin(double, double);
`

// reduceInstances instantiates every function of weft_reduce.h for every
// data type and base operator.
func reduceInstances() string {
	var b strings.Builder
	b.WriteString(`#include "prelude.h"
#include "weft_reduce.h"
using namespace weft;
template <int DT, int OP> __device__ void one(weft_u32x4* p, weft_u64* q) {
  p[0] = red128<DT, OP>(p[1], p[2]);
  q[0] = red64<DT, OP>(q[1], q[2]);
}
template <int DT> __device__ void all(weft_u32x4* p, weft_u64* q, weft_u64 s, int n) {
  static_assert(dtype_size<DT>::value == 1 || dtype_size<DT>::value == 2 || dtype_size<DT>::value == 4 || dtype_size<DT>::value == 8, "size");
  one<DT, OP_SUM>(p, q); one<DT, OP_PROD>(p, q); one<DT, OP_MAX>(p, q); one<DT, OP_MIN>(p, q);
  p[3] = scale128<DT>(p[4], s); q[3] = scale64<DT>(q[4], s);
  p[5] = div128<DT>(p[6], n); q[5] = div64<DT>(q[6], n);
}
__global__ void every_type(weft_u32x4* p, weft_u64* q, weft_u64 s, int n) {
`)
	for _, dt := range []string{"I8", "U8", "I32", "U32", "I64", "U64", "F16", "F32", "F64", "BF16", "F8E4M3", "F8E5M2"} {
		fmt.Fprintf(&b, "  all<DT_%s>(p, q, s, n);\n", dt)
	}
	b.WriteString("}\n")
	return b.String()
}

// TestReduceHeaderCompiles checks weft_reduce.h (with the NVIDIA HAL
// header) for every data type and operator: with clang in CUDA mode for
// sm_90 when clang++ is installed (inline PTX constraints included), else
// as host C++ with g++ (templates and types only), else it skips.
func TestReduceHeaderCompiles(t *testing.T) {
	hal, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	lib := channels.DeviceLibrary()
	if lib["weft_reduce.h"] == "" {
		t.Fatal("weft_reduce.h is not in the device library")
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"prelude.h": devicePrelude, "weft_hal.h": string(hal), "weft_reduce.h": lib["weft_reduce.h"], "check.cu": reduceInstances(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cmd *exec.Cmd
	switch {
	case lookPath("clang++") != "":
		cmd = exec.Command(lookPath("clang++"), "-x", "cuda", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib",
			"-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "check.cu")
	case lookPath("g++") != "":
		cmd = exec.Command(lookPath("g++"), "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "check.cu")
	default:
		t.Skip("no clang++ or g++ to check the device headers with")
	}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	t.Logf("checked with %s", cmd.Args[0])
}

func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}
