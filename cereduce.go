package weft

import (
	"fmt"
	"slices"
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
//
// On two ranks with the root's output apart from its input, the landing
// slots and their free words go: the other rank pushes straight into the
// root's output, exported at the call as the copy-engine point-to-point
// path exports a receive buffer (p2pce.go: the same three-step exchange,
// the same refusals, so both ranks always agree on the form), and the
// root reduces each landed window in place there, from
// Config.CEReduceDirectMinBytes. Every window costs the pusher about 5 µs
// between copies (the slots' 32 MiB windows: 369 GB/s at 1 GB where a
// lone push reaches 395.6); without slots the windows can be few and
// large, shrinking towards the end (ceRedSchedule). Its words (cered:
// ready, then one per window, each written once per call by the pusher
// and reset by the root's wait) let the pusher run ahead of the root's
// reductions by any number of windows; ready, written by the root at the
// call, keeps a push out of an output the root's stream still uses, which
// is also why the slots stay ahead below the bound: with them a call's
// first windows land while the root still reduces the previous call's.

// ceReduceName is what PlanName says of a Reduce the executor serves.
const ceReduceName = "reduce-ce-host-issued"

// ceReduceServes reports whether the copy-engine Reduce serves call: a
// built-in operator other than Avg (Sum, Prod, Max, Min) where the
// host-issued executors can run, under WEFT_ALGO=ce or, with no family
// forced, from Config.CEReduceMinBytes on two ranks. Past two, every
// rank's engines push the whole message into the root, whose link then
// carries n−1 messages, as the all-pairs SM plan's did (4×H100: 0.34×
// NCCL at 128–512 MB), where the split SM plan carries one
// (algorithms.ReduceSplitHB; docs/bench/2026-11-27d-h100x2). hal/nvlink's
// default bound is 0 past two ranks already; this keeps an explicit
// WEFT_CE_REDUCE_MIN_BYTES from choosing it there.
func (c *Comm) ceReduceServes(call Call) bool {
	switch c.ceReduction(call) {
	case ceForced:
		return true
	case ceBySize:
		b := call.Count * int64(call.Type.Size())
		return c.cfg.NRanks == 2 && c.cfg.CEReduceMinBytes > 0 && b >= c.cfg.CEReduceMinBytes
	}
	return false
}

// ceReduceOps returns the stream operations of one Reduce of bytes bytes
// to root from input into output (the root's; device addresses) for rank
// me of n (see the comment at the top of this file); k is the reduction
// kernel for the call's type and operator.
func ceReduceOps(st *hostIssued, me, n, root int, input, output uint64, bytes int64, t plan.DataType, op plan.RedOp, k cearShape) []hal.StreamOp {
	W := st.window
	per := ceEvenWindow(W, bytes)
	flag := func(base uint64, q, word int) uint64 { return base + uint64(st.flag(q, word)) }
	slot := func(base uint64, q, p int, h int64) uint64 {
		return base + uint64((h*int64(n-1)+ceSlot(q, p))*W)
	}
	mine := st.flags.Addr()
	var ops []hal.StreamOp
	for w := int64(0); w*per < bytes; w++ {
		h := w % 2
		off := uint64(w * per)
		l := min(per, bytes-w*per)
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

// ceEvenWindow is the window of a Reduce of bytes bytes through landing
// slots of window bytes: an even number of windows (one where one slot
// holds the message), the fewest the slots allow, of equal size (a whole
// number of ceRedAlign; the last takes what is left). Windows of the
// slots' size lost where their number was odd: on 2×H100 a 96 MB Reduce
// (three of 32 MiB) took NCCL's time × 0.87 where 64 MB (two) took 1.08
// and 128 MB (four) 1.04 (docs/bench/2026-11-27j-h100x2, calls 5–6).
func ceEvenWindow(window, bytes int64) int64 {
	if bytes <= window {
		return window
	}
	nwin := (bytes + window - 1) / window
	nwin += nwin % 2
	return min(window, (bytes/nwin+ceRedAlign-1)/ceRedAlign*ceRedAlign)
}

// The flag words per rank of the Reduce into the root's output: on the
// pushing rank, ready of the root (the root's stream has reached the
// call); on the root, one word per window of the pusher's (it has landed).
const (
	ceRedReady  = 0
	ceRedWindow = 1 // the first window's word
	// ceRedWindows is the most windows of one call (ceRedSchedule).
	ceRedWindows = 64
)

// ceRedAlign is the alignment of a window of the Reduce into the root's
// output (bytes): a whole number of elements of every type.
const ceRedAlign = 4096

// launchCEReduce queues the host-issued Reduce of call on s; t is when the
// call began (WEFT_PROXY_PROFILE's stages).
func (c *Comm) launchCEReduce(call Call, s hal.Stream, t time.Time) error {
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
	bytes := call.Count * int64(call.Type.Size())
	if ops, err := c.ceReduceDirect(call, bytes, k, s); err != nil || ops != nil {
		if err != nil {
			return err
		}
		c.ceRedDirect.Add(1)
		return c.queueCE(call, s, ops, t)
	}
	st, err := c.ceSetup()
	if err != nil {
		return err
	}
	ops := ceReduceOps(st, c.cfg.Rank, c.cfg.NRanks, call.Root, call.Send, call.Recv, bytes, call.Type, call.Op, k)
	return c.queueCE(call, s, ops, t)
}

// ceReduceDirect returns the stream operations of call as a Reduce into
// the root's output (see the comment at the top of this file), or none
// where the ranks agreed on the landing slots: more than two ranks, an
// empty message, an output in place or one the root cannot export or its
// peer cannot map.
func (c *Comm) ceReduceDirect(call Call, bytes int64, k cearShape, s hal.Stream) ([]hal.StreamOp, error) {
	if c.cfg.NRanks != 2 || bytes == 0 || bytes < c.cfg.CEReduceDirectMinBytes {
		return nil, nil
	}
	st, err := c.hostIssuedSetup(&c.cered, func() hostIssuedSpec {
		return hostIssuedSpec{what: "copy-engine Reduce into the root's output", window: ceWindow, words: ceRedWindow + ceRedWindows}
	})
	if err != nil {
		return nil, err
	}
	me, root := c.cfg.Rank, call.Root
	peer := 1 - me
	// The root's input joins its group as a send to itself: in place it
	// overlaps the output, so the root refuses (overlapsGroup).
	group := []P2P{{Peer: peer, Send: true, Buf: call.Send, Bytes: bytes}}
	if me == root {
		group = []P2P{{Peer: peer, Buf: call.Recv, Bytes: bytes}, {Peer: me, Send: true, Buf: call.Send, Bytes: bytes}}
	}
	keep, err := c.ceP2PExchange([][]P2P{group}, bytes, overlapsGroup, s)
	if err != nil {
		return nil, fmt.Errorf("weft: Reduce to rank %d on rank %d: the root's output for copy engines: %w", root, me, err)
	}
	if len(keep) == 0 {
		return nil, nil
	}
	return ceReduceDirectOps(st, me, root, call.Send, call.Recv, keep[0].dst, bytes, call.Type, call.Op, k), nil
}

// ceReduceDirectOps returns the stream operations of one Reduce of bytes
// bytes into the root's output for rank me of two: the root reduces input
// into output window by window as the windows land there; the other rank
// pushes its input into dst, the root's output mapped here, once the root
// is ready, window after window (ceRedWindows).
func ceReduceDirectOps(st *hostIssued, me, root int, input, output, dst uint64, bytes int64, t plan.DataType, op plan.RedOp, k cearShape) []hal.StreamOp {
	flag := func(base uint64, q, word int) uint64 { return base + uint64(st.flag(q, word)) }
	peer, mine := 1-me, st.flags.Addr()
	var ops []hal.StreamOp
	if me == root {
		ops = append(ops, hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[peer].Addr(), me, ceRedReady), Value: 1})
	} else {
		ready := flag(mine, root, ceRedReady)
		ops = append(ops, hal.StreamOp{Kind: hal.StreamWaitEq, Dst: ready, Value: 1}, hal.StreamOp{Kind: hal.StreamWrite, Dst: ready, Value: 0})
	}
	off := int64(0)
	for w, l := range ceRedSchedule(st.window, bytes) {
		at := uint64(off)
		off += l
		if me != root {
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamCopy, Dst: dst + at, Src: input + at, Bytes: l},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[root].Addr(), me, ceRedWindow+w), Value: 1})
			continue
		}
		landed := flag(mine, peer, ceRedWindow+w)
		ops = append(ops,
			hal.StreamOp{Kind: hal.StreamWaitEq, Dst: landed, Value: 1},
			hal.StreamOp{Kind: hal.StreamWrite, Dst: landed, Value: 0},
			hal.StreamOp{Kind: hal.StreamReduce, Dst: output + at, Src: input + at, Src2: output + at, Bytes: l,
				Type: t, Op: op, Kernel: k.kernel, Blocks: k.blocks, Threads: k.threads})
	}
	return ops
}

