package nvswitch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
)

// Tests on GPU hosts. On shared hosts (WEFT_NVLS unset, architecture.md §8)
// they only compile device code: NVRTC and ptxas check weft_switch_hal.h
// and the kernels of switch plans for GPU 0's architecture, without opening
// this backend and without creating any multicast object. Tests that run
// multicast on hardware (hw_test.go) need WEFT_NVLS=1 on a dedicated host.

// CompileRequirement is the WEFT_REQUIRE name under which the compile-only
// tests must not skip.
const CompileRequirement = "nvswitch-compile"

// requireOrSkip skips, or fails when WEFT_REQUIRE names nvswitch-compile
// (or nvswitch): a run on a GPU host must not pass by skipping.
func requireOrSkip(t testing.TB, reason string) {
	t.Helper()
	for _, r := range []string{CompileRequirement, Name} {
		if env.Required(r) {
			t.Fatalf("WEFT_REQUIRE=%s but: %s", r, reason)
		}
	}
	t.Skip(reason)
}

// compileTarget loads the driver and NVRTC and returns GPU 0's NVRTC
// target. It creates no context.
func compileTarget(t *testing.T) string {
	t.Helper()
	if err := cuda.Load(); err != nil {
		requireOrSkip(t, "no CUDA driver: "+err.Error())
	}
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		requireOrSkip(t, fmt.Sprintf("no CUDA devices (%v)", err))
	}
	d, err := cuda.DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	major, minor, err := d.ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	if major < 9 {
		requireOrSkip(t, fmt.Sprintf("GPU 0 is sm_%d%d: multimem instructions need sm_90 or newer", major, minor))
	}
	if err := cuda.LoadNVRTC(); err != nil {
		requireOrSkip(t, "NVRTC not found: "+err.Error())
	}
	return cuda.Arch(major, minor)
}

// switchHeaders are the headers a switch kernel compiles with: the channel
// library, the CUDA HAL header and weft_switch_hal.h (the headers Prepare
// passes).
func switchHeaders() map[string]string {
	h := channels.DeviceLibrary()
	h[DeviceHeaderName] = cudadev.Fake(fakeDevice().Endpoint()).DeviceHeader()
	h[SwitchHeaderName] = switchHeader
	return h
}

// TestSwitchCompileNVRTC compiles, with NVRTC for GPU 0's architecture
// (sm_90a on H100 and H200):
//
//	(a) a kernel calling every primitive of weft_switch_hal.h for every
//	    data type and operator the switch reduces, and checks that every
//	    combination it does not reduce fails to compile with the header's
//	    static_assert;
//	(b) the generated kernel of every switch plan of package algorithms
//	    (plans whose name contains "nvls"), for a set of data types and
//	    operators, with the channel library and both HAL headers.
//
// Nothing is launched. Run with -test.v: it prints what it compiled.
func TestSwitchCompileNVRTC(t *testing.T) {
	arch := compileTarget(t)
	ma, mi, _ := cuda.NVRTCVersion()
	t.Logf("target %s, NVRTC %d.%d (%s)", arch, ma, mi, cuda.NVRTCPath())
	headers := switchHeaders()

	t.Run("primitives", func(t *testing.T) {
		src := primitivesKernel()
		bin, err := cuda.Compile(cuda.Source{Name: "weft_switch_primitives.cu", Source: src, Headers: headers, Arch: arch})
		if err != nil {
			t.Fatalf("weft_switch_hal.h primitives: %v", err)
		}
		var combos []string
		for _, c := range switchCombos {
			f := c.dt + "/" + c.op + " ld_reduce16(." + c.ld16 + ")"
			if c.ld4 != "" {
				f += " ld_reduce4(." + c.ld4 + ")"
			}
			combos = append(combos, f)
		}
		t.Logf("compiled weft_switch_primitives for %s: %d bytes of cubin; multimem_st16, multimem_st4, fence_proxy_alias and, per data type/operator:\n  %s",
			arch, len(bin), strings.Join(combos, "\n  "))
	})

	t.Run("refuses", func(t *testing.T) {
		src, n := unsupportedKernel()
		_, err := cuda.Compile(cuda.Source{Name: "weft_switch_unsupported.cu", Source: src, Headers: headers, Arch: arch})
		var ne *cuda.NVRTCError
		if !errors.As(err, &ne) || ne.Code != cuda.NVRTCErrorCompilation {
			t.Fatalf("unsupported combinations: %v, want a compilation error", err)
		}
		got := strings.Count(ne.Log, "does not reduce this data type") + strings.Count(ne.Log, "has no 4-byte multimem load-reduce")
		if got < n {
			t.Errorf("%d static_assert errors for %d unsupported instantiations:\n%s", got, n, ne.Log)
		}
		t.Logf("NVRTC refused all %d unsupported data type/operator instantiations with the header's static_assert", n)
	})

	t.Run("plans", func(t *testing.T) {
		plans := switchPlans(t, 4)
		if len(plans) == 0 {
			t.Log("no switch plans (name containing \"nvls\") in package algorithms for 4 ranks: only the primitives were compiled")
			return
		}
		for _, p := range plans {
			for _, k := range planKernels {
				src, err := plan.EmitCUDA(p, k.t, k.op)
				if errors.Is(err, plan.ErrInvalidPlan) && !switchReduces(k.t, k.op) {
					t.Logf("plan %s %v %v: refused by EmitCUDA (the switch does not reduce it)", p.Name, k.t, k.op)
					continue
				}
				if err != nil {
					t.Fatalf("plan %s %v %v: EmitCUDA: %v", p.Name, k.t, k.op, err)
				}
				name := fmt.Sprintf("%s-%v-%v.cu", p.Name, k.t, k.op)
				bin, err := cuda.Compile(cuda.Source{Name: name, Source: src, Headers: headers, Arch: arch})
				if err != nil {
					t.Fatalf("plan %s %v %v: %v", p.Name, k.t, k.op, err)
				}
				t.Logf("compiled plan %s (rank 0 of %d, %d blocks) for %v %v on %s: %d bytes of cubin", p.Name, p.NRanks, p.Blocks(), k.t, k.op, arch, len(bin))
			}
		}
	})
}

