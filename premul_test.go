package weft_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// premulCases are PreMulSum calls of every reducing collective and data
// type, each rank passing its own scalar (check.PreMulScalar), as a value
// and in device memory, at a count the LL plans serve and one that crosses
// several windows of the HB and port plans (hal/host windows are 16 KiB).
func premulCases(n int, counts []int64) []collCase {
	var cases []collCase
	for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.ReduceScatter, algorithms.Reduce} {
		for _, typ := range plan.DataTypes {
			for i, count := range counts {
				for _, dev := range []bool{false, true} {
					root := 0
					if coll.Rooted() {
						root = (i + 1) % n
					}
					cases = append(cases, collCase{coll: coll, t: typ, op: plan.PreMulSum, root: root, count: count,
						inPlace: i%2 == 1, devScalar: dev})
				}
			}
		}
	}
	return cases
}

// TestPreMulSumPerRankScalars: with a different scalar on every rank, the
// result is Σ s_r·x_r exactly (issue 18), through the LL and HB plans.
func TestPreMulSumPerRankScalars(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	for _, n := range []int{3, 4, 5} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			cases := premulCases(n, []int64{37, 70001})
			if n > 3 { // every type on 3 ranks, half of them on each larger count
				cases = slices.DeleteFunc(cases, func(k collCase) bool { return slices.Index(plan.DataTypes, k.t)%2 != n%2 })
			}
			runCases(t, n, cases)
		})
	}
}

// TestPreMulSumPerRankScalarsPort: the same through the port-channel plans
// (WEFT_ALGO=port), whose engines move the input: it is staged, scaled,
// through scratch (plan.Op.Stage).
func TestPreMulSumPerRankScalarsPort(t *testing.T) {
	t.Setenv("WEFT_ALGO", "port")
	for _, n := range []int{3, 4} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			runCases(t, n, premulCases(n, []int64{5, 20011}))
		})
	}
}
