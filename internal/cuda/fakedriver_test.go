package cuda

import (
	"fmt"
	"os"
)

// fakeDriverEnv makes the test binary, re-executed with WEFT_CUDA_LIB set
// to the fake driver, report what the multicast bindings do.
const fakeDriverEnv = "WEFT_TEST_FAKE_DRIVER"

// fakeDriverChild loads the driver WEFT_CUDA_LIB names and prints one line
// per fact.
func fakeDriverChild() int {
	if err := Load(); err != nil {
		fmt.Println("load:", err)
		return 1
	}
	fmt.Println("available:", MulticastAvailable())
	var c Context
	g, err := c.MulticastGetGranularity(4, 1<<21, HandleTypePosixFD, MulticastGranularityRecommended)
	fmt.Printf("granularity: %d %v\n", g, err)
	_, err = c.MulticastCreate(4, 1<<21, HandleTypePosixFD)
	fmt.Printf("create: %v\n", err)
	if os.Getenv("FAKECUDA_STREAMOPS") == "1" {
		streamOpsChild(c)
	}
	return 0
}

// streamOpsChild queues one list of stream operations on two streams
// (0x10, 0x20) without and with batching; the fake driver prints each
// call it receives.
func streamOpsChild(c Context) {
	streams := []Stream{{Ctx: c, Handle: 0x10}, {Ctx: c, Handle: 0x20}}
	ops := []StreamOp{
		{Kind: OpWait, Dst: 0x1000, Value: 1},
		{Kind: OpWrite, Dst: 0x1000, Value: 0},
		{Kind: OpCopy, Dst: 0x2000, Src: 0x3000, Bytes: 4096},
		{Kind: OpWrite, Dst: 0x4000, Value: 1},
		{Kind: OpKernel, Dst: 0x9000, Src: 0xa000, Src2: 0xb000, Bytes: 256, Func: Function{Ctx: c, Handle: 0xf0}, Grid: 32, Block: 512},
		{Kind: OpKernel, Dst: 0x9000, Src: 0xa000, Src2: 0xb000, Bytes: 0, Func: Function{Ctx: c, Handle: 0xf0}, Grid: 32, Block: 512},
		{Kind: OpWrite, Dst: 0x4008, Value: 2},
		{Kind: OpWait, Lane: 1, Dst: 0x5000, Value: 1},
		{Kind: OpWrite, Lane: 1, Dst: 0x5000, Value: 0},
		{Kind: OpCopy, Lane: 1, Dst: 0x6000, Src: 0x7000, Bytes: 0},
		{Kind: OpWrite, Lane: 1, Dst: 0x8000, Value: 1},
	}
	for _, batch := range []bool{false, true} {
		fmt.Printf("queue batch=%v\n", batch)
		failed, err := QueueOps(c, streams, ops, batch)
		fmt.Printf("queued batch=%v: failed %d, %v\n", batch, failed, err)
	}
	_, err := QueueOps(c, streams[:1], []StreamOp{{Kind: OpWrite, Lane: 1, Dst: 0x8}}, false)
	fmt.Printf("bad lane: %v\n", err)
	_, err = QueueOps(c, streams[:1], []StreamOp{{Kind: OpKernel, Dst: 0x8, Bytes: 8, Grid: 1, Block: 32}}, false)
	fmt.Printf("no function: %v\n", err)
}
