package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// TestRingFromBoundHost: on 4 ranks AllReduce from Config.RingMinBytes
// (2 MiB on hal/host) and ReduceScatter from a quarter of it per segment
// take the windowed rings, smaller ones the all-pairs plans; both sides of
// the bound element by element right, with the operators the rings serve
// through a final division (integer Avg), a scalar per rank (PreMulSum)
// or the scalar 1/n (floating Avg), in and out of place. PlanName says
// which.
func TestRingFromBoundHost(t *testing.T) {
	const n = 4
	cases := []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 400000}, // 1.6 MB: all-pairs
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 600003}, // 2.4 MB: ring
		{coll: algorithms.AllReduce, t: plan.Int32, op: plan.Avg, count: 550001},
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Avg, count: 550001, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.BFloat16, op: plan.Max, count: 1100000, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.Float64, op: plan.PreMulSum, count: 270001},
		{coll: algorithms.ReduceScatter, t: plan.Float32, op: plan.Sum, count: 100000}, // 400 KB segments: all-pairs
		{coll: algorithms.ReduceScatter, t: plan.Float32, op: plan.Sum, count: 140000}, // 560 KB: ring
		{coll: algorithms.ReduceScatter, t: plan.Int8, op: plan.Avg, count: 600001, inPlace: true},
		{coll: algorithms.ReduceScatter, t: plan.Float16, op: plan.Prod, count: 270001},
	}
	runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, k := range []struct {
			call weft.Call
			ring bool
		}{
			{weft.Call{Coll: algorithms.AllReduce, Count: 400000, Type: plan.Float32, Op: plan.Sum}, false},
			{weft.Call{Coll: algorithms.AllReduce, Count: 600003, Type: plan.Float32, Op: plan.Sum}, true},
			{weft.Call{Coll: algorithms.ReduceScatter, Count: 100000, Type: plan.Float32, Op: plan.Sum}, false},
			{weft.Call{Coll: algorithms.ReduceScatter, Count: 140000, Type: plan.Float32, Op: plan.Sum}, true},
		} {
			k.call.Send, k.call.Recv = 1<<20, 64<<20
			if got := c.PlanName(k.call); strings.Contains(got, "-ring-") != k.ring {
				return fmt.Errorf("PlanName(%v of %d floats) = %q: ring %v expected", k.call.Coll, k.call.Count, got, k.ring)
			}
		}
		return nil
	})
}

// TestRingMinBytesSetting: WEFT_RING_MIN_BYTES moves the bound (1M: a
// 1.6 MB AllReduce on the ring) or turns the rings off (0), as
// WEFT_ROOTED_SPLIT_MIN_BYTES the split Broadcast/Reduce bound;
// WEFT_RING_SHAPE reshapes the rings (right results) and takes no depth,
// WEFT_ROOTED_LL_MAX_BYTES moves Broadcast's and Reduce's LL bound;
// ranks
// given different ring bounds, or split bounds, fail NewComm naming the
// setting and the rank.
func TestRingMinBytesSetting(t *testing.T) {
	call := weft.Call{Coll: algorithms.AllReduce, Send: 1 << 20, Recv: 64 << 20, Count: 400000, Type: plan.Float32, Op: plan.Sum}
	for _, tc := range []struct {
		v    string
		ring bool
	}{{"1M", true}, {"0", false}} {
		t.Setenv("WEFT_RING_MIN_BYTES", tc.v)
		errs := runRanks(t, "host", 4, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			if got := c.PlanName(call); strings.Contains(got, "-ring-") != tc.ring {
				return fmt.Errorf("WEFT_RING_MIN_BYTES=%s: PlanName(1.6 MB AllReduce) = %q, ring %v expected", tc.v, got, tc.ring)
			}
			big := call
			big.Count = 1 << 20
			if got := c.PlanName(big); strings.Contains(got, "-ring-") != tc.ring {
				return fmt.Errorf("WEFT_RING_MIN_BYTES=%s: PlanName(4 MiB AllReduce) = %q, ring %v expected", tc.v, got, tc.ring)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	}
	t.Setenv("WEFT_RING_MIN_BYTES", "")
	// WEFT_RING_SHAPE reshapes the rings the bound selects (3 blocks of 64
	// threads, 8 KiB windows: many windows per chunk) and nothing else.
	t.Setenv("WEFT_RING_SHAPE", "3x64w8K")
	runCasesThen(t, "host", 4, []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 600003},
		{coll: algorithms.ReduceScatter, t: plan.BFloat16, op: plan.Max, count: 140001, inPlace: true},
	}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		big, small := call, call
		big.Count = 1 << 20
		if got := c.PlanName(big); !strings.Contains(got, "-ring-") || !strings.Contains(got, "-3x64-w8192") {
			return fmt.Errorf("WEFT_RING_SHAPE=3x64w8K: PlanName(4 MiB AllReduce) = %q, the ring on 3 x 64 threads and 8 KiB windows expected", got)
		}
		if got := c.PlanName(small); strings.Contains(got, "-3x64-") {
			return fmt.Errorf("WEFT_RING_SHAPE=3x64w8K: PlanName(1.6 MB AllReduce) = %q, the all-pairs plan's own shape expected", got)
		}
		return nil
	})
	t.Setenv("WEFT_RING_SHAPE", "3x64d4")
	for r, err := range runRanks(t, "host", 2, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil }) {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_RING_SHAPE") || !strings.Contains(err.Error(), "depth") {
			t.Errorf("rank %d with WEFT_RING_SHAPE=3x64d4: %v; want ErrInvalidArgument naming the variable and the depth", r, err)
		}
	}
	t.Setenv("WEFT_RING_SHAPE", "")
	errs := runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		if r == 2 {
			c.RingMinBytes = 4 << 20 // as WEFT_RING_MIN_BYTES=4M on this rank only
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "WEFT_RING_MIN_BYTES") || !strings.Contains(err.Error(), "rank 2 4194304 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 2's ring bound", r, err)
		}
	}
	// The split Broadcast/Reduce bound likewise: WEFT_ROOTED_SPLIT_MIN_BYTES
	// moves it (1M: a 240 KB Broadcast on the all-pairs plan) or turns the
	// split plans off (0), and ranks that differ fail NewComm.
	bcast := weft.Call{Coll: algorithms.Broadcast, Send: 1 << 20, Recv: 64 << 20, Count: 60000, Type: plan.Float32, Op: plan.Sum, Root: 1}
	for _, tc := range []struct {
		v     string
		count int64
		split bool
	}{{"", 60000, true}, {"1M", 60000, false}, {"1M", 300000, true}, {"0", 300000, false}} {
		t.Setenv("WEFT_ROOTED_SPLIT_MIN_BYTES", tc.v)
		errs := runRanks(t, "host", 3, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			call := bcast
			call.Count = tc.count
			if got := c.PlanName(call); strings.Contains(got, "-split-") != tc.split {
				return fmt.Errorf("WEFT_ROOTED_SPLIT_MIN_BYTES=%q: PlanName(Broadcast of %d floats) = %q, split %v expected", tc.v, tc.count, got, tc.split)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		}
	}
	t.Setenv("WEFT_ROOTED_SPLIT_MIN_BYTES", "")
	// WEFT_ROOTED_LL_MAX_BYTES moves the rooted LL bound (hal/host's
	// 128 KiB to 512 KiB: the 240 KB Broadcast goes as packets), and
	// Broadcast and Reduce through it are right.
	t.Setenv("WEFT_ROOTED_LL_MAX_BYTES", "512K")
	runCasesThen(t, "host", 3, []collCase{
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 1, count: 60000},
		{coll: algorithms.Reduce, t: plan.BFloat16, op: plan.Sum, root: 2, count: 200001, inPlace: true},
	}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		if got := c.PlanName(bcast); !strings.Contains(got, "-LL") {
			return fmt.Errorf("WEFT_ROOTED_LL_MAX_BYTES=512K: PlanName(Broadcast of 60000 floats) = %q, an LL plan expected", got)
		}
		return nil
	})
	t.Setenv("WEFT_ROOTED_LL_MAX_BYTES", "")
	errs = runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		if r == 1 {
			c.RootedSplitMinBytes = 1 << 20
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "WEFT_ROOTED_SPLIT_MIN_BYTES") || !strings.Contains(err.Error(), "rank 1 1048576 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's split bound", r, err)
		}
	}
}

