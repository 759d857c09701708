package xgmi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/half"
)

// The HIP HAL header (internal/hipdev/device/weft_hal.h) is checked here without ROCm and
// without an AMD GPU: the system clang's HIP front end compiles it, the
// channel library and every plan's generated kernel to AMDGPU assembly for
// gfx942 (MI300) and gfx90a (MI200), and the header's integer conversion
// code runs on the host against internal/half. What this cannot check is
// the memory model on real hardware (docs/conformance/xgmi-compile-*.md).

// hipArches are the AMD targets hal/xgmi supports.
var hipArches = []string{"gfx942", "gfx90a"}

var (
	hipOnce    sync.Once
	hipPath    string
	hipVersion string
	hipErr     error
	errNoClang = errors.New("no clang with the AMDGPU target in PATH (clang-19, clang-20, clang-18, clang); set WEFT_HIP_CLANG or run scripts/install-hip-clang.sh")
)

// hipClang returns the clang that compiles HIP for AMDGPU: $WEFT_HIP_CLANG,
// which must work (the test fails otherwise), or the first suitable clang
// in PATH. The test skips only when neither exists.
func hipClang(t *testing.T) string {
	t.Helper()
	hipOnce.Do(func() { hipPath, hipVersion, hipErr = findHIPClang() })
	switch {
	case hipErr == nil:
		return hipPath
	case errors.Is(hipErr, errNoClang):
		t.Skip(hipErr)
	}
	t.Fatal(hipErr)
	return ""
}

func findHIPClang() (path, version string, err error) {
	if env := os.Getenv("WEFT_HIP_CLANG"); env != "" {
		version, err := probeHIPClang(env)
		if err != nil {
			return "", "", fmt.Errorf("WEFT_HIP_CLANG=%s cannot compile HIP for gfx942: %w", env, err)
		}
		return env, version, nil
	}
	for _, name := range []string{"clang-19", "clang-20", "clang-18", "clang"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if version, err := probeHIPClang(p); err == nil {
			return p, version, nil
		}
	}
	return "", "", errNoClang
}

// probeHIPClang checks that clang lists the amdgcn target and compiles a
// HIP kernel for gfx942 without ROCm; it returns the version line.
func probeHIPClang(clang string) (string, error) {
	out, err := exec.Command(clang, "-print-targets").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -print-targets: %v: %s", clang, err, out)
	}
	if !bytes.Contains(out, []byte("amdgcn")) {
		return "", fmt.Errorf("%s has no amdgcn target", clang)
	}
	cmd := exec.Command(clang, append(hipFlags("gfx942"), "-o", "-", "-")...)
	cmd.Stdin = strings.NewReader(`extern "C" __attribute__((global)) void k(int* p) { p[0] = 1; }`)
	if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("global_store_dword")) {
		return "", fmt.Errorf("compile a gfx942 kernel: %v: %.400s", err, out)
	}
	out, err = exec.Command(clang, "--version").Output()
	if err != nil {
		return "", err
	}
	version, _, _ := strings.Cut(string(out), "\n")
	return version, nil
}

// hipFlags compile HIP device code for arch to assembly, with no ROCm
// headers or device libraries.
func hipFlags(arch string) []string {
	return []string{"-x", "hip", "--offload-arch=" + arch, "-nogpulib", "-nogpuinc", "--cuda-device-only",
		"-O3", "-std=c++17", "-S", "-Wall", "-Werror"}
}

