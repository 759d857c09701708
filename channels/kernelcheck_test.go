package channels_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
)

// kernelPrelude declares, for a host C++ compiler, what NVRTC provides to
// generated kernels besides the HAL header.
const kernelPrelude = `
struct weft_dim3 { unsigned x, y, z; };
extern weft_dim3 threadIdx, blockIdx, blockDim, gridDim;
__device__ void __syncthreads();
__device__ int __syncthreads_or(int);
#define __launch_bounds__(n)
#define __grid_constant__
`

// kernelChecker is the host compiler that checks kernels for syntax:
// clang++ in CUDA mode where it is installed, else g++ in C++ mode (with
// the preludes standing in for what NVRTC provides); the test is skipped
// without either.
func kernelChecker(t *testing.T) *exec.Cmd {
	t.Helper()
	switch {
	case lookPath("clang++") != "":
		return exec.Command(lookPath("clang++"), "-x", "cuda", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib", "-std=c++17", "-fsyntax-only", "-Wno-unknown-pragmas")
	case lookPath("g++") != "":
		return exec.Command(lookPath("g++"), "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wno-unknown-pragmas")
	}
	t.Skip("no clang++ or g++ to check kernels with")
	return nil
}

// TestGeneratedKernelsCompile generates the CUDA source of every
// collective's plans (LL, HB, port-channel, point-to-point, both rooted forms) for
// several types and operators and compiles it against the channel library
// and the NVIDIA HAL header, with the same compilers as
// TestReduceHeaderCompiles. It catches code generation that NVRTC would
// refuse before a GPU run does.
func TestGeneratedKernelsCompile(t *testing.T) {
	hal, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	cc := kernelChecker(t)
	dir := t.TempDir()
	files := map[string]string{"prelude.h": devicePrelude + kernelPrelude, "weft_hal.h": string(hal)}
	for name, src := range channels.DeviceLibrary() {
		files[name] = src
	}
	cfg := algorithms.DefaultConfig(0, 3, 132, true)
	var srcs []string
	// The hierarchical plans (2 nodes of 2 ranks, ranks 0 and 3): memory
	// channels inside the node, port channels across it.
	for _, r := range []int{0, 3} {
		hc := algorithms.DefaultConfig(r, 4, 132, true)
		hc.PortOnly, hc.Nodes = true, []int{0, 0, 1, 1}
		for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter} {
			choices, err := algorithms.Plans(hc, coll, 0)
			if err != nil || !strings.Contains(choices[0].Plan.Name, "-2ph-") {
				t.Fatalf("%v on 2 nodes: %v, %v", coll, choices, err)
			}
			for _, k := range []struct {
				t  plan.DataType
				op plan.RedOp
			}{{plan.Float32, plan.Sum}, {plan.BFloat16, plan.Max}} {
				src, err := plan.EmitCUDA(choices[0].Plan, k.t, k.op)
				if err != nil {
					t.Fatalf("%s: %v", choices[0].Plan.Name, err)
				}
				name := fmt.Sprintf("k%d.cu", len(srcs))
				files[name] = "#include \"prelude.h\"\n" + src
				srcs = append(srcs, name)
			}
		}
	}
	for _, coll := range algorithms.Collectives {
		for _, root := range []int{0, 2} {
			if root != 0 && !coll.Rooted() {
				continue
			}
			choices, err := algorithms.Plans(cfg, coll, root)
			if err != nil {
				t.Fatalf("%v: %v", coll, err)
			}
			if pp, err := algorithms.PortPlan(cfg, coll); err != nil {
				t.Fatalf("%v over port channels: %v", coll, err)
			} else if pp != nil {
				choices = append(choices, algorithms.Choice{Plan: pp})
			}
			for _, ch := range choices {
				for _, k := range []struct {
					t  plan.DataType
					op plan.RedOp
				}{{plan.Float32, plan.Sum}, {plan.BFloat16, plan.PreMulSum}, {plan.Int32, plan.Avg}, {plan.Float8E4M3, plan.Max}, {plan.Uint8, plan.Sum}} {
					if k.op == plan.PreMulSum && (!coll.Reduces() || ch.Plan.ServesPreMulSum() != nil) {
						// Collectives that do not reduce run with Sum; plans that
						// cannot scale each rank's input are never run with
						// PreMulSum (plan/premul.go), and EmitCUDA refuses them.
						continue
					}
					src, err := plan.EmitCUDA(ch.Plan, k.t, k.op)
					if err != nil {
						t.Fatalf("%s: %v", ch.Plan.Name, err)
					}
					name := fmt.Sprintf("k%d.cu", len(srcs))
					files[name] = "#include \"prelude.h\"\n" + src
					srcs = append(srcs, name)
				}
			}
		}
	}
	// The wide LL plans in both packet formats (LL128: Config.WideProto,
	// the default on NVLink), the split ones and the two-phase LL
	// AllReduce with slots of one chunk: 4 ranks, rank 1, root 0 and 2.
	var lines []*plan.Plan
	for _, proto := range []plan.Protocol{plan.LL128, plan.LL16} {
		lc := algorithms.DefaultConfig(1, 4, 132, true)
		lc.WideProto = proto
		if p, err := algorithms.AllReduce2PALL(lc, lc.WideLL, 1<<20); err != nil {
			t.Fatal(err)
		} else {
			lines = append(lines, p)
		}
		for _, root := range []int{0, 2} {
			for _, build := range []func(algorithms.Config, int) (*plan.Plan, error){algorithms.BroadcastSplitLL, algorithms.ReduceSplitLL, algorithms.BroadcastLLWide, algorithms.ReduceLLWide} {
				p, err := build(lc, root)
				if err != nil {
					t.Fatal(err)
				}
				if p.Scratch != proto {
					t.Fatalf("%s: scratch %v, want %v", p.Name, p.Scratch, proto)
				}
				lines = append(lines, p)
			}
		}
	}
	for _, p := range lines {
		for _, k := range []struct {
			t  plan.DataType
			op plan.RedOp
		}{{plan.Float32, plan.Sum}, {plan.BFloat16, plan.PreMulSum}, {plan.Int32, plan.Avg}, {plan.Float8E4M3, plan.Max}} {
			src, err := plan.EmitCUDA(p, k.t, k.op)
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			name := fmt.Sprintf("k%d.cu", len(srcs))
			files[name] = "#include \"prelude.h\"\n" + src
			srcs = append(srcs, name)
		}
	}
	// The plans with bounded peers (rings, chains, trees, Bruck) of 2 and
	// 16 ranks, rank 1 (an interior rank of the trees and chains), root 0:
	// not in selection yet, so listed here (algorithms.BoundedPlans).
	for _, n := range []int{2, 16} {
		bc := algorithms.DefaultConfig(1, n, 132, true)
		for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter, algorithms.Broadcast, algorithms.Reduce} {
			choices, err := algorithms.BoundedPlans(bc, coll, 0)
			if err != nil {
				t.Fatalf("%v with bounded peers, %d ranks: %v", coll, n, err)
			}
			for _, ch := range choices {
				k := struct {
					t  plan.DataType
					op plan.RedOp
				}{plan.Float32, plan.Sum}
				if coll.Reduces() {
					k.t, k.op = plan.BFloat16, plan.PreMulSum
				}
				src, err := plan.EmitCUDA(ch.Plan, k.t, k.op)
				if err != nil {
					t.Fatalf("%s: %v", ch.Plan.Name, err)
				}
				name := fmt.Sprintf("k%d.cu", len(srcs))
				files[name] = "#include \"prelude.h\"\n" + src
				srcs = append(srcs, name)
			}
		}
	}
	// Integer Avg on the plans with bounded peers, at the ranks that divide
	// at their final step (plan.Op.PostDiv, CMB_DIV): rank 0 of 16 (a tree
	// root, the Reduce root) and rank 5 (the ring steps).
	for _, r := range []int{0, 5} {
		bc := algorithms.DefaultConfig(r, 16, 132, true)
		for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.ReduceScatter, algorithms.Reduce} {
			choices, err := algorithms.BoundedPlans(bc, coll, 0)
			if err != nil {
				t.Fatalf("%v with bounded peers, rank %d: %v", coll, r, err)
			}
			for _, ch := range choices {
				src, err := plan.EmitCUDA(ch.Plan, plan.Int32, plan.Avg)
				if err != nil {
					t.Fatalf("%s: %v", ch.Plan.Name, err)
				}
				if !strings.Contains(src, "CMB_DIV") && (r == 0 || coll != algorithms.Reduce) && (r == 0 || !strings.Contains(ch.Plan.Name, "tree")) {
					t.Errorf("%s rank %d: the integer Avg kernel has no final division (CMB_DIV)", ch.Plan.Name, r)
				}
				name := fmt.Sprintf("k%d.cu", len(srcs))
				files[name] = "#include \"prelude.h\"\n" + src
				srcs = append(srcs, name)
			}
		}
	}
	compileKernels(t, cc, dir, files, srcs)
	t.Logf("%d kernels checked with %s", len(srcs), cc.Path)
}

// compileKernels writes files (name -> contents) into dir and compiles each
// of srcs there with cc's program and arguments, one compiler run per
// source (several at a time would need more cores than CI has; the sources
// are small). A failure names the source and the plan line at its head.
func compileKernels(t *testing.T, cc *exec.Cmd, dir string, files map[string]string, srcs []string) {
	t.Helper()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range srcs {
		cmd := exec.Command(cc.Path, append(append([]string{}, cc.Args[1:]...), s)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			head, _, _ := strings.Cut(files[s], "\n#define")
			t.Fatalf("%s (%s): %v\n%s", s, head, err, out)
		}
	}
}