// TestWideLLShapeSetting: WEFT_WIDE_LL_SHAPE reshapes the wide LL plans (a
// 64 KiB AllGather segment and a 64 KiB Broadcast on hal/host, whose wide
// plans serve 16–256 and 16–128 KiB) with right results, leaves the narrow
// ones alone, and takes BLOCKSxTHREADS only; ranks given different shapes
// fail NewComm naming the variable.
func TestWideLLShapeSetting(t *testing.T) {
	t.Setenv("WEFT_WIDE_LL_SHAPE", "2x64")
	ag := weft.Call{Coll: algorithms.AllGather, Send: 1 << 20, Recv: 4 << 20, Count: 16 << 10, Type: plan.Float32}
	bc := weft.Call{Coll: algorithms.Broadcast, Send: 1 << 20, Recv: 4 << 20, Count: 16 << 10, Type: plan.Float32}
	runCasesThen(t, "host", 3, []collCase{
		{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: 16<<10 + 5},
		{coll: algorithms.Broadcast, t: plan.BFloat16, op: plan.Sum, root: 2, count: 30001, inPlace: true},
		{coll: algorithms.ReduceScatter, t: plan.Int32, op: plan.Max, count: 20000},
	}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, call := range []weft.Call{ag, bc} {
			if got := c.PlanName(call); !strings.HasSuffix(got, "-2x64") {
				return fmt.Errorf("WEFT_WIDE_LL_SHAPE=2x64: PlanName(64 KiB %v) = %q, the wide LL plan on 2 x 64 threads expected", call.Coll, got)
			}
			small := call
			small.Count = 256
			if got := c.PlanName(small); strings.Contains(got, "2x64") {
				return fmt.Errorf("WEFT_WIDE_LL_SHAPE=2x64: PlanName(1 KiB %v) = %q, the narrow LL plan expected", call.Coll, got)
			}
		}
		return nil
	})
	for _, bad := range []string{"2x64w8K", "2x64d4", "2x64p2"} {
		t.Setenv("WEFT_WIDE_LL_SHAPE", bad)
		for r, err := range runRanks(t, "host", 2, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil }) {
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_WIDE_LL_SHAPE") || !strings.Contains(err.Error(), "BLOCKSxTHREADS only") {
				t.Errorf("rank %d with WEFT_WIDE_LL_SHAPE=%s: %v; want ErrInvalidArgument naming the variable", r, bad, err)
			}
		}
	}
	t.Setenv("WEFT_WIDE_LL_SHAPE", "")
	errs := runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		if r == 1 {
			c.WideLL.Blocks++ // as WEFT_WIDE_LL_SHAPE on this rank only
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "WEFT_WIDE_LL_SHAPE") || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's wide LL shape", r, err)
		}
	}
}