// writeDeviceTree writes the HIP HAL header and the channel library into a
// new directory.
func writeDeviceTree(t *testing.T) string {
	t.Helper()
	hal, err := os.ReadFile(filepath.Join("..", "..", "internal", "hipdev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	files := channels.DeviceLibrary()
	if len(files) == 0 {
		t.Fatal("channels.DeviceLibrary is empty")
	}
	files["weft_hal.h"] = string(hal)
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// compileJob compiles one translation unit for one arch.
type compileJob struct {
	src, arch string
	flags     []string // added to hipFlags
	first     int      // index of the unit's first kernel (plan units)
	asm       string   // the assembly, once compiled
	err       error
}

// compileAll runs the jobs on every core and returns them done.
func compileAll(t *testing.T, clang, dir string, jobs []*compileJob) {
	t.Helper()
	work := make(chan *compileJob)
	var wg sync.WaitGroup
	for range max(1, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				out := strings.TrimSuffix(j.src, filepath.Ext(j.src)) + "-" + j.arch + ".s"
				cmd := exec.Command(clang, append(append(hipFlags(j.arch), j.flags...), "-o", out, j.src)...)
				cmd.Dir = dir
				if msg, err := cmd.CombinedOutput(); err != nil {
					j.err = fmt.Errorf("%s %s: %v\n%s", clang, strings.Join(cmd.Args[1:], " "), err, msg)
					continue
				}
				if !slices.Contains(j.flags, "-fsyntax-only") {
					asm, err := os.ReadFile(filepath.Join(dir, out))
					j.asm, j.err = string(asm), err
				}
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
}

// ---- every plan's generated kernel -----------------------------------------

// kernelCase is a data type and operator a plan is compiled for.
type kernelCase struct {
	t  plan.DataType
	op plan.RedOp
}

// The data types and operators of plan kernels: every plan for a type of
// each element size (elementCases; the transfer code differs by size), a
// plan that reduces also for every operator of reduceCases.
var (
	elementCases = []kernelCase{{plan.Float32, plan.Sum}, {plan.BFloat16, plan.Sum}, {plan.Float8E4M3, plan.Sum}, {plan.Float64, plan.Sum}}
	reduceCases  = []kernelCase{
		{plan.BFloat16, plan.Max}, {plan.Float16, plan.Prod}, {plan.Int32, plan.Min}, {plan.Float16, plan.PreMulSum},
		{plan.Int32, plan.Avg}, {plan.Float32, plan.PreMulSum}, {plan.Float8E5M2, plan.Avg}, {plan.Float64, plan.Max},
	}
	hipFull  = flag.Bool("hip-full", false, "compile every plan kernel to assembly for every data type and operator")
	hipFront = flag.Bool("hip-front", false, "check every plan kernel of every data type and operator with the front end (the assembly set stays representative)")
)

// hipFullSet says which plan kernels TestPlanKernelsCompileHIP compiles
// beyond the representative set (every plan once to assembly, for one case
// in turn so that every data type and operator meets some plan, and FP8
// Sum for every plan that reduces): full compiles every kernel to assembly
// (-hip-full, or WEFT_HIP_FULL=1), frontAll checks every kernel with the
// front end (-hip-front, or WEFT_HIP_FULL=front). The default keeps `make
// test` short; the weekly CI job (.ci/hip-full) runs the full set.
func hipFullSet() (full, frontAll bool) {
	v := os.Getenv("WEFT_HIP_FULL")
	return *hipFull || v == "1", *hipFront || v == "front"
}

// planCases returns the cases of plan p.
func planCases(p *plan.Plan) []kernelCase {
	if !reduces(p) {
		return elementCases
	}
	return append(slices.Clone(elementCases), reduceCases...)
}

// unserved reports whether plan p cannot run case k: PreMulSum on a plan
// that cannot scale each rank's input at its source (the zero-copy 2PA:
// plan.Plan.ServesPreMulSum), which EmitCUDA refuses and selection never
// runs.
func unserved(p *plan.Plan, k kernelCase) bool {
	return k.op == plan.PreMulSum && p.ServesPreMulSum() != nil
}

// gpuPlans returns every distinct plan a GPU communicator of 2, 4 and 8
// ranks builds: each collective's LL and HB plans (both LL packet formats,
// root and non-root forms of rooted collectives), the port-channel plans,
// the zero-copy AllReduce plans including the store-only 2PA, and the
// point-to-point plan. Plans whose kernels would be the same are kept once.
func gpuPlans(t *testing.T) []*plan.Plan {
	t.Helper()
	var out []*plan.Plan
	seen := map[[32]byte]bool{}
	add := func(p *plan.Plan) {
		src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		_, body, _ := strings.Cut(src, "\n") // the first line names the plan and rank
		if key := sha256.Sum256([]byte(body)); !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	const cus = 304 // MI300X compute units
	for _, n := range []int{2, 4, 8} {
		for _, ll := range []plan.Protocol{plan.LL16, plan.LL8} {
			cfg := algorithms.DefaultConfig(0, n, cus, true)
			cfg.LL = ll
			for _, coll := range algorithms.Collectives {
				for _, root := range []int{0, 1} {
					if root != 0 && !coll.Rooted() {
						continue
					}
					choices, err := algorithms.Plans(cfg, coll, root)
					if err != nil {
						t.Fatalf("%d ranks, %v: %v", n, coll, err)
					}
					for _, ch := range choices {
						add(ch.Plan)
					}
				}
				p, err := algorithms.PortPlan(cfg, coll)
				if err != nil {
					t.Fatalf("%d ranks, %v over port channels: %v", n, coll, err)
				}
				if p != nil {
					add(p)
				}
			}
			choices, err := algorithms.AllReducePlans(cfg)
			if err != nil {
				t.Fatalf("%d ranks, zero-copy AllReduce: %v", n, err)
			}
			for _, ch := range choices {
				add(ch.Plan)
			}
			// The plans with bounded peers (algorithms.BoundedPlans,
			// selected past 8 ranks) of 2 and 16 ranks, rank 1.
			for _, bn := range map[int][]int{2: {2, 16}}[n] {
				bc := algorithms.DefaultConfig(1, bn, cus, true)
				bc.LL = ll
				for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter, algorithms.Broadcast, algorithms.Reduce} {
					choices, err := algorithms.BoundedPlans(bc, coll, 0)
					if err != nil {
						t.Fatalf("%d ranks, %v with bounded peers: %v", bn, coll, err)
					}
					for _, ch := range choices {
						add(ch.Plan)
					}
				}
			}
			push := cfg.Large
			push.Push, push.Window = true, 4<<20
			p, err := algorithms.AllReduce2PAPush(cfg, push)
			if err != nil {
				t.Fatalf("%d ranks, 2PA push: %v", n, err)
			}
			add(p)
		}
	}
	return out
}

// reduces reports whether a plan's transfers combine several sources or
// scale their source (Combine), so that the operator shapes its kernel.
func reduces(p *plan.Plan) bool {
	for _, g := range p.Groups {
		for _, o := range append(slices.Clone(g.Ops), g.After...) {
			if o.Kind == plan.OpTransfer && (len(o.Srcs) > 1 || o.Combine) {
				return true
			}
		}
	}
	return false
}

// kernelUnit turns generated sources into one translation unit: the
// library once, then each kernel in a namespace of its own with the entry
// point renamed weft_plan_<i>.
func kernelUnit(t *testing.T, srcs []string, first int) string {
	t.Helper()
	prologue := fmt.Sprintf("#define WEFT_MAX_PEERS %d\n#define WEFT_MAX_GROUP_ARGS %d\n#include \"weft_hal.h\"\n#include \"weft_channels.h\"\n",
		plan.MaxPeers, plan.MaxGroupArgs)
	var b strings.Builder
	b.WriteString(prologue)
	for i, src := range srcs {
		head, body, _ := strings.Cut(src, "\n")
		rest, ok := strings.CutPrefix(body, prologue)
		if !ok {
			t.Fatalf("generated source does not start as expected:\n%.400s", src)
		}
		entry := " " + plan.KernelName + "("
		if strings.Count(rest, entry) != 1 {
			t.Fatalf("generated source defines %s %d times", plan.KernelName, strings.Count(rest, entry))
		}
		rest = strings.Replace(rest, entry, fmt.Sprintf(" %s_%d(", plan.KernelName, first+i), 1)
		fmt.Fprintf(&b, "\n%s\nnamespace k%d {\n%s}  // namespace k%d\n", head, first+i, rest, first+i)
	}
	return b.String()
}

// planFlags relax two warnings for generated kernels: a plan's unused
// constants (PROTO in HB plans), and loops that clang will not unroll
// fully because the body is too large (an 8-source FP8 reduction with the
// software FP8 conversions exceeds clang's unroll limit; the loop stays
// rolled, as NVRTC does silently).
var planFlags = []string{"-Wno-unused-const-variable", "-Wno-pass-failed"}

// planKernel is one plan compiled for one data type and operator.
type planKernel struct {
	name, src string
	asm       bool // compiled to assembly, not only checked by the front end
}

// planUnits writes kernels into translation units of at most n kernels
// and returns one job per unit and target.
func planUnits(t *testing.T, dir, prefix string, ks []planKernel, n int, flags []string, alternate bool) []*compileJob {
	t.Helper()
	var jobs []*compileJob
	for u := 0; u*n < len(ks); u++ {
		var srcs []string
		for _, k := range ks[u*n : min(len(ks), (u+1)*n)] {
			srcs = append(srcs, k.src)
		}
		name := fmt.Sprintf("%s%03d.hip", prefix, u)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(kernelUnit(t, srcs, u*n)), 0o644); err != nil {
			t.Fatal(err)
		}
		if alternate {
			// One target a unit, in turn: each target gets every other
			// unit, so both compile kernels of every kind between them.
			jobs = append(jobs, &compileJob{src: name, arch: hipArches[u%len(hipArches)], flags: flags, first: u * n})
			continue
		}
		for _, arch := range hipArches {
			jobs = append(jobs, &compileJob{src: name, arch: arch, flags: flags, first: u * n})
		}
	}
	return jobs
}

// TestPlanKernelsCompileHIP generates the kernels of every GPU plan
// (gpuPlans) and compiles them with the channel library and the HIP HAL
// header for gfx942 and gfx90a, to AMDGPU assembly at -O3. By default the
// set is representative: every plan once, for one of its cases in turn (so
// that every data type and operator of planCases meets some plan, and each
// case meets plans of every collective and size), and, for plans that
// reduce, FP8 E4M3 Sum too (the largest code); its units of six kernels go
// to the two targets in turn (each kernel is compiled once, and each target
// gets kernels of every kind), where -hip-full compiles every unit for both. -hip-front (WEFT_HIP_FULL=front)
// also checks every other plan × type × operator with the front end
// (templates instantiated, types checked against the target); -hip-full
// (WEFT_HIP_FULL=1) compiles all of them to assembly (hipFullSet). In the
// assembly, each kernel must be there and call no function (everything
// inlines; an external call would be a declaration that only ROCm's device
// libraries define).
func TestPlanKernelsCompileHIP(t *testing.T) {
	clang := hipClang(t)
	full, frontAll := hipFullSet()
	start := time.Now()
	dir := writeDeviceTree(t)
	plans := gpuPlans(t)
	// The representative set takes one communicator size of each plan
	// (named alike for 2, 4 and 8 ranks), in turn, so that every size and
	// every plan family appear; FP8 Sum goes with the 8-rank ones (the most
	// sources).
	sizes := map[string][]int{}
	for _, p := range plans {
		sizes[p.Name] = append(sizes[p.Name], p.NRanks)
	}
	chosen := map[string]int{}
	for _, p := range plans {
		if _, ok := chosen[p.Name]; !ok {
			ns := sizes[p.Name]
			chosen[p.Name] = ns[len(chosen)%len(ns)]
		}
	}
	var all []planKernel
	turn := map[bool]int{}
	covered := map[kernelCase]bool{}
	for _, p := range plans {
		rep := chosen[p.Name] == p.NRanks
		if !rep && !full && !frontAll {
			continue
		}
		cases := planCases(p)
		red := reduces(p)
		pick := -1
		if rep {
			// In turn, but a case this plan serves, and one no plan has
			// compiled yet where there is one.
			start := turn[red]
			turn[red]++
			for j := range cases {
				i := (start + j) % len(cases)
				if unserved(p, cases[i]) {
					continue
				}
				if pick < 0 || !covered[cases[i]] && covered[cases[pick]] {
					pick = i
				}
			}
			if pick >= 0 {
				covered[cases[pick]] = true
			}
		}
		for i, k := range cases {
			if unserved(p, k) {
				continue
			}
			src, err := plan.EmitCUDA(p, k.t, k.op)
			name := fmt.Sprintf("%s (rank %d of %d) %v %v", p.Name, p.Rank, p.NRanks, k.t, k.op)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			asm := full || i == pick || (rep && red && p.NRanks == 8 && k == kernelCase{plan.Float8E4M3, plan.Sum})
			if !asm && !full && !frontAll {
				continue // the representative set: every plan once, every case on some plan
			}
			all = append(all, planKernel{name: name, src: src, asm: asm})
		}
	}
	if !full {
		// A case that the rotation gave no plan (the rotation shifts as
		// plans are added) is compiled for the first representative plan
		// that serves it.
		for _, k := range append(slices.Clone(elementCases), reduceCases...) {
			covered := false
			for _, pk := range all {
				covered = covered || (pk.asm && strings.HasSuffix(pk.name, fmt.Sprintf(" %v %v", k.t, k.op)))
			}
			for _, p := range plans {
				if covered {
					break
				}
				if chosen[p.Name] != p.NRanks || unserved(p, k) || !slices.Contains(planCases(p), k) {
					continue
				}
				src, err := plan.EmitCUDA(p, k.t, k.op)
				if err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
				all = append(all, planKernel{name: fmt.Sprintf("%s (rank %d of %d) %v %v", p.Name, p.Rank, p.NRanks, k.t, k.op), src: src, asm: true})
				covered = true
			}
		}
		// Every data type and operator is still compiled for some plan.
		seen := map[kernelCase]bool{}
		for _, p := range plans {
			for _, k := range planCases(p) {
				if !unserved(p, k) {
					seen[k] = false
				}
			}
		}
		for _, k := range all {
			for c := range seen {
				if k.asm && strings.HasSuffix(k.name, fmt.Sprintf(" %v %v", c.t, c.op)) {
					seen[c] = true
				}
			}
		}
		for c, ok := range seen {
			if !ok {
				t.Errorf("the representative set compiles no plan for %v %v", c.t, c.op)
			}
		}
	}
	var toAsm, frontOnly []planKernel
	for _, k := range all {
		if k.asm {
			toAsm = append(toAsm, k)
		} else {
			frontOnly = append(frontOnly, k)
		}
	}
	// Several kernels per translation unit, so that the library is parsed
	// once per unit; units still outnumber the cores.
	syntax := append(slices.Clone(planFlags), "-fsyntax-only")
	frontJobs := planUnits(t, dir, "front", frontOnly, 32, syntax, false)
	asmJobs := planUnits(t, dir, "plans", toAsm, 6, planFlags, !full)
	compileAll(t, clang, dir, append(slices.Clone(asmJobs), frontJobs...))
	failed := 0
	for _, j := range frontJobs {
		if j.err != nil {
			if failed++; failed <= 3 {
				t.Errorf("%s for %s: %v", j.src, j.arch, j.err)
			}
		}
	}
	for _, j := range asmJobs {
		if j.err != nil {
			if failed++; failed <= 3 {
				t.Errorf("%s for %s: %v", j.src, j.arch, j.err)
			}
			continue
		}
		for i := j.first; i < min(len(toAsm), j.first+6); i++ {
			if !strings.Contains(j.asm, fmt.Sprintf("\n%s_%d:", plan.KernelName, i)) {
				t.Errorf("%s: kernel %s_%d (%s) is not in the %s assembly", j.src, plan.KernelName, i, toAsm[i].name, j.arch)
			}
		}
		if strings.Contains(j.asm, "s_swappc_b64") {
			t.Errorf("%s (%s): the kernels call a function; everything must inline", j.src, j.arch)
		}
	}
	t.Logf("%d plans: %d kernels (plan × type × operator) to assembly and %d more through the front end only, for %s, by %s, in %v",
		len(plans), len(toAsm), len(frontOnly), strings.Join(hipArches, " and "), hipVersion, time.Since(start).Round(time.Millisecond))
}

// ---- the header's primitives, one kernel each ---------------------------------

// primitiveKernels exercise every primitive of weft_hal.h.
const primitiveKernels = `#include "weft_hal.h"
using namespace weft::hal;
#define K(name) extern "C" __global__ void __launch_bounds__(256) name
K(p_ld16_st16)(weft_u32x4* p) { st16(p + threadIdx.x, ld16(p + 1024 + threadIdx.x)); }
K(p_ld_acquire_sys)(weft_u64* p) { p[1] = ld_acquire_sys(p); }
K(p_ld_relaxed_sys)(weft_u64* p) { p[1] = ld_relaxed_sys(p); }
K(p_ld_relaxed_sys32)(weft_u32* p) { p[1] = ld_relaxed_sys32(p); }
K(p_st_release_sys)(weft_u64* p, weft_u64 v) { st_release_sys(p, v); }
K(p_st_relaxed_sys)(weft_u64* p, weft_u64 v) { st_relaxed_sys(p, v); }
K(p_st_relaxed_sys32)(weft_u32* p, weft_u32 v) { st_relaxed_sys32(p, v); }
K(p_red_add_release_sys)(weft_u64* p, weft_u64 v) { red_add_release_sys(p + threadIdx.x, v); }
K(p_red_add_relaxed_sys)(weft_u64* p, weft_u64 v) { red_add_relaxed_sys(p + threadIdx.x, v); }
K(p_atomic_cas_sys32)(weft_u32* p, weft_u32 c, weft_u32 v) { p[1] = atomic_cas_sys32(p, c, v); }
K(p_atomic_add_gpu64)(weft_u64* p, weft_u64 v) { p[1 + threadIdx.x] = atomic_add_gpu64(p, v + threadIdx.x); }
K(p_fence_sys)(weft_u64* p) { p[0] = 1; fence_sys(); p[1] = 1; }
K(p_st_ll16)(char* p, weft_u32 a, weft_u32 b, weft_u32 f) { st_ll16(p + 16 * threadIdx.x, a, b, f); }
K(p_ld_ll16)(const char* p, weft_u32 f, weft_u64* out) {
  weft_u32 a, b;
  while (!ld_ll16(p + 16 * threadIdx.x, f, a, b)) backoff();
  out[threadIdx.x] = (weft_u64)b << 32 | a;
}
K(p_st_ll8)(char* p, weft_u32 a, weft_u32 f) { st_ll8(p + 8 * threadIdx.x, a, f); }
K(p_ld_ll8)(const char* p, weft_u32 f, weft_u32* out) {
  weft_u32 a;
  while (!ld_ll8(p + 8 * threadIdx.x, f, a)) {}
  out[threadIdx.x] = a;
}
K(p_globaltimer_ns)(weft_u64* p) { p[0] = globaltimer_ns(); }
K(p_backoff)() { backoff(); }
K(p_f16x2_add)(weft_u32* p) { p[threadIdx.x] = f16x2_add(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_f16x2_mul)(weft_u32* p) { p[threadIdx.x] = f16x2_add(f16x2_mul(p[threadIdx.x + 256], p[threadIdx.x + 512]), p[threadIdx.x + 768]); }
K(p_f16x2_min)(weft_u32* p) { p[threadIdx.x] = f16x2_min(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_f16x2_max)(weft_u32* p) { p[threadIdx.x] = f16x2_max(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_bf16x2_add)(weft_u32* p) { p[threadIdx.x] = bf16x2_add(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_bf16x2_mul)(weft_u32* p) { p[threadIdx.x] = bf16x2_mul(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_bf16x2_min)(weft_u32* p) { p[threadIdx.x] = bf16x2_min(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_bf16x2_max)(weft_u32* p) { p[threadIdx.x] = bf16x2_max(p[threadIdx.x + 256], p[threadIdx.x + 512]); }
K(p_e4m3x2_to_f16x2)(weft_u32* p) { p[threadIdx.x] = e4m3x2_to_f16x2((weft_u16)p[threadIdx.x + 256]); }
K(p_e5m2x2_to_f16x2)(weft_u32* p) { p[threadIdx.x] = e5m2x2_to_f16x2((weft_u16)p[threadIdx.x + 256]); }
K(p_f16x2_to_e4m3x2)(weft_u32* p) { p[threadIdx.x] = f16x2_to_e4m3x2(p[threadIdx.x + 256]); }
K(p_f16x2_to_e5m2x2)(weft_u32* p) { p[threadIdx.x] = f16x2_to_e5m2x2(p[threadIdx.x + 256]); }
K(p_f32_mul_rn)(float* p) { p[threadIdx.x] = f32_mul_rn(p[threadIdx.x + 256], p[threadIdx.x + 512]) + p[threadIdx.x + 768]; }
K(p_f64_mul_rn)(double* p) { p[threadIdx.x] = f64_mul_rn(p[threadIdx.x + 256], p[threadIdx.x + 512]) + p[threadIdx.x + 768]; }
K(p_fused_control)(float* p) { p[threadIdx.x] = p[threadIdx.x + 256] * p[threadIdx.x + 512] + p[threadIdx.x + 768]; }
K(p_block)(weft_u32* p) {
  __shared__ weft_u32 s[256];
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = p[i];
  __syncthreads();
  p[i] = s[255 - threadIdx.x] + __syncthreads_or(s[threadIdx.x] == 7) + (unsigned)__float_as_uint(fmaxf(__int_as_float(p[i]), 1.0f));
}
`

// primitiveChecks say what each kernel's assembly must (want) and must not
// (not) contain, per target ("" for both). The patterns are the instruction
// sequences of AMDGPUUsage's memory model tables: system scope is sc0 sc1
// on gfx942 (sc1 alone on atomics, where sc0 asks for the old value) and
// glc plus L2 maintenance on gfx90a.
var primitiveChecks = []struct {
	kernel, arch string
	want, not    []string
}{
	{"p_ld16_st16", "", []string{`global_load_dwordx4`, `global_store_dwordx4`}, nil},
	{"p_ld_acquire_sys", "gfx942", []string{`global_load_dwordx2 .* sc0 sc1`, `buffer_inv sc0 sc1`}, nil},
	{"p_ld_acquire_sys", "gfx90a", []string{`global_load_dwordx2 .* glc`, `buffer_invl2`}, nil},
	{"p_ld_relaxed_sys", "gfx942", []string{`global_load_dwordx2 .* sc0 sc1`}, []string{`buffer_inv`}},
	{"p_ld_relaxed_sys", "gfx90a", []string{`global_load_dwordx2 .* glc`}, []string{`buffer_inv`}},
	{"p_ld_relaxed_sys32", "gfx942", []string{`global_load_dword .* sc0 sc1`}, nil},
	{"p_ld_relaxed_sys32", "gfx90a", []string{`global_load_dword .* glc`}, nil},
	{"p_st_release_sys", "gfx942", []string{`buffer_wbl2 sc0 sc1\n(.*\n)*.*global_store_dwordx2 .* sc0 sc1`}, nil},
	{"p_st_release_sys", "gfx90a", []string{`buffer_wbl2\n(.*\n)*.*global_store_dwordx2 `}, nil},
	{"p_st_relaxed_sys", "gfx942", []string{`global_store_dwordx2 .* sc0 sc1`}, []string{`buffer_wbl2`}},
	{"p_st_relaxed_sys", "gfx90a", []string{`global_store_dwordx2 `}, []string{`buffer_wbl2`}},
	{"p_st_relaxed_sys32", "gfx942", []string{`global_store_dword .* sc0 sc1`}, nil},
	{"p_red_add_release_sys", "gfx942", []string{`buffer_wbl2 sc0 sc1`, `global_atomic_add_x2 .* sc1\n`}, []string{`global_atomic_add_x2 .*sc0`}},
	{"p_red_add_release_sys", "gfx90a", []string{`buffer_wbl2`, `global_atomic_add_x2 `}, []string{`global_atomic_add_x2 .*glc`}},
	{"p_red_add_relaxed_sys", "gfx942", []string{`global_atomic_add_x2 .* sc1\n`}, []string{`buffer_wbl2`, `global_atomic_add_x2 .*sc0`}},
	{"p_red_add_relaxed_sys", "gfx90a", []string{`global_atomic_add_x2 `}, []string{`buffer_wbl2`, `global_atomic_add_x2 .*glc`}},
	{"p_atomic_cas_sys32", "gfx942", []string{`buffer_wbl2 sc0 sc1`, `global_atomic_cmpswap .* sc0 sc1`, `buffer_inv sc0 sc1`}, nil},
	{"p_atomic_cas_sys32", "gfx90a", []string{`buffer_wbl2`, `global_atomic_cmpswap .* glc`, `buffer_invl2`}, nil},
	{"p_atomic_add_gpu64", "gfx942", []string{`global_atomic_add_x2 .* sc0\n`}, []string{`sc1`, `buffer_wbl2`}},
	{"p_atomic_add_gpu64", "gfx90a", []string{`global_atomic_add_x2 .* glc\n`}, []string{`buffer_wbl2`}},
	{"p_fence_sys", "gfx942", []string{`buffer_wbl2 sc0 sc1`, `buffer_inv sc0 sc1`}, nil},
	{"p_fence_sys", "gfx90a", []string{`buffer_wbl2`, `buffer_invl2`}, nil},
	// LL: one 16- or 8-byte access per packet, volatile (cache-bypassing
	// loads, and a wait for the store).
	{"p_st_ll16", "", []string{`global_store_dwordx4 `, `s_waitcnt vmcnt\(0\)`}, []string{`global_store_dword `, `global_store_dwordx2 `}},
	{"p_st_ll16", "gfx942", []string{`global_store_dwordx4 .* sc0 sc1`}, nil},
	{"p_ld_ll16", "gfx942", []string{`global_load_dwordx4 .* sc0 sc1`}, []string{`global_load_dword `, `global_load_dwordx2 `}},
	{"p_ld_ll16", "gfx90a", []string{`global_load_dwordx4 .* glc`}, []string{`global_load_dword `, `global_load_dwordx2 `}},
	{"p_st_ll8", "", []string{`global_store_dwordx2 `, `s_waitcnt vmcnt\(0\)`}, []string{`global_store_dword `}},
	{"p_st_ll8", "gfx942", []string{`global_store_dwordx2 .* sc0 sc1`}, nil},
	{"p_ld_ll8", "gfx942", []string{`global_load_dwordx2 .* sc0 sc1`}, []string{`global_load_dword `}},
	{"p_ld_ll8", "gfx90a", []string{`global_load_dwordx2 .* glc`}, []string{`global_load_dword `}},
	{"p_globaltimer_ns", "", []string{`s_memrealtime`}, nil},
	{"p_backoff", "", []string{`s_sleep 2`}, nil},
	{"p_f16x2_add", "", []string{`v_pk_add_f16`}, nil},
	{"p_f16x2_mul", "", []string{`v_pk_mul_f16`, `v_pk_add_f16`}, []string{`v_pk_fma_f16`}},
	{"p_f16x2_min", "", []string{`v_pk_min_f16`}, nil},
	{"p_f16x2_max", "", []string{`v_pk_max_f16`}, nil},
	{"p_bf16x2_add", "", []string{`v_(pk_)?add_f32`}, nil}, // two lanes may pair into packed f32
	{"p_bf16x2_mul", "", []string{`v_(pk_)?mul_f32`}, nil},
	{"p_bf16x2_min", "", []string{`v_min_f32`}, nil},
	{"p_bf16x2_max", "", []string{`v_max_f32`}, nil},
	{"p_e4m3x2_to_f16x2", "", []string{`v_pk_mul_f16`}, nil},
	{"p_e5m2x2_to_f16x2", "", nil, []string{`v_cvt_`}},
	{"p_f16x2_to_e4m3x2", "", []string{`v_cvt_f32_f16`, `v_add_f32`}, nil},
	{"p_f16x2_to_e5m2x2", "", nil, []string{`v_cvt_`}},
	// The multiply stays a multiply; the control shows that the compiler
	// would otherwise fuse it with the add.
	{"p_f32_mul_rn", "", []string{`v_mul_f32`, `v_add_f32`}, []string{`v_fma`, `v_fmac`, `v_mad`, `v_pk_fma`}},
	{"p_f64_mul_rn", "", []string{`v_mul_f64`, `v_add_f64`}, []string{`v_fma`}},
	{"p_fused_control", "", []string{`v_fmac_f32|v_fma_f32|v_pk_fma_f32`}, nil},
	{"p_block", "", []string{`s_barrier`, `ds_write_b32`, `ds_read_b32`, `v_max_f32`}, nil},
}

// kernelAsm returns the instructions of kernel name in an assembly file.
func kernelAsm(asm, name string) (string, bool) {
	_, body, ok := strings.Cut(asm, "\n"+name+":")
	if !ok {
		return "", false
	}
	body, _, ok = strings.Cut(body, "s_endpgm")
	return body, ok
}

// TestHALPrimitivesHIP compiles one kernel per primitive of weft_hal.h for
// gfx942 and gfx90a with -Wall -Werror, and checks the instructions each
// primitive becomes: the memory-model sequences of its scope and order,
// single-instruction LL accesses, the constant clock, packed half math,
// multiplies that are not fused.
func TestHALPrimitivesHIP(t *testing.T) {
	clang := hipClang(t)
	dir := writeDeviceTree(t)
	if err := os.WriteFile(filepath.Join(dir, "primitives.hip"), []byte(primitiveKernels), 0o644); err != nil {
		t.Fatal(err)
	}
	var jobs []*compileJob
	for _, arch := range hipArches {
		jobs = append(jobs, &compileJob{src: "primitives.hip", arch: arch})
	}
	compileAll(t, clang, dir, jobs)
	checked := map[string]bool{}
	for _, j := range jobs {
		if j.err != nil {
			t.Fatal(j.err)
		}
		for _, c := range primitiveChecks {
			if c.arch != "" && c.arch != j.arch {
				continue
			}
			body, ok := kernelAsm(j.asm, c.kernel)
			if !ok {
				t.Errorf("%s: kernel %s is not in the assembly", j.arch, c.kernel)
				continue
			}
			checked[c.kernel] = true
			for _, w := range c.want {
				if !regexp.MustCompile(w).MatchString(body) {
					t.Errorf("%s %s: no %q in\n%s", j.arch, c.kernel, w, body)
				}
			}
			for _, n := range c.not {
				if regexp.MustCompile(n).MatchString(body) {
					t.Errorf("%s %s: unexpected %q in\n%s", j.arch, c.kernel, n, body)
				}
			}
		}
	}
	for _, m := range regexp.MustCompile(`K\((p_\w+)\)`).FindAllStringSubmatch(primitiveKernels, -1) {
		if !checked[m[1]] {
			t.Errorf("kernel %s has no check", m[1])
		}
	}
}

// rtcDeclarations stand in for what hipRTC declares before a program
// (ROCm's HIP headers, which this machine need not have), declared the
// way those headers do rather than the way weft_hal.h does.
const rtcDeclarations = `#define __HIPCC_RTC__ 1
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((amdgpu_flat_work_group_size(1, 1024)))
struct hip_coordinates { unsigned x, y, z; };
extern const __device__ hip_coordinates threadIdx, blockIdx, blockDim;
__device__ void __syncthreads();
__device__ int __syncthreads_or(int);
__device__ float __int_as_float(int);
__device__ unsigned __float_as_uint(float);
__device__ double __longlong_as_double(long long);
__device__ long long __double_as_longlong(double);
__device__ float fmaxf(float, float);
__device__ float fminf(float, float);
__device__ double fmax(double, double);
__device__ double fmin(double, double);
`

// TestHALHeaderRTCMode checks that under __HIPCC_RTC__ weft_hal.h declares
// none of the runtime names itself (they would clash with hipRTC's) and
// needs nothing else: the primitives and one plan kernel of each kind go
// through the front end after rtcDeclarations.
func TestHALHeaderRTCMode(t *testing.T) {
	clang := hipClang(t)
	dir := writeDeviceTree(t)
	cfg := algorithms.DefaultConfig(0, 4, 304, true)
	ll, err := algorithms.AllReduce1PA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := algorithms.AllReduceHB(cfg)
	if err != nil {
		t.Fatal(err)
	}
	port, err := algorithms.AllReducePort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var srcs []string
	for _, p := range []*plan.Plan{ll, hb, port} {
		src, err := plan.EmitCUDA(p, plan.Float8E4M3, plan.PreMulSum)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	for name, src := range map[string]string{
		"rtc.h": rtcDeclarations, "primitives.hip": primitiveKernels, "plans.hip": kernelUnit(t, srcs, 0),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flags := append(slices.Clone(planFlags), "-include", "rtc.h", "-fsyntax-only")
	var jobs []*compileJob
	for _, arch := range hipArches {
		jobs = append(jobs, &compileJob{src: "primitives.hip", arch: arch, flags: flags}, &compileJob{src: "plans.hip", arch: arch, flags: flags})
	}
	compileAll(t, clang, dir, jobs)
	for _, j := range jobs {
		if j.err != nil {
			t.Error(j.err)
		}
	}
}

// ---- the conversions, run on the host ------------------------------------------

// conversionHarness runs the header's bfloat16 and FP8 section (plain C++:
// integer code, float and binary16 arithmetic) on the host over the inputs
// it reads from stdin, and writes the results to stdout.
const conversionHarness = `#include <stdio.h>
#include <stdlib.h>
typedef unsigned char weft_u8;
typedef unsigned short weft_u16;
typedef unsigned int weft_u32;
#define WEFT_DEV static inline
namespace weft { namespace hal {
typedef _Float16 v2f16 __attribute__((ext_vector_type(2)));
#include "conversions.h"
} }
using namespace weft::hal;
static weft_u32 in[1 << 20], a[1 << 20], b[1 << 20];
int main() {
  size_t n = fread(in, 4, 1 << 20, stdin);
  if (n != 3 * 65536 + 4 * 65536) return 2;
  const weft_u32* e = in;                 // 65536 pairs of FP8 codes
  const weft_u32* h = in + 65536;         // 65536 binary16 pairs
  const weft_u32* f = in + 2 * 65536;     // 65536 float bits
  const weft_u32* p = in + 3 * 65536;     // 2 x 65536 bfloat16 pairs
  for (int i = 0; i < 65536; i++) {
    a[i] = e4m3x2_to_f16x2((weft_u16)e[i]);
    b[i] = e5m2x2_to_f16x2((weft_u16)e[i]);
    a[65536 + i] = f16x2_to_e4m3x2(h[i]) | (weft_u32)f16x2_to_e5m2x2(h[i]) << 16;
    a[2 * 65536 + i] = f32_to_bf16(__builtin_bit_cast(float, f[i]));
  }
  for (int i = 0; i < 2 * 65536; i++) {
    const weft_u32 x = p[2 * i], y = p[2 * i + 1];
    b[65536 + 4 * i] = bf16x2_add(x, y);
    b[65536 + 4 * i + 1] = bf16x2_mul(x, y);
    b[65536 + 4 * i + 2] = bf16x2_min(x, y);
    b[65536 + 4 * i + 3] = bf16x2_max(x, y);
  }
  fwrite(a, 4, 3 * 65536, stdout);
  fwrite(b, 4, 65536 + 8 * 65536, stdout);
  return 0;
}
`

// conversionSection extracts the header's "bfloat16 arithmetic and FP8
// conversions" section: the code between its heading and the next one.
func conversionSection(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "internal", "hipdev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	const heading = "// ---- bfloat16 arithmetic and FP8 conversions"
	_, rest, ok := strings.Cut(string(src), heading)
	if !ok {
		t.Fatalf("weft_hal.h has no section %q", heading)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the rest of the heading line
	section, _, ok := strings.Cut(rest, "\n// ---- ")
	if !ok {
		t.Fatal("the conversion section of weft_hal.h does not end with a heading")
	}
	return section
}

// TestConversionsMatchHalf compiles the header's bfloat16 and FP8 code for
// the host and compares it, bit for bit, with internal/half (the reference
// hal/host uses): every FP8 code pair to binary16, every binary16 value to
// E4M3 and E5M2 in both lanes, float to bfloat16 around every rounding
// boundary, and bfloat16 sum, product, min and max over every bfloat16
// value against others. NaN results need only be NaN (the payload is not
// specified), and min/max of zeros of either sign only equal.
func TestConversionsMatchHalf(t *testing.T) {
	clang := hipClang(t)
	dir := t.TempDir()
	for name, src := range map[string]string{"conversions.h": conversionSection(t), "harness.cc": conversionHarness} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(clang, "-x", "c++", "-std=c++17", "-O2", "-Wall", "-Werror", "-o", "harness", "harness.cc")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}

	// Inputs: FP8 code pairs and binary16 pairs with every value in each
	// lane (the high lane a permutation of the low one), floats at every
	// bfloat16 rounding boundary, bfloat16 pairs with every value against
	// two others.
	perm := func(i, mul, add uint32) uint32 { return (i*mul + add) & 0xffff }
	fbits := []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000}
	var in []uint32
	for i := range uint32(65536) {
		in = append(in, i)
	}
	for i := range uint32(65536) {
		in = append(in, i|perm(i, 0x9e37, 0x1234)<<16)
	}
	for i := range uint32(65536) {
		in = append(in, perm(i, 1, 0)<<16|fbits[i%8]) // each high half with one low pattern ...
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range 2 {
		for i := range uint32(65536) {
			x := i | perm(i, 0x6f4b, uint32(k))<<16
			y := rng.Uint32()
			if i%4 == 0 { // ... and operands that are special values
				y = []uint32{0, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x7f7f, 0x3f80}[i/4%8] * 0x10001
			}
			in = append(in, x, y)
		}
	}
	var stdin bytes.Buffer
	if err := binary.Write(&stdin, binary.LittleEndian, in); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(filepath.Join(dir, "harness"))
	run.Stdin = &stdin
	raw, err := run.Output()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	out := make([]uint32, len(raw)/4)
	if _, err := binary.Decode(raw, binary.LittleEndian, out); err != nil || len(out) != 3*65536+65536+8*65536 {
		t.Fatalf("harness wrote %d bytes: %v", len(raw), err)
	}
	a, b := out[:3*65536], out[3*65536:]

	isNaN16 := func(h uint32) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i := range uint32(65536) {
		for lane := range uint32(2) {
			c := uint8(i >> (8 * lane))
			got4, got5 := a[i]>>(16*lane)&0xffff, b[i]>>(16*lane)&0xffff
			want4 := uint32(half.FromFloat32(half.E4M3ToFloat32(c)))
			want5 := uint32(half.FromFloat32(half.E5M2ToFloat32(c)))
			if got4 != want4 && !(isNaN16(want4) && isNaN16(got4)) {
				report("e4m3x2_to_f16x2(%#04x) lane %d = %#04x, want %#04x", i, lane, got4, want4)
			}
			if got5 != want5 && !(isNaN16(want5) && isNaN16(got5)) {
				report("e5m2x2_to_f16x2(%#04x) lane %d = %#04x, want %#04x", i, lane, got5, want5)
			}
		}
		hv := in[65536+i]
		for lane := range uint32(2) {
			x := half.ToFloat32(uint16(hv >> (16 * lane)))
			got4, got5 := uint8(a[65536+i]>>(8*lane)), uint8(a[65536+i]>>(16+8*lane))
			if want := half.E4M3FromFloat32(x); got4 != want {
				report("f16x2_to_e4m3x2(%#08x) lane %d (%g) = %#02x, want %#02x", hv, lane, x, got4, want)
			}
			if want := half.E5M2FromFloat32(x); got5 != want {
				report("f16x2_to_e5m2x2(%#08x) lane %d (%g) = %#02x, want %#02x", hv, lane, x, got5, want)
			}
		}
		fv := in[2*65536+i]
		if got, want := a[2*65536+i], uint32(half.BF16FromFloat32(math.Float32frombits(fv))); got != want {
			report("f32_to_bf16(%#08x) = %#04x, want %#04x", fv, got, want)
		}
	}
	ops := []struct {
		name   string
		f      func(x, y float32) float32
		minmax bool
	}{
		{"add", func(x, y float32) float32 { return x + y }, false},
		{"mul", func(x, y float32) float32 { return x * y }, false},
		{"min", func(x, y float32) float32 { // hal/host's Min: the other operand when one is NaN
			if x < y || y != y {
				return x
			}
			return y
		}, true},
		{"max", func(x, y float32) float32 {
			if x > y || y != y {
				return x
			}
			return y
		}, true},
	}
	for i := range 2 * 65536 {
		x, y := in[3*65536+2*i], in[3*65536+2*i+1]
		for k, op := range ops {
			got := b[65536+4*i+k]
			for lane := range uint32(2) {
				g := uint16(got >> (16 * lane))
				w := half.BF16FromFloat32(op.f(half.BF16ToFloat32(uint16(x>>(16*lane))), half.BF16ToFloat32(uint16(y>>(16*lane)))))
				gf, wf := half.BF16ToFloat32(g), half.BF16ToFloat32(w)
				switch {
				case g == w, wf != wf && gf != gf, op.minmax && gf == wf:
					continue
				}
				report("bf16x2_%s(%#08x, %#08x) lane %d = %#04x, want %#04x", op.name, x, y, lane, g, w)
			}
		}
	}
	if bad > 20 {
		t.Errorf("... %d mismatches in all", bad)
	}
}
