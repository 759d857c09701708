package channels_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftccl/weft/channels"
)

// hostRunPrelude lets the device library run as host C++: the execution
// space keywords vanish, the thread indices are globals that the harness
// sets (one emulated thread after another: xfer_plain's threads touch
// disjoint elements and never synchronise), and the bit-cast and min/max
// builtins are defined. Functions with inline PTX are never instantiated by
// the harness, so their assembly is never emitted.
const hostRunPrelude = `#include <cstring>
#define __device__
#define __global__
#define __shared__ static
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
struct weft_dim3 { unsigned x, y, z; };
static weft_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline void __nanosleep(unsigned) {}
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned v; std::memcpy(&v, &f, 4); return v; }
inline double __longlong_as_double(long long v) { double f; std::memcpy(&f, &v, 8); return f; }
inline long long __double_as_longlong(double f) { long long v; std::memcpy(&v, &f, 8); return v; }
inline float fmaxf(float a, float b) { return a > b ? a : b; }
inline float fminf(float a, float b) { return a < b ? a : b; }
inline double fmax(double a, double b) { return a > b ? a : b; }
inline double fmin(double a, double b) { return a < b ? a : b; }
inline void __syncthreads() {}
`

// plainCopyHarness runs xfer_plain (channels/device/weft_channels.h) on the
// host: every length of a list, every offset of every pointer within 16
// bytes in element steps (up to four per pointer), blocks of 32 and 96
// threads, for float, int8, half, double and int64, copies and sums of two
// sources into one or two destinations; it checks every element and the
// guard bytes on both sides; and a copy in place beside another
// destination (skip_self).
const plainCopyHarness = `#include "prelude.h"
#include "weft_channels.h"
#include <cstdio>
#include <cstdint>
#include <vector>
using namespace weft;

// Runs xfer_plain<DT, OP_SUM, NS, ND> over every length, every offset of
// every pointer within 16 bytes (in element steps), and two block sizes,
// one emulated thread after another, and checks each destination against
// the element-wise sum (a copy for NS = 1) and the guard bytes around it.
static int failures;

template <typename T, int DT, int NS, int ND>
void check(const char* name) {
  constexpr int ES = sizeof(T);
  const weft_u64 lens[] = {0, 1, 2, 3, 5, 8, 15, 16, 17, 31, 64, 100, 257, 1000, 4097};
  const unsigned blocks[] = {32, 96};
  const int noff = 16 / ES;  // offsets 0, ES, …, 16 − ES
  const int combos = 1 << (2 * (NS + ND));  // up to 4 offsets per pointer
  long cases = 0;
  for (weft_u64 len : lens) {
    for (unsigned bd : blocks) {
      for (int combo = 0; combo < combos; combo++) {
        int off[NS + ND];
        for (int k = 0; k < NS + ND; k++) {
          int pick = (combo >> (2 * k)) & 3;  // 0, 1 element, half, last
          off[k] = (pick == 0 ? 0 : pick == 1 ? 1 : pick == 2 ? noff / 2 : noff - 1) * ES;
        }
        const size_t bytes = len * ES + 64;
        std::vector<std::vector<char>> src(NS, std::vector<char>(bytes + 32)), dst(ND, std::vector<char>(bytes + 32, (char)0x5a));
        // Buffers 16-byte aligned before the offset.
        const char* srcs[NS];
        char* dsts[ND];
        for (int i = 0; i < NS; i++) {
          char* base = (char*)(((uintptr_t)src[i].data() + 15) & ~(uintptr_t)15) + off[i];
          for (weft_u64 e = 0; e < len; e++) {
            T v = (T)((e * 7 + i * 3 + 1) % 97);
            std::memcpy(base + e * ES, &v, ES);
          }
          srcs[i] = base;
        }
        for (int j = 0; j < ND; j++) dsts[j] = (char*)(((uintptr_t)dst[j].data() + 15) & ~(uintptr_t)15) + off[NS + j];
        Ctx c;
        std::memset(&c, 0, sizeof c);
        blockDim.x = bd;
        for (unsigned t = 0; t < bd; t++) {
          threadIdx.x = t;
          xfer_plain<DT, OP_SUM, NS, ND, 4, CMB_NONE, 0>(c, srcs, dsts, len);
        }
        for (int j = 0; j < ND; j++) {
          for (weft_u64 e = 0; e < len; e++) {
            T want = 0;
            for (int i = 0; i < NS; i++) want += (T)((e * 7 + i * 3 + 1) % 97);
            T got;
            std::memcpy(&got, dsts[j] + e * ES, ES);
            if (got != want && failures++ < 10)
              printf("%s len %llu block %u dst %d offsets combo %d: element %llu = %g, want %g\n", name, (unsigned long long)len, bd, j, combo,
                     (unsigned long long)e, (double)got, (double)want);
          }
          for (int g = 1; g <= 8; g++) {
            if ((dsts[j] - g >= dst[j].data() && dsts[j][-g] != (char)0x5a) || dsts[j][len * ES + g - 1] != (char)0x5a) {
              if (failures++ < 10) printf("%s len %llu block %u dst %d combo %d: a guard byte changed\n", name, (unsigned long long)len, bd, j, combo);
              break;
            }
          }
        }
        cases++;
      }
    }
  }
  printf("%s: %ld cases\n", name, cases);
}

// checkInPlace: a copy whose first destination is its source (an in-place
// AllGather's own segment) writes only the other destination (skip_self)
// and leaves the source as it was.
template <typename T, int DT>
void checkInPlace(const char* name) {
  constexpr int ES = sizeof(T);
  const weft_u64 lens[] = {1, 3, 17, 100, 4097};
  long cases = 0;
  for (weft_u64 len : lens) {
    for (int off = 0; off < 16; off += ES) {
      std::vector<char> a(len * ES + 48), b(len * ES + 48, (char)0x5a);
      char* src = (char*)(((uintptr_t)a.data() + 15) & ~(uintptr_t)15) + off;
      char* other = (char*)(((uintptr_t)b.data() + 15) & ~(uintptr_t)15);
      for (weft_u64 e = 0; e < len; e++) {
        T v = (T)(e % 89 + 1);
        std::memcpy(src + e * ES, &v, ES);
      }
      const char* srcs[1] = {src};
      char* dsts[2] = {src, other};
      Ctx c;
      std::memset(&c, 0, sizeof c);
      blockDim.x = 64;
      for (unsigned t = 0; t < 64; t++) {
        threadIdx.x = t;
        xfer_plain<DT, OP_SUM, 1, 2, 4, CMB_NONE, 0>(c, srcs, dsts, len);
      }
      for (weft_u64 e = 0; e < len; e++) {
        T want = (T)(e % 89 + 1), got0, got1;
        std::memcpy(&got0, src + e * ES, ES);
        std::memcpy(&got1, other + e * ES, ES);
        if ((got0 != want || got1 != want) && failures++ < 10)
          printf("%s len %llu offset %d: element %llu = %g / %g, want %g\n", name, (unsigned long long)len, off, (unsigned long long)e, (double)got0,
                 (double)got1, (double)want);
      }
      if (other[len * ES] != (char)0x5a && failures++ < 10) printf("%s len %llu offset %d: a guard byte changed\n", name, (unsigned long long)len, off);
      cases++;
    }
  }
  printf("%s: %ld cases\n", name, cases);
}

int main() {
  check<float, DT_F32, 2, 2>("float sum, 2 sources, 2 destinations");
  check<float, DT_F32, 1, 1>("float copy");
  check<int8_t, DT_I8, 1, 2>("int8 copy to 2 destinations");
  check<int8_t, DT_I8, 2, 1>("int8 sum");
  check<uint16_t, DT_F16, 1, 2>("half copy to 2 destinations");
  check<double, DT_F64, 2, 1>("double sum");
  check<int64_t, DT_I64, 1, 1>("int64 copy");
  checkInPlace<float, DT_F32>("float copy in place beside another destination");
  checkInPlace<int8_t, DT_I8>("int8 copy in place beside another destination");
  if (failures) {
    printf("FAIL: %d mismatches\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
`

