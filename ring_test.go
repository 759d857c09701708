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
// 1.6 MB AllReduce on the ring) or turns the rings off (0), and ranks given
// different ring bounds, or split Broadcast/Reduce bounds, fail NewComm
// naming the setting and the rank.
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
	// The split Broadcast/Reduce bound likewise.
	errs = runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		if r == 1 {
			c.RootedSplitMinBytes = 1 << 20
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "RootedSplitMinBytes") || !strings.Contains(err.Error(), "rank 1 1048576 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's split bound", r, err)
		}
	}
}
