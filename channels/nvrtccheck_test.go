package channels_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// TestGeneratedKernelsNVRTC compiles the generated kernels of every
// collective's plans on 2 and 3 ranks (every tier of the selection, the
// port-channel plans, point-to-point), the plans with bounded peers of 16
// ranks, the hierarchical ones of 2 nodes, every plan of 2 nodes of one rank
// with host windows (the LL port plans among them) and a kernel calling every function
// of the device API (weft_gin.h) with NVIDIA's own compiler, NVRTC,
// for sm_90, against the channel library and the NVIDIA HAL header: the
// front end the GPU hosts use, which TestGeneratedKernelsCompile's host
// compilers only approximate. NVRTC needs no GPU and no driver, only
// libnvrtc (WEFT_NVRTC_LIB names it; .ci/run installs Debian's). Without
// it the test skips, unless WEFT_REQUIRE names nvrtc. Nothing is launched.
func TestGeneratedKernelsNVRTC(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles kernels with NVRTC: not in -short")
	}
	if err := cuda.LoadNVRTC(); err != nil {
		if env.Required("nvrtc") {
			t.Fatalf("WEFT_REQUIRE=nvrtc but NVRTC does not load: %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
	hal, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"weft_hal.h": string(hal)}
	for name, src := range channels.DeviceLibrary() {
		headers[name] = src
	}
	type kernelCase struct {
		t  plan.DataType
		op plan.RedOp
	}
	start, n := time.Now(), 0
	for _, nranks := range []int{2, 3} {
		cfg := algorithms.DefaultConfig(0, nranks, 132, true)
		for _, coll := range algorithms.Collectives {
			choices, err := algorithms.Plans(cfg, coll, 0)
			if err != nil {
				t.Fatalf("%v on %d ranks: %v", coll, nranks, err)
			}
			if pp, err := algorithms.PortPlan(cfg, coll); err != nil {
				t.Fatalf("%v over port channels: %v", coll, err)
			} else if pp != nil {
				choices = append(choices, algorithms.Choice{Plan: pp})
			}
			for _, ch := range choices {
				cases := []kernelCase{{plan.Float32, plan.Sum}}
				if coll == algorithms.SendRecv {
					cases[0].t = plan.Uint8 // point-to-point kernels run on raw bytes
				}
				if nranks == 2 {
					// bfloat16, and a reduction that scales each rank's
					// input where the plan serves it.
					k := kernelCase{plan.BFloat16, plan.Sum}
					if coll.Reduces() && ch.Plan.ServesPreMulSum() == nil {
						k.op = plan.PreMulSum
					}
					cases = append(cases, k)
				}
				for _, k := range cases {
					src, err := plan.EmitCUDA(ch.Plan, k.t, k.op)
					if err != nil {
						t.Fatalf("%s: %v", ch.Plan.Name, err)
					}
					name := fmt.Sprintf("%s-%v-%v.cu", ch.Plan.Name, k.t, k.op)
					if _, err := cuda.Compile(cuda.Source{Name: name, Source: src, Headers: headers, Arch: "sm_90"}); err != nil {
						t.Errorf("%s (rank 0 of %d): %v", name, nranks, err)
					}
					n++
				}
			}
		}
	}
	// The plans with bounded peers (rings, chains, trees, Bruck) of 16
	// ranks, rank 1, and the hierarchical plans of 2 nodes of 2 ranks.
	var more []*plan.Plan
	bc := algorithms.DefaultConfig(1, 16, 132, true)
	hc := algorithms.DefaultConfig(0, 4, 132, true)
	hc.PortOnly, hc.Nodes = true, []int{0, 0, 1, 1}
	for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter, algorithms.Broadcast, algorithms.Reduce} {
		choices, err := algorithms.BoundedPlans(bc, coll, 0)
		if err != nil {
			t.Fatalf("%v with bounded peers: %v", coll, err)
		}
		if coll == algorithms.AllReduce || coll == algorithms.AllGather || coll == algorithms.ReduceScatter {
			hier, err := algorithms.Plans(hc, coll, 0)
			if err != nil {
				t.Fatalf("%v on 2 nodes: %v", coll, err)
			}
			choices = append(choices, hier[0])
		}
		for _, ch := range choices {
			more = append(more, ch.Plan)
		}
	}
	// Every plan of 2 nodes of 1 rank over a network with host windows:
	// staged sends, the one-hop AllReduce and the LL port plans.
	nc := algorithms.DefaultConfig(1, 2, 132, true)
	nc.PortOnly, nc.Nodes, nc.HostWindows = true, []int{0, 1}, true
	for _, coll := range algorithms.Collectives {
		choices, err := algorithms.Plans(nc, coll, 0)
		if err != nil {
			t.Fatalf("%v on 2 nodes of 1: %v", coll, err)
		}
		for _, ch := range choices {
			more = append(more, ch.Plan)
			if coll.Reduces() && ch.Plan.ServesPreMulSum() == nil {
				src, err := plan.EmitCUDA(ch.Plan, plan.BFloat16, plan.PreMulSum)
				if err != nil {
					t.Fatalf("%s: %v", ch.Plan.Name, err)
				}
				if _, err := cuda.Compile(cuda.Source{Name: ch.Plan.Name + "-premul.cu", Source: src, Headers: headers, Arch: "sm_90"}); err != nil {
					t.Errorf("%s (PreMulSum): %v", ch.Plan.Name, err)
				}
				n++
			}
		}
	}
	for _, p := range more {
		src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if _, err := cuda.Compile(cuda.Source{Name: p.Name + ".cu", Source: src, Headers: headers, Arch: "sm_90"}); err != nil {
			t.Errorf("%s (rank %d of %d): %v", p.Name, p.Rank, p.NRanks, err)
		}
		n++
	}
	// The device API (weft_gin.h): a kernel calling every function.
	gin := strings.Replace(fmt.Sprintf("#define GIN_PARAMS_BYTES %d\n", channels.GinParamsBytes)+ginKernel, "#include \"prelude.h\"\n", "", 1)
	if _, err := cuda.Compile(cuda.Source{Name: "gin.cu", Source: gin, Headers: headers, Arch: "sm_90"}); err != nil {
		t.Errorf("the device API (weft_gin.h): %v", err)
	}
	n++
	major, minor, _ := cuda.NVRTCVersion()
	t.Logf("NVRTC %d.%d (%s): %d kernels compiled for sm_90 in %v", major, minor, cuda.NVRTCPath(), n, time.Since(start).Round(time.Millisecond))
}
