package weft_test

import (
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
