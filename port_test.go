package weft_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/nvlink"
	"github.com/weftccl/weft/hal/plan"
)

// portCases are the collectives that have port-channel plans, over types
// and operators, at counts from one element to several windows (hal/host
// windows are 16 KiB), in and out of place.
func portCases(counts []int64, types []plan.DataType) []collCase {
	var cases []collCase
	for _, coll := range []algorithms.Collective{algorithms.AllGather, algorithms.AllToAll, algorithms.ReduceScatter, algorithms.AllReduce} {
		for _, typ := range types {
			ops := []plan.RedOp{plan.Sum}
			if coll.Reduces() {
				ops = plan.RedOps
			}
			for _, op := range ops {
				for i, count := range counts {
					in := i%2 == 1 && coll != algorithms.AllToAll
					cases = append(cases, collCase{coll: coll, t: typ, op: op, count: count, inPlace: in})
				}
			}
		}
	}
	return cases
}

// TestCollectivesPort runs the port-channel plans (WEFT_ALGO=port) on
// hal/host: triggers pushed by the interpreter, drained by the proxy,
// moved by the software engine.
func TestCollectivesPort(t *testing.T) {
	t.Setenv("WEFT_ALGO", "port")
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			counts := []int64{1, 37, 4096, 16385, 70001}
			types := []plan.DataType{plan.Float32, plan.BFloat16, plan.Int8}
			if n > 2 {
				counts, types = []int64{5, 70001}, []plan.DataType{plan.Float32}
			}
			runCases(t, n, portCases(counts, types))
		})
	}
}

// TestCollectivesPortNVLink runs the port-channel plans on the GPUs:
// copy engines move the data. It skips without GPUs, unless WEFT_REQUIRE
// names nvlink; WEFT_TEST_RANKS sets the number of ranks (GPUs shared).
func TestCollectivesPortNVLink(t *testing.T) {
	n := max(requireGPUs(t), 2) // with one GPU, two ranks share it (the engine path is checked too)
	if v, err := strconv.Atoi(os.Getenv("WEFT_TEST_RANKS")); err == nil && v > 1 {
		n = v // ranks share GPUs round-robin
	}
	t.Setenv("WEFT_ALGO", "port")
	runCasesOn(t, nvlink.Name, n, portCases([]int64{1, 37, 70001, 3<<20 + 5}, []plan.DataType{plan.Float32, plan.BFloat16, plan.Float8E4M3, plan.Int64}))
}
