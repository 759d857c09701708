package weft_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// cearCases are AllReduces for the copy-engine executor: sizes from
// nothing through one of hal/host's 16 KiB windows to many (the free
// words gating a landing half's reuse), shards that end mid-window and
// shards left empty (fewer elements than ranks), in and out of place, and
// each base operator on several types; Avg stays with the kernel plans.
func cearCases(counts []int64) []collCase {
	var cases []collCase
	for _, count := range counts {
		for _, in := range []bool{false, true} {
			cases = append(cases, collCase{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: count, inPlace: in})
		}
	}
	last := counts[len(counts)-1]
	for _, k := range []struct {
		t  plan.DataType
		op plan.RedOp
	}{{plan.BFloat16, plan.Sum}, {plan.Int32, plan.Max}, {plan.Float16, plan.Min}, {plan.Uint8, plan.Prod}, {plan.Float64, plan.Sum}, {plan.Float8E4M3, plan.Sum}, {plan.Float32, plan.Avg}} {
		cases = append(cases, collCase{coll: algorithms.AllReduce, t: k.t, op: k.op, count: last + 3})
	}
	return cases
}

// TestCEAllReduceHost: WEFT_ALGO=ce, the host-issued copy-engine AllReduce
// (cear.go) on hal/host, 2 to 5 ranks, 2 to 4 landing slots per peer,
// every element checked through
// Launch (the NCCL API's path) and Comm.AllReduce; then one call captured
// in a graph and replayed with new inputs (every flag returns to its
// start within a call).
func TestCEAllReduceHost(t *testing.T) {
	t.Setenv("WEFT_ALGO", "ce")
	for _, k := range []struct {
		n     int
		shape string // WEFT_CE_ALLREDUCE_SHAPE: landing slots per peer (d)
	}{{2, ""}, {3, ""}, {5, ""}, {2, "32x512w64Md3"}, {3, "32x512w64Md4"}} {
		n := k.n
		t.Run(fmt.Sprintf("ranks%d%s", n, k.shape), func(t *testing.T) {
			t.Setenv("WEFT_CE_ALLREDUCE_SHAPE", k.shape)
			cases := cearCases([]int64{0, 1, 3, 37, 4096, 4097, 20000, 70001})
			runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				if !weft.CEAllReduceActive(c) {
					return fmt.Errorf("the AllReduces did not go through the copy-engine executor")
				}
				call := weft.Call{Coll: algorithms.AllReduce, Count: 1000, Type: plan.Float32, Op: plan.Sum}
				if name := c.PlanName(call); name != "all_reduce-ce-host-issued" {
					return fmt.Errorf("PlanName = %q, want the copy-engine executor's", name)
				}
				if p := c.Plans(); len(p) == 0 || p[len(p)-1] != "all_reduce-ce-host-issued for every size (WEFT_ALGO=ce)" {
					return fmt.Errorf("Plans = %q, want the copy-engine executor last", p)
				}
				if name := c.AllReducePlan(1000, plan.Float32, plan.Sum); name != "all_reduce-ce-host-issued" {
					return fmt.Errorf("AllReducePlan = %q, want the copy-engine executor's", name)
				}
				if b, m := c.PlanSMs(call); b != 64 || m != 0 {
					return fmt.Errorf("PlanSMs = %d, %d, want 64, 0 (the reduction and copy kernels' blocks; no data over links)", b, m)
				}
				call.Op = plan.Avg
				if name := c.PlanName(call); name == "all_reduce-ce-host-issued" {
					return fmt.Errorf("an Avg AllReduce went to the copy-engine executor, which has no division")
				}
				if err := cearDirect(rank, c, dev, s, 20000); err != nil {
					return err
				}
				return cearGraphReplay(rank, c, dev, s)
			})
		})
	}
}

// cearDirect runs Comm.AllReduce (the zero-copy API: the executor copies
// the reduced windows straight into the peers' registered outputs) out of
// place and in place, twice each (the second call reuses the
// registrations), and checks every element.
func cearDirect(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, count int64) error {
	for _, inPlace := range []bool{false, false, true, true} {
		if err := cearDirectOnce(rank, c, dev, s, count, inPlace); err != nil {
			return fmt.Errorf("in place %v: %w", inPlace, err)
		}
	}
	return nil
}

