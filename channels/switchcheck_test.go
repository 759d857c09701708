package channels_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
)

// switchHALStub declares the switch HAL primitives weft_switch.h uses, for
// the host check while no backend's weft_switch_hal.h is in the tree: a
// declaration is all a syntax check needs.
const switchHALStub = `#pragma once
#include "weft_reduce.h"
namespace weft {
namespace hal {
template <int DT, int OP> __device__ weft_u32x4 multimem_ld_reduce16(const void* mc);
__device__ void multimem_st16(void* mc, weft_u32x4 v);
__device__ void fence_proxy_alias();
}  // namespace hal
}  // namespace weft
`

// switchHAL returns the backend's switch HAL header when the tree has one,
// else the stub, and says which.
func switchHAL(t *testing.T) (string, string) {
	t.Helper()
	for _, p := range []string{
		filepath.Join("..", "hal", "nvswitch", "device", "weft_switch_hal.h"),
		filepath.Join("..", "internal", "cudadev", "device", "weft_switch_hal.h"),
	} {
		if b, err := os.ReadFile(p); err == nil {
			return string(b), p
		}
	}
	return switchHALStub, "a stub of declarations"
}

// TestSwitchKernelsCompile generates the CUDA source of plans with a switch
// buffer — the NVLS AllReduce and AllGather for every type and operator
// the switch serves (and a few the store-only AllGather moves), at several
// rank counts, and a plan without windows — and compiles it against the
// channel library, the NVIDIA HAL header and the switch HAL header, as
// TestGeneratedKernelsCompile does.
func TestSwitchKernelsCompile(t *testing.T) {
	hal, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	sw, swFrom := switchHAL(t)
	cc := kernelChecker(t)
	if !strings.Contains(channels.DeviceLibrary()["weft_switch.h"], "xfer_switch") {
		t.Fatal("weft_switch.h is not in the device library")
	}
	dir := t.TempDir()
	files := map[string]string{"prelude.h": devicePrelude + kernelPrelude, "weft_hal.h": string(hal), "weft_switch_hal.h": sw}
	for name, src := range channels.DeviceLibrary() {
		files[name] = src
	}
	type kind struct {
		t  plan.DataType
		op plan.RedOp
	}
	var plans []*plan.Plan
	var kinds [][]kind
	for _, rn := range [][2]int{{0, 2}, {1, 3}, {7, 8}} {
		c := algorithms.DefaultConfig(rn[0], rn[1], 132, true)
		ar, err := algorithms.AllReduceNVLS(c)
		if err != nil {
			t.Fatal(err)
		}
		var ks []kind
		for _, dt := range plan.DataTypes {
			for _, op := range plan.RedOps {
				if plan.SwitchSupports(dt, op) {
					ks = append(ks, kind{dt, op})
				}
			}
		}
		ag, err := algorithms.AllGatherNVLS(c)
		if err != nil {
			t.Fatal(err)
		}
		plans, kinds = append(plans, ar, ag), append(kinds, ks, []kind{{plan.Int8, plan.Sum}, {plan.Float8E5M2, plan.Sum}, {plan.Float64, plan.Sum}})
	}
	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output), plan.MC(1)}, plan.MC(0))
	red.Combine = true
	plans = append(plans, &plan.Plan{Name: "switch-unwindowed", NRanks: 2, Threads: 256, SwitchSlots: 2, MaxBytes: 1 << 20,
		Groups: []plan.Group{{Blocks: 2, Ops: []plan.Op{
			plan.Transfer(plan.All, 0, []plan.Ref{plan.MC(0), plan.SW(1)}, plan.L(plan.Input), plan.L(plan.Output)), red}}}})
	kinds = append(kinds, []kind{{plan.Float32, plan.Sum}, {plan.Uint32, plan.Avg}, {plan.Float16, plan.Max}})
	var srcs []string
	for i, p := range plans {
		for _, k := range kinds[i] {
			src, err := plan.EmitCUDA(p, k.t, k.op)
			if err != nil {
				t.Fatalf("%s %v %v: %v", p.Name, k.t, k.op, err)
			}
			name := fmt.Sprintf("s%d.cu", len(srcs))
			files[name] = "#include \"prelude.h\"\n" + src
			srcs = append(srcs, name)
		}
	}
	compileKernels(t, cc, dir, files, srcs)
	t.Logf("%d switch kernels checked with %s against %s", len(srcs), cc.Path, swFrom)
}
