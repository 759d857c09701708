package nvswitch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cudadev"
)

// The data type and operator codes, as weft_reduce.h, hal/plan and
// weft_switch_hal.h's mm namespace name them.
var (
	dtCodes = []struct {
		name string
		code int
		t    plan.DataType
	}{
		{"I8", 0, plan.Int8}, {"U8", 1, plan.Uint8}, {"I32", 2, plan.Int32}, {"U32", 3, plan.Uint32},
		{"I64", 4, plan.Int64}, {"U64", 5, plan.Uint64}, {"F16", 6, plan.Float16}, {"F32", 7, plan.Float32},
		{"F64", 8, plan.Float64}, {"BF16", 9, plan.BFloat16}, {"F8E4M3", 10, plan.Float8E4M3}, {"F8E5M2", 11, plan.Float8E5M2},
	}
	opCodes = []struct {
		name string
		code int
		op   plan.RedOp
	}{{"SUM", 0, plan.Sum}, {"PROD", 1, plan.Prod}, {"MAX", 2, plan.Max}, {"MIN", 3, plan.Min}}
)

// switchCombo is one data type and operator the switch reduces, with the
// PTX instruction suffixes the header must emit for it (PTX ISA 8.1
// multimem.ld_reduce: integer .add is .s32/.u32/.u64 only, .min/.max
// .s32/.u32/.s64/.u64; floating .min/.max only at 16-bit widths; .f64 has
// no vector form).
type switchCombo struct {
	dt, op   string
	ld16     string // suffix of the 16-byte form's instruction
	ld4      string // suffix of the 4-byte form's, "" for 8-byte types
	elemSize int
}

var switchCombos = []switchCombo{
	{"I32", "SUM", "add.s32", "add.s32", 4}, {"I32", "MAX", "max.s32", "max.s32", 4}, {"I32", "MIN", "min.s32", "min.s32", 4},
	{"U32", "SUM", "add.u32", "add.u32", 4}, {"U32", "MAX", "max.u32", "max.u32", 4}, {"U32", "MIN", "min.u32", "min.u32", 4},
	{"I64", "SUM", "add.u64", "", 8}, {"I64", "MAX", "max.s64", "", 8}, {"I64", "MIN", "min.s64", "", 8},
	{"U64", "SUM", "add.u64", "", 8}, {"U64", "MAX", "max.u64", "", 8}, {"U64", "MIN", "min.u64", "", 8},
	{"F16", "SUM", "add.v4.f16x2", "add.f16x2", 2}, {"F16", "MAX", "max.v4.f16x2", "max.f16x2", 2}, {"F16", "MIN", "min.v4.f16x2", "min.f16x2", 2},
	{"BF16", "SUM", "add.v4.bf16x2", "add.bf16x2", 2}, {"BF16", "MAX", "max.v4.bf16x2", "max.bf16x2", 2}, {"BF16", "MIN", "min.v4.bf16x2", "min.bf16x2", 2},
	{"F32", "SUM", "add.v4.f32", "add.f32", 4},
	{"F64", "SUM", "add.f64", "", 8},
}

func supportedCombo(dt, op string) bool {
	for _, c := range switchCombos {
		if c.dt == dt && c.op == op {
			return true
		}
	}
	return false
}

func dtCode(name string) int {
	for _, d := range dtCodes {
		if d.name == name {
			return d.code
		}
	}
	panic(name)
}

func opCode(name string) int {
	for _, o := range opCodes {
		if o.name == name {
			return o.code
		}
	}
	panic(name)
}