func cearDirectOnce(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, count int64, inPlace bool) error {
	n := c.Size()
	es := int64(plan.Float32.Size())
	in, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer in.Free()
	out := in
	if !inPlace {
		if out, err = dev.Alloc(count * es); err != nil {
			return err
		}
		defer out.Free()
	}
	if err := dev.Write(in, 0, check.Input(plan.Float32, plan.Sum, rank, count)); err != nil {
		return err
	}
	if err := c.AllReduce(in, out, count, plan.Float32, plan.Sum, s); err != nil {
		return err
	}
	if err := c.Synchronize(s); err != nil {
		return err
	}
	got := make([]byte, count*es)
	if err := dev.Read(got, out, 0); err != nil {
		return err
	}
	if wrong := check.Wrong(plan.Float32, got, check.AllReduce(plan.Float32, plan.Sum, n, count)); wrong != 0 {
		return fmt.Errorf("Comm.AllReduce of %d floats: %d wrong elements", count, wrong)
	}
	// Deregister before the buffers are freed: a later allocation at the
	// same address must not find this registration.
	if err := c.Deregister(out); err != nil {
		return err
	}
	if inPlace {
		return nil
	}
	return c.Deregister(in)
}

// cearGraphReplay captures one copy-engine AllReduce of several windows,
// through Launch (staged) and through Comm.AllReduce (zero-copy: its
// output registered by an uncaptured call first), and replays each three
// times with new inputs, checking every element.
func cearGraphReplay(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	for _, zeroCopy := range []bool{false, true} {
		if err := cearGraphReplayOnce(rank, c, dev, s, zeroCopy); err != nil {
			return fmt.Errorf("zero-copy %v: %w", zeroCopy, err)
		}
	}
	return nil
}

func cearGraphReplayOnce(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, zeroCopy bool) error {
	gc, ok := dev.(hal.GraphCapturer)
	if !ok {
		return nil
	}
	n := c.Size()
	const count = 40000 // float32: 160 KB, windows of 16 KiB per shard on hal/host
	es := int64(plan.Float32.Size())
	in, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer in.Free()
	out, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer out.Free()
	call := weft.Call{Coll: algorithms.AllReduce, Send: in.Addr(), Recv: out.Addr(), Count: count, Type: plan.Float32, Op: plan.Max}
	var g hal.Graph
	if zeroCopy {
		// The first call registers the output with the peers (collective,
		// host-side); the captured one finds the registration.
		if err := c.AllReduce(in, out, count, plan.Float32, plan.Max, s); err != nil {
			return err
		}
		if err := c.Synchronize(s); err != nil {
			return err
		}
		if err := gc.BeginCapture(s); err != nil {
			return err
		}
		if err := c.AllReduce(in, out, count, plan.Float32, plan.Max, s); err != nil {
			gc.EndCapture(s)
			return err
		}
		if g, err = gc.EndCapture(s); err != nil {
			return err
		}
		defer c.Deregister(out)
	} else if g, err = captureLaunch(gc, c, call, s); err != nil {
		return err
	}
	defer g.Close()
	// No barrier between replays: only this rank's stream reads its input
	// (peers get it through this rank's copies), and a landing half is
	// written again only after its reader released it.
	return replayMaxCheck(c, dev, s, g, in, out, n, rank, count, true, "replay")
}