// planKernels are the data types and operators the switch plans are
// compiled for: every reducing type once, every operator once, an integer
// Avg, and a type the switch does not reduce (which EmitCUDA refuses for
// plans that load-reduce and accepts for plans that only store).
var planKernels = []struct {
	t  plan.DataType
	op plan.RedOp
}{
	{plan.Float32, plan.Sum}, {plan.BFloat16, plan.Sum}, {plan.Float16, plan.Max}, {plan.Int32, plan.Min},
	{plan.Uint64, plan.Sum}, {plan.Int64, plan.Avg}, {plan.Float64, plan.Sum}, {plan.Int8, plan.Sum},
}

// switchReduces reports whether the switch reduces t with op: the table of
// weft_switch_hal.h (switchCombos), with the Avg of an integer type summed
// by the switch and divided on the device.
func switchReduces(t plan.DataType, op plan.RedOp) bool {
	integer := t == plan.Int32 || t == plan.Uint32 || t == plan.Int64 || t == plan.Uint64
	if op == plan.Avg && integer {
		op = plan.Sum
	}
	for _, d := range dtCodes {
		for _, o := range opCodes {
			if d.t == t && o.op == op {
				return supportedCombo(d.name, o.name)
			}
		}
	}
	return false
}

// switchPlans returns rank 0's plans of every collective whose name
// contains "nvls", over every plan family of package algorithms and the
// NVLS family, with links declared switch-mapped (Config.Switch). The
// field is set by name, so that this test builds against package
// algorithms whether or not it has the field yet; without it, or without
// NVLS plans, the list is empty.
func switchPlans(t *testing.T, nranks int) []*plan.Plan {
	t.Helper()
	seen := map[string]bool{}
	var out []*plan.Plan
	add := func(cs []algorithms.Choice, err error) {
		if err != nil {
			return
		}
		for _, c := range cs {
			p := c.Plan
			if p == nil || !strings.Contains(strings.ToLower(p.Name), "nvls") || seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	for _, fam := range append([]string{"", "nvls"}, algorithms.Families...) {
		cfg := algorithms.DefaultConfig(0, nranks, 132, true)
		cfg.Algo = fam
		cfg.Switch = true
		add(algorithms.AllReducePlans(cfg))
		for _, coll := range algorithms.Collectives {
			add(algorithms.Plans(cfg, coll, 0))
		}
	}
	return out
}