// primitivesKernel is a kernel that calls every primitive of
// weft_switch_hal.h for every data type and operator the switch reduces,
// each at its own offset of a multicast address, with weft_reduce.h
// included alongside so that the codes are checked against it at compile
// time. It is compiled, never launched.
func primitivesKernel() string {
	var b strings.Builder
	b.WriteString(`#include "weft_hal.h"
#include "weft_reduce.h"
#include "weft_switch_hal.h"
`)
	for _, d := range dtCodes {
		fmt.Fprintf(&b, "static_assert(weft::DT_%s == %d, \"weft_reduce.h DT_%s\");\n", d.name, d.code, d.name)
	}
	for _, o := range opCodes {
		fmt.Fprintf(&b, "static_assert((int)weft::OP_%s == (int)weft::hal::mm::OP_%s, \"OP_%s\");\n", o.name, o.name, o.name)
	}
	for _, d := range dtCodes {
		for _, o := range opCodes {
			fmt.Fprintf(&b, "static_assert(weft::hal::mm::supported<%d, %d>::value == %v, \"supported<DT_%s, OP_%s>\");\n",
				d.code, o.code, supportedCombo(d.name, o.name), d.name, o.name)
		}
	}
	for _, c := range switchCombos {
		fmt.Fprintf(&b, "static_assert((int)weft::DT_%s == (int)weft::hal::mm::DT_%s, \"DT_%s\");\n", c.dt, c.dt, c.dt)
	}
	b.WriteString(`
extern "C" __global__ void weft_switch_primitives(weft_u32x4* out, weft_u32* out4, char* mc) {
`)
	for i, c := range switchCombos {
		fmt.Fprintf(&b, "  out[%d] = weft::hal::multimem_ld_reduce16<weft::DT_%s, weft::OP_%s>(mc + %d);\n", i, c.dt, c.op, 16*i)
		if c.ld4 != "" {
			fmt.Fprintf(&b, "  out4[%d] = weft::hal::multimem_ld_reduce4<weft::DT_%s, weft::OP_%s>(mc + %d);\n", i, c.dt, c.op, 16*i+4)
		}
	}
	fmt.Fprintf(&b, "  weft::hal::fence_proxy_alias();\n")
	fmt.Fprintf(&b, "  weft::hal::multimem_st16(mc + %d, out[0]);\n", 16*len(switchCombos))
	fmt.Fprintf(&b, "  weft::hal::multimem_st4(mc + %d, out4[0]);\n", 16*len(switchCombos)+16)
	b.WriteString("}\n")
	return b.String()
}

// unsupportedKernel instantiates every combination the switch does not
// reduce, and the 4-byte form of every 8-byte type: each must be a compile
// error. It returns the source and the number of errors expected.
func unsupportedKernel() (string, int) {
	var b strings.Builder
	b.WriteString("#include \"weft_switch_hal.h\"\n")
	n := 0
	for _, d := range dtCodes {
		for _, o := range opCodes {
			if supportedCombo(d.name, o.name) {
				continue
			}
			fmt.Fprintf(&b, "__device__ weft_u32x4 bad_%s_%s(const void* mc) { return weft::hal::multimem_ld_reduce16<%d, %d>(mc); }\n", d.name, o.name, d.code, o.code)
			n++
		}
	}
	for _, c := range switchCombos {
		if c.ld4 == "" {
			fmt.Fprintf(&b, "__device__ weft_u32 bad4_%s_%s(const void* mc) { return weft::hal::multimem_ld_reduce4<%d, %d>(mc); }\n", c.dt, c.op, dtCode(c.dt), opCode(c.op))
			n++
		}
	}
	return b.String(), n
}

// devicePrelude declares what NVRTC provides built in, for a host compiler
// (as channels' device header check does): CUDA attributes for clang's CUDA
// mode, nothing for g++.
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

// hostCompiler returns a clang that compiles CUDA (to PTX, for sm_90), or
// g++ (syntax and templates only), or skips.
func hostCompiler(t *testing.T) (path string, clang bool) {
	t.Helper()
	for _, n := range []string{"clang++", "clang++-19", "clang-19", "clang++-18", "clang-18", "clang"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, true
		}
	}
	if p, err := exec.LookPath("g++"); err == nil {
		return p, false
	}
	t.Skip("no clang or g++ to check weft_switch_hal.h with")
	return "", false
}

// compileHost writes the headers and src to a directory and compiles src:
// with clang to PTX for sm_90 (returned), with g++ for syntax.
func compileHost(t *testing.T, src string) (ptx string, out string, err error) {
	t.Helper()
	return compileHostMode(t, src, false)
}

// compileHostSyntax is compileHost checking syntax only, with either
// compiler.
func compileHostSyntax(t *testing.T, src string) (ptx string, out string, err error) {
	t.Helper()
	return compileHostMode(t, src, true)
}