// TestCEAllReduceDefaultBound: with no family forced, AllReduces through
// Comm.AllReduce of at least WEFT_CE_ALLREDUCE_MIN_BYTES take the
// copy-engine executor and smaller ones a kernel plan, both exact, while
// Launch (the NCCL ABI's path) keeps the kernel plans; ranks with
// different bounds fail NewComm naming the rank; a malformed shape is
// refused naming the variable.
func TestCEAllReduceDefaultBound(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "64K")
	const n = 3
	small, large := int64(4096), int64(70000)
	cases := []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: small},
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: large},
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: large, inPlace: true},
	}
	runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, k := range []struct {
			count int64
			ce    bool
		}{{small, false}, {large, true}} {
			call := weft.Call{Coll: algorithms.AllReduce, Count: k.count, Type: plan.Float32, Op: plan.Sum}
			if name := c.PlanName(call); name == "all_reduce-ce-host-issued" {
				return fmt.Errorf("AllReduce of %d floats through Launch: PlanName %q, want a kernel plan without WEFT_ALGO=ce", k.count, name)
			}
			if got := c.AllReducePlan(k.count, plan.Float32, plan.Sum) == "all_reduce-ce-host-issued"; got != k.ce {
				return fmt.Errorf("AllReduce of %d floats through Comm.AllReduce: plan %q, want the executor: %v", k.count, c.AllReducePlan(k.count, plan.Float32, plan.Sum), k.ce)
			}
		}
		if weft.CEAllReduceActive(c) {
			return fmt.Errorf("an AllReduce through Launch went through the copy-engine executor")
		}
		if p := c.Plans(); len(p) == 0 || p[len(p)-1] != "all_reduce-ce-host-issued ≥ 65536 B" {
			return fmt.Errorf("Plans = %q, want the copy-engine executor's bound last", p)
		}
		if err := cearDirect(rank, c, dev, s, small); err != nil {
			return err
		}
		if err := cearDirect(rank, c, dev, s, large); err != nil {
			return err
		}
		if !weft.CEAllReduceActive(c) {
			return fmt.Errorf("the large Comm.AllReduce did not go through the copy-engine executor")
		}
		return nil
	})

	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "")
	errs := runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		if r == 1 {
			c.CEAllReduceMinBytes = 1 << 20
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "copy-engine AllReduce") || !strings.Contains(err.Error(), "rank 1 1048576 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's copy-engine AllReduce bound", r, err)
		}
	}

	for _, bad := range []string{"32x512w10", "big", "32x512w64Md1", "32x512w64Md9"} {
		t.Setenv("WEFT_CE_ALLREDUCE_SHAPE", bad)
		errs = runRanksWith(t, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
			func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
		for r, err := range errs {
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_CE_ALLREDUCE_SHAPE") {
				t.Errorf("rank %d with WEFT_CE_ALLREDUCE_SHAPE=%s: %v; want ErrInvalidArgument naming the variable", r, bad, err)
			}
		}
	}
}

// TestCEAllReduceExportedHost: with no family forced, an AllReduce through
// Launch (the NCCL ABI's path, buffers not registered) of at least
// WEFT_CE_ALLREDUCE_MIN_BYTES on 2 ranks runs the copy-engine executor
// with each rank's output exported at the call and mapped by its peer
// (counted), in and out of place, each base operator on several types,
// every element checked, and once captured in a graph and replayed;
// smaller ones and Avg keep the kernel plans; on 3 ranks none is exported
// (Launch keeps the kernel plans there).
func TestCEAllReduceExportedHost(t *testing.T) {
	// Float32 Sum of 4096 (16 KB: kernels), 20000 and 70001 elements in
	// and out of place; six types × operators of 70004 elements (≥ 64 KiB)
	// and a Float32 Avg (kernels); the graph's 160 KB.
	testCEAllReduceExported(t, "host", []int{2, 3}, []int64{4096, 20000, 70001})
}

// TestCEAllReduceExportedNVLink is TestCEAllReduceExportedHost on 2 GPUs
// (CUDA IPC of cudaMalloc memory at the call), up to 160 MB: several
// 64 MiB windows per shard.
func TestCEAllReduceExportedNVLink(t *testing.T) {
	if requireGPUs(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	testCEAllReduceExported(t, "nvlink", []int{2}, []int64{4096, 20000, 40<<20 + 5})
}

// testCEAllReduceExported runs TestCEAllReduceExportedHost's checks on
// backend with cearCases(counts): counts[0] below 64 KiB of floats, the
// others at least that.
func testCEAllReduceExported(t *testing.T, backend string, ranks []int, counts []int64) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "64K")
	for _, n := range ranks {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			cases := cearCases(counts)
			runCasesThen(t, backend, n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				if err := cearGraphReplay(rank, c, dev, s); err != nil { // one more through Launch
					return err
				}
				want := int64(0)
				if n == 2 {
					want = 4 + 6 + 1
				}
				if got := c.ExportedCalls(); got != want {
					return fmt.Errorf("%d AllReduces through Launch on copy engines into exported outputs, want %d", got, want)
				}
				for _, k := range []struct {
					count int64
					op    plan.RedOp
					ce    bool
				}{{20000, plan.Sum, n == 2}, {4096, plan.Sum, false}, {20000, plan.Avg, false}} {
					call := weft.Call{Coll: algorithms.AllReduce, Count: k.count, Type: plan.Float32, Op: k.op}
					if got := c.PlanName(call) == "all_reduce-ce-host-issued"; got != k.ce {
						return fmt.Errorf("PlanName(%v AllReduce of %d floats) = %q; copy engines expected: %v", k.op, k.count, c.PlanName(call), k.ce)
					}
					if b, m := c.PlanSMs(call); k.ce && (b != 32 || m != 0) {
						return fmt.Errorf("PlanSMs(AllReduce of %d floats) = %d, %d, want 32, 0 (the reduction kernel's blocks; no copy kernel in this form)", k.count, b, m)
					}
				}
				return nil
			})
		})
	}
}

