//go:build cgo

package main

import (
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/internal/env"
)

// The Go runtime inside libweft_nccl.so serves weft alone, and weft's own
// heap is small (2 MB live on 2 GPUs: plans, arguments, the NCCL layer's
// tables). With the runtime's default GOGC of 100 the heap goal is then
// about 4 MB, so the allocations of each call (the NCCL layer's
// operation, a group's tables, a launch's arguments) start a collection
// every few hundred calls, and each stops the world across the process's
// Ps and takes mark work from the calling thread.
//
// heapFloor raises the heap goal by keeping a large pointer-free
// allocation reachable (a "ballast"): the goal becomes about twice the
// floor plus the live heap, so a collection comes every WEFT_HEAP_FLOOR
// bytes of allocation instead of every 2 MB, and a large live heap
// (hal/host's buffers) keeps its usual goal. The allocation itself is
// fresh from the operating system and never written, so it is not
// resident, and the collector never scans it (it holds no pointers); the
// price is the garbage the higher goal lets accumulate between
// collections: up to about WEFT_HEAP_FLOOR of resident memory (a Go
// program churning 200 MB in 1 KiB pieces: 66 MB resident with the
// floor, 9 MB without; 5 collections against 58). GOGC and GOMEMLIMIT
// keep their meaning on top of it.
//
// Measured (2×H100, 2026-11-26, docs/bench/2026-11-26h-h100x2, call 9:
// cbench in eager mode, 8 B–32 KB, 200 calls per size, two passes): 10
// collections per rank without the floor, 3 with it (those of start-up);
// the caller's mean host time per call 0.2–1.0 µs lower (AllGather 8.09
// → 7.28 µs, Broadcast 8.00 → 7.56, Reduce 7.93 → 7.41, Gather 9.43 →
// 8.39), as with GOGC=off, and less spread between passes.
var heapFloor []byte

// defaultHeapFloor is WEFT_HEAP_FLOOR's default.
const defaultHeapFloor = 64 << 20

func init() {
	n := int64(defaultHeapFloor)
	if s := env.String("WEFT_HEAP_FLOOR"); s != "" {
		v, err := algorithms.ParseSize(s)
		if err != nil || v < 0 || v > 1<<30 {
			env.Logger("INIT").Warn("WEFT_HEAP_FLOOR: want a size from 0 to 1G; using the default", "value", s, "default", defaultHeapFloor)
		} else {
			n = v
		}
	}
	if n > 0 {
		// The next collection (the heap is past the runtime's initial
		// 4 MB goal now) sets the goal from the live heap, floor included.
		heapFloor = make([]byte, n)
	}
}