// TestPlainCopyRunsOnHost runs plainCopyHarness, compiled as host C++ with
// the NVIDIA device header and the channel library, under UBSan's
// alignment check: a 16- or 8-byte word loaded from an address it does not
// divide (which faults on a GPU and passes silently on x86) aborts the
// run. It covers the choice between 16-byte vectors, 8-byte words and
// elements, the unrolled rounds and the one-per-thread remainder of each,
// and the tail. Skips without a C++ compiler; without the sanitizer's
// runtime it runs unsanitized and says so.
func TestPlainCopyRunsOnHost(t *testing.T) {
	cxx := lookPath("g++")
	if cxx == "" {
		cxx = lookPath("clang++")
	}
	if cxx == "" {
		t.Skip("no C++ compiler to run the device library on the host")
	}
	hal, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{"prelude.h": hostRunPrelude, "weft_hal.h": string(hal), "run.cpp": plainCopyHarness}
	for name, src := range channels.DeviceLibrary() {
		files[name] = src
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func(extra ...string) ([]byte, error) {
		args := append([]string{"-x", "c++", "-std=c++17", "-O1", "-w"}, extra...)
		cmd := exec.Command(cxx, append(args, "run.cpp", "-o", "run")...)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	if out, err := build("-fsanitize=alignment", "-fno-sanitize-recover=all"); err != nil {
		t.Logf("%s with -fsanitize=alignment: %v (%s); running without the alignment check", cxx, err, strings.TrimSpace(string(out)))
		if out, err := build(); err != nil {
			t.Fatalf("%s: %v\n%s", cxx, err, out)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "run"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("xfer_plain on the host: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
