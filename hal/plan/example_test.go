package plan_test

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// A put-then-signal plan for rank 0 of 2, and its peer's wait: the smallest
// MemoryChannel program.
func ExamplePlan() {
	p := &plan.Plan{
		Name: "put-signal", Rank: 0, NRanks: 2, Threads: 256, Semaphores: 1,
		Channels: []plan.Channel{{Peer: 1}},
		Groups: []plan.Group{{Blocks: 1, Ops: []plan.Op{
			plan.Transfer(plan.All, 0, []plan.Ref{plan.R(0, plan.Output)}, plan.L(plan.Input)),
			plan.Signal(0, 0),
		}}},
	}
	fmt.Print(p)
	fmt.Println(p.Validate())
	// Output:
	// plan put-signal rank 0/2, 1 channels, 1 blocks × 256 threads, scratch 0×HB
	//  group 0 (1 blocks)
	//   put[all] ch0.out <- local.in
	//   signal(ch0, sem 0)
	// <nil>
}

// Chunk boundaries fall on 16-byte multiples, so the last chunk of an odd
// count is short.
func ExampleChunkRange() {
	for c := 0; c < 4; c++ {
		off, n := plan.ChunkRange(1001, 4, c, 4)
		fmt.Println(off, n)
	}
	// Output:
	// 0 252
	// 252 252
	// 504 252
	// 756 245
}
