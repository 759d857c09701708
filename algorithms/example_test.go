package algorithms_test

import (
	"fmt"

	"github.com/weftccl/weft/algorithms"
)

// The AllReduce plans a GPU rank gets, and the one-phase LL plan in full:
// put the input as packets into each peer's scratch, then reduce the input
// with the packets received.
func ExampleAllReducePlans() {
	cfg := algorithms.DefaultConfig(0, 2, 132, true)
	choices, _ := algorithms.AllReducePlans(cfg)
	for _, c := range choices {
		fmt.Println(c.Plan.Name, c.MaxBytes)
	}
	fmt.Print(choices[0].Plan)
	// Output:
	// allreduce-1pa-LL16-8x1024 131072
	// allreduce-2pa-64x1024-u4 16777216
	// allreduce-2pa-128x512-u4 0
	// plan allreduce-1pa-LL16-8x1024 rank 0/2, 1 channels, 8 blocks × 1024 threads, scratch 1×LL16
	//  group 0 (8 blocks)
	//   putPackets[all] ch0.scratch[0] <- local.in
	//   reducePackets[all] local.out <- local.in,local.scratch[0]
}
