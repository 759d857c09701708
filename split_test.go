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

// TestSplitLLHost: with WEFT_BROADCAST_SPLIT_LL_MAX_BYTES and
// WEFT_REDUCE_SPLIT_LL_MAX_BYTES at 1 MiB, Broadcast
// and Reduce from hal/host's LL bound (128 KiB) to 1 MiB take the split LL
// plans on 3 and 4 ranks (every root, counts that do not divide into n−1
// chunks evenly, operators that scale or divide, in place), back to back
// so that launches reuse both scratch halves and take each other's
// releases; beyond, the split windowed plans. PlanName says which. Both
// packet formats: LL128 lines (hal/host's default) and LL16
// (WEFT_LL128=0), each with slots of one chunk.
func TestSplitLLHost(t *testing.T) {
	t.Setenv("WEFT_BROADCAST_SPLIT_LL_MAX_BYTES", "1M")
	t.Setenv("WEFT_REDUCE_SPLIT_LL_MAX_BYTES", "1M")
	for _, proto := range []string{"LL128", "LL16"} {
		t.Run(proto, func(t *testing.T) {
			if proto == "LL16" {
				t.Setenv("WEFT_LL128", "0")
			}
			splitLLHost(t, proto)
		})
	}
}

func splitLLHost(t *testing.T, proto string) {
	for _, n := range []int{3, 4} {
		var cases []collCase
		for root := 0; root < n; root++ {
			cases = append(cases,
				collCase{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: root, count: 50001},
				collCase{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: root, count: 50001},
				collCase{coll: algorithms.Broadcast, t: plan.BFloat16, op: plan.Sum, root: root, count: 300007, inPlace: true},
				collCase{coll: algorithms.Reduce, t: plan.Int32, op: plan.Avg, root: root, count: 200003},
			)
		}
		cases = append(cases,
			collCase{coll: algorithms.Reduce, t: plan.Float64, op: plan.PreMulSum, root: n - 1, count: 70001},
			collCase{coll: algorithms.Reduce, t: plan.BFloat16, op: plan.Max, root: 1, count: 400001, inPlace: true},
			collCase{coll: algorithms.Reduce, t: plan.Float32, op: plan.Avg, root: 0, count: 100000},
			collCase{coll: algorithms.Broadcast, t: plan.Int8, op: plan.Sum, root: 2, count: 1 << 20}, // 1 MiB: still split LL
			collCase{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: 1, count: 300000},  // 1.2 MB: split windowed
		)
		runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			for _, k := range []struct {
				coll  algorithms.Collective
				count int64
				want  string
			}{
				{algorithms.Broadcast, 20000, "-" + proto + "-"}, {algorithms.Broadcast, 50001, "broadcast-split-r1-" + proto},
				{algorithms.Reduce, 200003, "reduce-split-r1-" + proto}, {algorithms.Reduce, 300000, "reduce-split-r1-hb-"},
			} {
				call := weft.Call{Coll: k.coll, Count: k.count, Type: plan.Float32, Op: plan.Sum, Root: 1, Send: 1 << 20, Recv: 64 << 20}
				if got := c.PlanName(call); !strings.Contains(got, k.want) {
					return fmt.Errorf("%d ranks: PlanName(%v of %d floats) = %q, want …%s…", n, k.coll, k.count, got, k.want)
				}
			}
			return nil
		})
	}
}