// replayMax is the Max over ranks r < n of the float32 inputs the graph
// replay tests write in replay k: check.InputN of rank r+k of n+3 ranks.
// replayMaxCheck replays the captured graph g (a float32 Max collective
// of count elements from in to out on n ranks) three times, rank r's input
// being check.InputN of rank r+k of n+3 ranks in replay k so that the
// result changes each time, and, where verify, compares out with
// replayMax's after each replay; what names the collective in errors.
func replayMaxCheck(c *weft.Comm, dev hal.Device, s hal.Stream, g hal.Graph, in, out hal.Buffer, n, rank int, count int64, verify bool, what string) error {
	for k := 0; k < 3; k++ {
		if err := dev.Write(in, 0, check.InputN(plan.Float32, plan.Max, n+3, rank+k, count)); err != nil {
			return err
		}
		if err := g.Launch(s); err != nil {
			return err
		}
		if err := c.Synchronize(s); err != nil {
			return fmt.Errorf("%s %d: %w", what, k, err)
		}
		if !verify {
			continue
		}
		got := make([]byte, count*4)
		if err := dev.Read(got, out, 0); err != nil {
			return err
		}
		if wrong := check.Wrong(plan.Float32, got, replayMax(n, k, count)); wrong != 0 {
			return fmt.Errorf("%s %d: %d wrong elements on rank %d", what, k, wrong, rank)
		}
	}
	return nil
}

func replayMax(n, k int, count int64) []byte {
	want := slices.Clone(check.InputN(plan.Float32, plan.Max, n+3, k, count))
	for r := 1; r < n; r++ {
		maxInto(want, check.InputN(plan.Float32, plan.Max, n+3, r+k, count))
	}
	return want
}

// maxInto sets acc[i] = max(acc[i], x[i]) for little-endian float32s.
func maxInto(acc, x []byte) {
	for i := 0; i+4 <= len(acc); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(acc[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(x[i:]))
		if b > a {
			binary.LittleEndian.PutUint32(acc[i:], math.Float32bits(b))
		}
	}
}

// TestCEAllReduceNVLink: the copy-engine AllReduce on 2 GPUs through
// internal/cudadev's stream operations and the NVRTC-compiled reduction
// kernel: sizes from nothing to 160 MB (shards of 80 MB: two 64 MiB windows per
// shard), in and out of place, every base operator on several types, and
// the graph replay.
func TestCEAllReduceNVLink(t *testing.T) {
	if requireGPUs(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	t.Setenv("WEFT_ALGO", "ce")
	cases := cearCases([]int64{0, 1, 4097, 1 << 20, 40<<20 + 5})
	runCasesThen(t, "nvlink", 2, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		if !weft.CEAllReduceActive(c) {
			return fmt.Errorf("the AllReduces did not go through the copy-engine executor")
		}
		if err := cearDirect(rank, c, dev, s, 9<<20+1); err != nil {
			return err
		}
		return cearGraphReplay(rank, c, dev, s)
	})
}

// TestCEAllReduceBudget: with a block budget (Options.MaxCTAs, NCCL's
// maxCTAs) the executor's two kernels share it: PlanSMs reports at most
// the budget, and the AllReduce stays exact.
func TestCEAllReduceBudget(t *testing.T) {
	t.Setenv("WEFT_ALGO", "ce")
	errs := runRanksOpts(t, "host", 2, weft.Options{MaxCTAs: 16, Timeout: 20 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		call := weft.Call{Coll: algorithms.AllReduce, Count: 1 << 20, Type: plan.Float32, Op: plan.Sum}
		if name := c.PlanName(call); name != "all_reduce-ce-host-issued" {
			return fmt.Errorf("PlanName = %q, want the copy-engine executor's", name)
		}
		if b, m := c.PlanSMs(call); b != 16 || m != 0 {
			return fmt.Errorf("PlanSMs with at most 16 blocks = %d, %d, want 16, 0", b, m)
		}
		return cearDirect(rank, c, dev, s, 70001)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