// ceRedSchedule returns the window sizes (bytes, in order) of a Reduce of
// bytes bytes into the root's output whose executor's window is window:
// from the end, window/4 (8 MiB on a GPU), then each window 1.5 times the
// one after it up to 8 × window, the first taking what is left (at most
// 1.5 times the window after it; all of it at ceRedWindows). Each window
// costs the pusher about 5 µs between copies (its flag write and the next
// copy's start: uniform windows of 8 MiB took NCCL's time × 0.84 at 1 GB,
// of 32 MiB 0.98, of 64 MiB 1.00), and the root's reduction of the last
// window is not overlapped (~1.1 µs per MiB): few windows, the last small.
// Each window is at least 2/3 of the one before, so the root's reduction
// of a window (~1.1 µs per MiB) ends before the next has landed (~2.7 µs
// per MiB). Measured on 2×H100 (docs/bench/2026-11-27c-h100x2, calls 2–4):
// shrinking by 2 instead of 1.5 lost 2% at 1 GB, by 1.25–1.3 1%; a last
// window of 2–8 MiB or a largest of 128–512 MiB changed it by ≤ 0.7%.
func ceRedSchedule(window, bytes int64) []int64 {
	last, most := window/4, 8*window
	// Every window but the last a whole number of ceRedAlign, so that
	// each starts as aligned as the buffers; the last takes the rest.
	aligned := bytes / ceRedAlign * ceRedAlign
	var back []int64 // from the end
	left, next := aligned, last
	for left > 0 {
		l := next
		if left <= next+next/2 || len(back) == ceRedWindows-1 {
			l = left
		}
		back = append(back, l)
		left -= l
		next = min(most, (next+next/2+ceRedAlign-1)/ceRedAlign*ceRedAlign)
	}
	if len(back) == 0 {
		return []int64{bytes}
	}
	back[0] += bytes - aligned
	slices.Reverse(back)
	return back
}
