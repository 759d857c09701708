package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftccl/weft/channels"
)

// prelude declares, for a host C++ compiler, what NVRTC provides built in
// (as channels' device-header checks do).
const prelude = `#if defined(__clang__) && defined(__CUDA__)
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
#define __launch_bounds__(n)
#define __grid_constant__
struct weft_dim3 { unsigned x, y, z; };
extern __device__ weft_dim3 threadIdx, blockIdx, blockDim, gridDim;
__device__ void __syncthreads();
__device__ int __syncthreads_or(int);
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

// TestKernelCompiles compiles moe.cu against the channel device library and
// the NVIDIA HAL header: with clang++ in CUDA mode for sm_90 when
// installed, else g++ as host C++. It also checks that moe_params has the
// size the Go side packs.
func TestKernelCompiles(t *testing.T) {
	var hal []byte
	for _, p := range []string{
		filepath.Join("..", "..", "internal", "cudadev", "device", "weft_hal.h"),
	} {
		if b, err := os.ReadFile(p); err == nil {
			hal = b
			break
		}
	}
	if hal == nil {
		t.Fatal("no weft_hal.h")
	}
	var cmd *exec.Cmd
	if p, err := exec.LookPath("clang++"); err == nil {
		cmd = exec.Command(p, "-x", "cuda", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib", "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "check.cu")
	} else if p, err := exec.LookPath("g++"); err == nil {
		cmd = exec.Command(p, "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "check.cu")
	} else {
		t.Skip("no clang++ or g++ to check moe.cu with")
	}
	dir := t.TempDir()
	files := map[string]string{"weft_hal.h": string(hal), "prelude.h": prelude, "moe.cu": kernelSource,
		"check.cu": fmt.Sprintf("#include \"prelude.h\"\n#include \"moe.cu\"\nstatic_assert(sizeof(moe_params) == %d, \"moe_params differs from params()\");\n", paramsBytes)}
	for name, src := range channels.DeviceLibrary() {
		files[name] = src
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	t.Logf("checked with %s", cmd.Args[0])
}
