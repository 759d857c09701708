package weft

import (
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// The host-issued copy-engine Reduce (docs/collectives.md, "Copy-engine
// Reduce"): every rank but the root pushes its input, window by window,
// into its landing slot on the root with its copy engines; the root
// reduces each landed window into its output with a StreamReduce kernel of
// a few blocks (the first peer's window with its own input, the next ones
// in place) and frees the slot. No SM moves data over the links: copy
// engines move 395.6 GB/s one way over an H100's NVLink, where the SM
// plans' loads stop at 372 (NCCL's Reduce moves 370;
// docs/bench/2026-11-28-h100x2, call 1).
//
// It runs on the copy-engine AllGather's resources (ce.go: two landing
// halves of ceWindow bytes per peer and the data and free words of each
// ordered pair of ranks) with the same protocol, so the two executors
// share them call after call: for window w, half h = w mod 2, a non-root
// rank waits for free[root][h] = 1 and resets it, copies the window into
// the root's slot for it and writes data = 1 there; the root, per peer p,
// waits for data[p][h] = 1 and resets it, reduces, and writes free = 1
// into p's word. Every word is reset by its waiter, so a call leaves them
// as it found them and a captured graph replays in step. The non-roots'
// copies go on the caller's stream, the root's reductions on lane 1; the
// list is in window order, which completes where every lane runs in one
// hardware queue (window w waits only for windows ≤ w).

// ceReduceName is what PlanName says of a Reduce the executor serves.
const ceReduceName = "reduce-ce-host-issued"

// ceReduceServes reports whether the copy-engine Reduce serves call: a
// built-in operator other than Avg (Sum, Prod, Max, Min) where the
// host-issued executors can run, under WEFT_ALGO=ce or, with no family
// forced, from Config.CEReduceMinBytes.
func (c *Comm) ceReduceServes(call Call) bool {
	switch c.ceReduction(call) {
	case ceForced:
		return true
	case ceBySize:
		b := call.Count * int64(call.Type.Size())
		return c.cfg.CEReduceMinBytes > 0 && b >= c.cfg.CEReduceMinBytes
	}
	return false
}

// ceReduceOps returns the stream operations of one Reduce of bytes bytes
// to root from input into output (the root's; device addresses) for rank
// me of n (see the comment at the top of this file); k is the reduction
// kernel for the call's type and operator.
func ceReduceOps(st *hostIssued, me, n, root int, input, output uint64, bytes int64, t plan.DataType, op plan.RedOp, k cearShape) []hal.StreamOp {
	W := st.window
	nwin := (bytes + W - 1) / W
	flag := func(base uint64, q, word int) uint64 { return base + uint64(st.flag(q, word)) }
	slot := func(base uint64, q, p int, h int64) uint64 {
		return base + uint64((h*int64(n-1)+ceSlot(q, p))*W)
	}
	mine := st.flags.Addr()
	var ops []hal.StreamOp
	for w := int64(0); w < nwin; w++ {
		h := w % 2
		off := uint64(w * W)
		l := min(W, bytes-w*W)
		if me != root {
			free := flag(mine, root, 2+int(h))
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamWaitEq, Dst: free, Value: 1},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: free, Value: 0},
				hal.StreamOp{Kind: hal.StreamCopy, Dst: slot(st.lreg.Peers[root].Addr(), me, root, h), Src: input + off, Bytes: l},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[root].Addr(), me, int(h)), Value: 1})
			continue
		}
		src := input + off
		for j := 1; j < n; j++ {
			p := (root + j) % n
			data := flag(mine, p, int(h))
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamWaitEq, Dst: data, Value: 1, Lane: ceLaneOut},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: data, Value: 0, Lane: ceLaneOut},
				hal.StreamOp{Kind: hal.StreamReduce, Dst: output + off, Src: src, Src2: slot(st.landing.Addr(), p, root, h), Bytes: l,
					Type: t, Op: op, Kernel: k.kernel, Blocks: k.blocks, Threads: k.threads, Lane: ceLaneOut},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[p].Addr(), root, 2+int(h)), Value: 1, Lane: ceLaneOut})
			src = output + off
		}
	}
	return ops
}

// launchCEReduce queues the host-issued Reduce of call on s; t is when the
// call began (WEFT_PROXY_PROFILE's stages).
func (c *Comm) launchCEReduce(call Call, s hal.Stream, t time.Time) error {
	st, err := c.ceSetup()
	if err != nil {
		return err
	}
	var k cearShape
	if c.cfg.Rank == call.Root {
		kern, err := c.cearReduceKernel(call.Type, call.Op)
		if err != nil {
			return err
		}
		k = cearShape{kernel: kern.fn, blocks: c.cearBlocks(), threads: c.cfg.CEAllReduce.Threads}
	}
	if err := c.launched(s); err != nil {
		return err
	}
	ops := ceReduceOps(st, c.cfg.Rank, c.cfg.NRanks, call.Root, call.Send, call.Recv, call.Count*int64(call.Type.Size()), call.Type, call.Op, k)
	return c.queueCE(call, s, ops, t)
}
