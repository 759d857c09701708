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

// ginKernel calls every function of weft_gin.h, as a kernel that takes
// weft_gin_params as the first member of its parameter struct.
const ginKernel = `#include "prelude.h"
#include "weft_hal.h"
#include "weft_channels.h"
#include "weft_gin.h"
using namespace weft;

struct check_params {
  weft_gin_params gin;
  weft_u64 src, bytes;
};
static_assert(sizeof(check_params) == sizeof(weft_gin_params) + 16, "user arguments follow the GIN parameters");
static_assert(sizeof(weft_gin_params) == GIN_PARAMS_BYTES, "weft_gin_params differs from channels.GinParamsBytes");

__global__ void __launch_bounds__(256) gin_every_call(const __grid_constant__ check_params p) {
  const weft_gin_params& g = p.gin;
  const int peer = (g.rank + 1) % g.nranks;
  if (!gin::put(g, peer, 64, (const void*)p.src, p.bytes, 0)) return;
  if (!gin::put(g, peer, 0, (const void*)p.src, p.bytes, -1)) return;
  if (!gin::signal(g, peer, 1)) return;
  if (!gin::counter_put(g, peer, 3)) return;
  if (!gin::flush(g, peer)) return;
  if (!gin::wait_signal(g, peer, 0, 1)) return;
  if (!gin::wait_counter(g, 3, 1)) return;
  if (threadIdx.x == 0) {
    weft_u64 s = gin::read_signal(g, peer, 1);
    weft_u64 c = gin::read_counter(g, 3);
    if (s + c == 0) gin::reset_signal(g, peer, 1);
    gin::reset_counter(g, 3);
  }
}
`

// halHeader reads the NVIDIA HAL device header (internal/cudadev's, shared
// by hal/nvlink and hal/pcie).
func halHeader(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatalf("the CUDA HAL device header: %v", err)
	}
	return string(b)
}

// TestGinHeaderCompiles compiles a kernel that calls every function of the
// device API against the channel library and the NVIDIA HAL header, with
// clang++ in CUDA mode for sm_90 when installed (inline PTX constraints
// included), else g++ as host C++ (templates, types, layout asserts).
func TestGinHeaderCompiles(t *testing.T) {
	lib := channels.DeviceLibrary()
	if lib["weft_gin.h"] == "" {
		t.Fatal("weft_gin.h is not in the device library")
	}
	var cmd *exec.Cmd
	switch {
	case lookPath("clang++") != "":
		cmd = exec.Command(lookPath("clang++"), "-x", "cuda", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib",
			"-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "gin.cu")
	case lookPath("g++") != "":
		cmd = exec.Command(lookPath("g++"), "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "gin.cu")
	default:
		t.Skip("no clang++ or g++ to check the device API with")
	}
	dir := t.TempDir()
	files := map[string]string{"prelude.h": devicePrelude + kernelPrelude, "weft_hal.h": halHeader(t), "gin.cu": fmt.Sprintf("#define GIN_PARAMS_BYTES %d\n", channels.GinParamsBytes) + ginKernel}
	for name, src := range lib {
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