func compileHostMode(t *testing.T, src string, syntaxOnly bool) (ptx string, out string, err error) {
	t.Helper()
	cc, clang := hostCompiler(t)
	dir := t.TempDir()
	lib := channels.DeviceLibrary()
	files := map[string]string{
		"prelude.h":       devicePrelude,
		"weft_hal.h":      cudadev.Fake(fakeDevice().Endpoint()).DeviceHeader(),
		"weft_reduce.h":   lib["weft_reduce.h"],
		SwitchHeaderName:  switchHeader,
		"check.cu":        "#include \"prelude.h\"\n" + src,
		"weft_channels.h": lib["weft_channels.h"],
		"weft_switch.h":   lib["weft_switch.h"],
		"weft_gin.h":      lib["weft_gin.h"],
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cmd *exec.Cmd
	switch {
	case clang && syntaxOnly:
		cmd = exec.Command(cc, "-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-nocudainc", "-nocudalib",
			"-std=c++17", "-fsyntax-only", "-Wno-unknown-pragmas", "check.cu")
	case clang:
		cmd = exec.Command(cc, "-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-nocudainc", "-nocudalib",
			"-std=c++17", "-O1", "-Wall", "-Wno-unknown-pragmas", "-ferror-limit=0", "-S", "-o", "check.ptx", "check.cu")
	default:
		cmd = exec.Command(cc, "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "check.cu")
	}
	cmd.Dir = dir
	o, err := cmd.CombinedOutput()
	if clang && !syntaxOnly && err == nil {
		b, rerr := os.ReadFile(filepath.Join(dir, "check.ptx"))
		if rerr != nil {
			t.Fatal(rerr)
		}
		ptx = string(b)
	}
	t.Logf("%s", strings.Join(cmd.Args, " "))
	return ptx, string(o), err
}

// TestSwitchHeaderCompiles compiles every primitive for every supported
// data type and operator with a host compiler; with clang (CUDA, sm_90) it
// also checks that each emits the multimem instruction of PTX ISA 8.1 it
// must. NVRTC and ptxas check the same kernel on a GPU host
// (TestSwitchCompileNVRTC).
func TestSwitchHeaderCompiles(t *testing.T) {
	ptx, out, err := compileHost(t, primitivesKernel())
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	if ptx == "" {
		t.Log("g++: syntax and templates checked; no PTX to inspect")
		return
	}
	want := map[string]bool{
		"multimem.st.relaxed.sys.global.v4.f32": true,
		"multimem.st.relaxed.sys.global.u32":    true,
		"fence.proxy.alias":                     true,
	}
	for _, c := range switchCombos {
		want["multimem.ld_reduce.relaxed.sys.global."+c.ld16] = true
		if c.ld4 != "" {
			want["multimem.ld_reduce.relaxed.sys.global."+c.ld4] = true
		}
	}
	got := map[string]bool{}
	re := regexp.MustCompile(`(?m)^\s*((?:multimem\.\S+)|fence\.proxy\.alias)`)
	for _, m := range re.FindAllStringSubmatch(ptx, -1) {
		got[strings.TrimSuffix(m[1], ";")] = true
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("multimem instructions in the PTX (-want +got):\n%s", d)
	}
	// Vector forms carry four registers, scalar ones one.
	if n := strings.Count(ptx, "multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {"); n != 1 {
		t.Errorf("%d .v4.f32 load-reduces with a vector operand, want 1", n)
	}
}

// TestSwitchHeaderRefuses: a data type and operator the switch does not
// reduce, and the 4-byte form of an 8-byte type, are compile errors that
// say why.
func TestSwitchHeaderRefuses(t *testing.T) {
	src, n := unsupportedKernel()
	_, out, err := compileHost(t, src)
	if err == nil {
		t.Fatalf("unsupported combinations compiled:\n%s", out)
	}
	got := strings.Count(out, "multimem.ld_reduce does not reduce this data type with this operator")
	got4 := strings.Count(out, "an 8-byte data type has no 4-byte multimem load-reduce")
	if got+got4 < n || got4 == 0 {
		t.Errorf("%d + %d static_assert errors for %d unsupported instantiations:\n%s", got, got4, n, out)
	}
}

// TestSwitchCodes: the header's codes are weft_reduce.h's, which are
// hal/plan's (ncclDataType_t, ncclRedOp_t).
func TestSwitchCodes(t *testing.T) {
	enum := func(src, prefix string) map[string]int {
		out := map[string]int{}
		for _, m := range regexp.MustCompile(`\b`+prefix+`([A-Z0-9]+) = (\d+)`).FindAllStringSubmatch(src, -1) {
			v, _ := strconv.Atoi(m[2])
			out[m[1]] = v
		}
		return out
	}
	reduce := channels.DeviceLibrary()["weft_reduce.h"]
	rdt, rop := enum(reduce, "DT_"), enum(reduce, "OP_")
	sdt, sop := enum(switchHeader, "DT_"), enum(switchHeader, "OP_")
	for _, d := range dtCodes {
		if rdt[d.name] != d.code || int(d.t) != d.code {
			t.Errorf("DT_%s: weft_reduce.h %d, plan %d, want %d", d.name, rdt[d.name], d.t, d.code)
		}
		if v, ok := sdt[d.name]; ok && v != d.code {
			t.Errorf("weft_switch_hal.h DT_%s = %d, want %d", d.name, v, d.code)
		}
	}
	for _, c := range switchCombos {
		if _, ok := sdt[c.dt]; !ok {
			t.Errorf("weft_switch_hal.h lacks DT_%s", c.dt)
		}
	}
	for _, o := range opCodes {
		if rop[o.name] != o.code || sop[o.name] != o.code || int(o.op) != o.code {
			t.Errorf("OP_%s: weft_reduce.h %d, weft_switch_hal.h %d, plan %d, want %d", o.name, rop[o.name], sop[o.name], o.op, o.code)
		}
	}
}

func TestSwitchReduces(t *testing.T) {
	tests := []struct {
		t    plan.DataType
		op   plan.RedOp
		want bool
	}{
		{plan.Float32, plan.Sum, true}, {plan.Float32, plan.Max, false}, {plan.Float64, plan.Sum, true},
		{plan.BFloat16, plan.Min, true}, {plan.Float16, plan.Prod, false}, {plan.Int64, plan.Avg, true},
		{plan.Float32, plan.Avg, false}, {plan.Int8, plan.Sum, false}, {plan.Float8E4M3, plan.Sum, false},
		{plan.Uint32, plan.PreMulSum, false},
	}
	for _, tt := range tests {
		if got := switchReduces(tt.t, tt.op); got != tt.want {
			t.Errorf("switchReduces(%v, %v) = %v, want %v", tt.t, tt.op, got, tt.want)
		}
	}
}

// kernelPrelude declares, for a host compiler, the NVRTC built-ins that
// generated plan kernels use besides the HAL header (as channels' kernel
// check does).
const kernelPrelude = `
struct weft_dim3 { unsigned x, y, z; };
extern __device__ weft_dim3 threadIdx, blockIdx, blockDim, gridDim;
__device__ void __syncthreads();
__device__ int __syncthreads_or(int);
#define __launch_bounds__(n)
#define __grid_constant__
`

// TestSwitchPlansCompileHost generates the kernels of the switch plans of
// package algorithms (as TestSwitchCompileNVRTC compiles them with NVRTC on
// a GPU host) and checks them with a host compiler against the channel
// library and this backend's weft_switch_hal.h.
func TestSwitchPlansCompileHost(t *testing.T) {
	plans := switchPlans(t, 4)
	if len(plans) == 0 {
		t.Skip("no switch plans (name containing \"nvls\") in package algorithms")
	}
	var b strings.Builder
	b.WriteString(kernelPrelude)
	n := 0
	for _, p := range plans {
		for _, k := range planKernels {
			src, err := plan.EmitCUDA(p, k.t, k.op)
			if errors.Is(err, plan.ErrInvalidPlan) && !switchReduces(k.t, k.op) {
				continue
			}
			if err != nil {
				t.Fatalf("plan %s %v %v: %v", p.Name, k.t, k.op, err)
			}
			// One translation unit per kernel: each defines weft_plan.
			_, out, err := compileHostSyntax(t, kernelPrelude+src)
			if err != nil || strings.TrimSpace(out) != "" {
				t.Fatalf("plan %s %v %v: %v\n%s", p.Name, k.t, k.op, err, out)
			}
			n++
		}
	}
	t.Logf("%d kernels of %d switch plans compiled", n, len(plans))
}
