package algorithms

import (
	"fmt"
	"slices"

	"github.com/weftccl/weft/hal/plan"
)

// Broadcast and Reduce move data one way: from the root to every peer, or
// from every peer to the root. Nothing the writers receive in a launch
// tells them that the readers are done, so the LL plans need flow control
// of their own. LL scratch has two halves and launch k writes half k mod 2
// (plan.HeaderOffset), so the writers may run one launch ahead of the
// readers but not two. The readers release each launch's half with one
// signal per block, sent at the start of their next launch (llReleases,
// plan.Op.Deferred); a writer consumes that release at the start of
// launch k + 2, the next one that writes the same half, through a wait
// with two credits (plan.Op.Credits): it passes once the readers have
// started launch k + 1. In steady state the release arrived long before,
// so the wait costs one load of local memory per thread; no launch ends
// with a wait for an acknowledgement (the v2 plans did, one more one-way
// trip, ~1.5 µs, on the root of every Broadcast), and none ends with a
// store over the link either (until 2026-11-26 the readers released at
// their end, and a kernel ends only once its stores are complete: 2×H100,
// Broadcast of 8 B 4.7 → 4.1 µs, Reduce 4.6 → 4.2, NCCL 4.5 and 4.4,
// docs/bench/2026-11-26h-h100x2). A writer block waits for the release of
// every reader block, not only its namesake: blocks split a message by its
// count, so block p's bytes in launch k + 2 may lie in block q's share of
// launch k (TestRootedLLConsecutiveAndReplayed found exactly that with a
// per-block credit). The expected values the waits count against live in
// device memory and advance with each run, so launches replayed from a
// CUDA graph stay in step.
//
// Messages between Config.RootedWideMinBytes and RootedLLMaxBytes take the
// same LL plans with Config.WideLL's blocks: LL moves data as soon as each
// packet lands (the receiver unpacks while the root still writes later
// packets), so a mid-size message pipelines at packet granularity with no
// window handshake. Larger messages take the windowed (HB) plans with
// Config.RootedHB's blocks.

// llCredits are the waits with which a writer of an LL plan starts a
// launch: one per channel of chs on semaphore base s, each two releases
// behind (one per scratch half).
func llCredits(chs []int, s int) []plan.Op {
	ops := acks(chs, s)
	for i := range ops {
		// The readers release at the start of their next run (llReleases).
		ops[i].Credits, ops[i].Deferred = llHalves, true
	}
	return ops
}

// llReleases are a reader's releases of an LL plan's scratch half: one
// signal per channel of chs on semaphore base s, each sent at the start of
// the reader's next run (plan.Op.Deferred, in plan.Group.Before) rather
// than as the last act of the run that read the half, which would hold that
// run's end for the store's round trip over the link. The writers'
// llCredits are unchanged: two runs behind, a release arrives once the
// reader has started the run after the one that read the half.
func llReleases(chs []int, s int) []plan.Op {
	ops := signals(chs, s)
	for i := range ops {
		ops[i].Deferred = true
	}
	return ops
}

// llHalves is the number of halves of an LL plan's scratch (plan.halves):
// how many launches a writer may run ahead of a reader.
const llHalves = 2

// narrowLL is the shape of the LL plans: LLBlocks × Threads.
func (c Config) narrowLL() Shape { return Shape{Blocks: c.LLBlocks, Threads: c.Threads} }

// rooted returns c with the windowed shape of Broadcast and Reduce
// (RootedHB, when set) in place of HB.
func (c Config) rooted() Config {
	if c.RootedHB.Blocks > 0 {
		c.HB = c.RootedHB
	}
	return c
}

// rootedLLBounds returns the largest message of the narrow LL plan of
// Broadcast and Reduce and, when a wide LL plan takes the sizes above it,
// that plan's bound (0: no wide plan). The LL bound is RootedLLMaxBytes
// (for Reduce ReduceLLMaxBytes where set), or CollLLMaxBytes where that
// is unset.
func (c Config) rootedLLBounds(coll Collective) (narrow, wide int64) {
	bound := c.RootedLLMaxBytes
	if coll == Reduce && c.ReduceLLMaxBytes > 0 {
		bound = c.ReduceLLMaxBytes
	}
	if bound <= 0 {
		bound = c.CollLLMaxBytes
	}
	if c.WideLL.Blocks > 0 && c.RootedWideMinBytes > 0 && bound > c.RootedWideMinBytes {
		return c.RootedWideMinBytes, bound
	}
	return bound, 0
}

// BroadcastLL is the LL Broadcast with LLBlocks blocks for messages up to
// the narrow bound of Config.RootedLLMaxBytes (see the comment above):
// the root writes its input as packets into its slot of every peer (and
// into its own output), the others unpack it and release the slot; the
// root takes the release of launch k − 2 at the start of launch k.
func BroadcastLL(c Config, root int) (*plan.Plan, error) {
	narrow, _ := c.rootedLLBounds(Broadcast)
	return broadcastLL(c, root, c.narrowLL(), narrow, false)
}

// BroadcastLLWide is BroadcastLL with Config.RootedWideLL's blocks
// (WideLL's where unset), for messages up to Config.RootedLLMaxBytes.
func BroadcastLLWide(c Config, root int) (*plan.Plan, error) {
	_, wide := c.rootedLLBounds(Broadcast)
	return broadcastLL(c, root, c.rootedWideLL(), wide, true)
}

// rootedWideLL is the shape of the wide LL Broadcast and Reduce:
// Config.RootedWideLL where set, else Config.WideLL.
func (c Config) rootedWideLL() Shape {
	if c.RootedWideLL.Blocks > 0 {
		return c.RootedWideLL
	}
	return c.WideLL
}

func broadcastLL(c Config, root int, s Shape, maxBytes int64, wide bool) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	var ops []plan.Op
	if c.Rank == root {
		dsts := []plan.Ref{plan.L(plan.Output)}
		for ci, ch := range chs {
			dsts = append(dsts, plan.RS(ci, slotOf(root, ch.Peer)))
		}
		ops = cat(llCredits(all, 0), []plan.Op{plan.Transfer(plan.All, 0, dsts, plan.L(plan.Input))})
	} else {
		rc := c.chanOf(root)
		ops = cat(llReleases([]int{rc}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.LS(rc))})
	}
	return c.llPlanShape(fmt.Sprintf("broadcast-r%d", root), s, maxBytes, wide, ops, 1)
}

// BroadcastHB is the windowed Broadcast with Config.RootedHB's shape: the
// root pushes each window into every peer's slot, the others copy it out.
func BroadcastHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	c = c.rooted()
	chs, all := c.channels(), c.others()
	b, d := c.HB.Blocks, c.HB.depth()
	var g plan.Group
	if c.Rank == root {
		dsts := []plan.Ref{plan.L(plan.Output)}
		for ci, ch := range chs {
			dsts = append(dsts, plan.RS(ci, slotOf(root, ch.Peer)))
		}
		g = c.group(1, cat(skip(waits(all, sem(semFree, b)), d, 0), []plan.Op{xfer(dsts, plan.L(plan.Input))}, signals(all, sem(semData, b))), nil)
		g.Before = doneCredits(all, sem(semDone, b))
	} else {
		rc := []int{c.chanOf(root)}
		g = c.group(1, cat(waits(rc, sem(semData, b)), []plan.Op{xfer([]plan.Ref{plan.L(plan.Output)}, plan.LS(rc[0]))},
			skip(signals(rc, sem(semFree, b)), 0, d)), signals(rc, sem(semDone, b)))
	}
	c.HB.pipelined(&g) // one hop: the copy-out overlaps the next window
	return c.deepen(c.hbPlan(fmt.Sprintf("broadcast-r%d", root), len(chs), 3, g))
}

// deepen gives a one-hop windowed plan built with the HB shape's depth
// (its skips) that depth (plan.Plan.WindowDepth), and a name that says
// the depth and pipeline where they are not the defaults.
func (c Config) deepen(p *plan.Plan, err error) (*plan.Plan, error) {
	if err != nil || !p.Windowed() {
		return p, err
	}
	if d := c.HB.depth(); d != 2 {
		p.WindowDepth = d
	}
	p.Name += c.HB.flowName()
	return p, p.Validate()
}

// ReduceLL is the LL Reduce with LLBlocks blocks for messages up to the
// narrow bound of Config.RootedLLMaxBytes: every other rank writes its
// input as packets into its slot of the root's scratch, the root combines
// its input with the slots and releases them; a peer takes the release of
// launch k − 2 at the start of launch k.
func ReduceLL(c Config, root int) (*plan.Plan, error) {
	narrow, _ := c.rootedLLBounds(Reduce)
	return reduceLL(c, root, c.narrowLL(), narrow, false)
}

// ReduceLLWide is ReduceLL with Config.RootedWideLL's blocks (WideLL's
// where unset), for messages up to Config.RootedLLMaxBytes
// (ReduceLLMaxBytes where set).
func ReduceLLWide(c Config, root int) (*plan.Plan, error) {
	_, wide := c.rootedLLBounds(Reduce)
	return reduceLL(c, root, c.rootedWideLL(), wide, true)
}

func reduceLL(c Config, root int, s Shape, maxBytes int64, wide bool) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	all := c.others()
	var ops []plan.Op
	if c.Rank == root {
		srcs := []plan.Ref{plan.L(plan.Input)}
		for _, ci := range all {
			srcs = append(srcs, plan.LS(ci))
		}
		red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, srcs...)
		red.Combine = true
		ops = cat(llReleases(all, 0), []plan.Op{red})
	} else {
		rc := c.chanOf(root)
		ops = cat(llCredits([]int{rc}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(rc, slotOf(c.Rank, root))}, plan.L(plan.Input))})
	}
	return c.llPlanShape(fmt.Sprintf("reduce-r%d", root), s, maxBytes, wide, ops, 1)
}

// ReduceHB is the windowed Reduce with Config.RootedHB's shape: the others
// push each window into their slot of the root's scratch; the root
// combines.
func ReduceHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	c = c.rooted()
	all := c.others()
	b, d := c.HB.Blocks, c.HB.depth()
	var g plan.Group
	if c.Rank == root {
		srcs := []plan.Ref{plan.L(plan.Input)}
		for _, ci := range all {
			srcs = append(srcs, plan.LS(ci))
		}
		red := xfer([]plan.Ref{plan.L(plan.Output)}, srcs...)
		red.Combine = true
		g = c.group(1, cat(waits(all, sem(semData, b)), []plan.Op{red}, skip(signals(all, sem(semFree, b)), 0, d)), signals(all, sem(semDone, b)))
		if c.NRanks == 1 {
			g.Ops, g.After = []plan.Op{red}, nil
		}
	} else {
		rc := []int{c.chanOf(root)}
		g = c.group(1, cat(skip(waits(rc, sem(semFree, b)), d, 0), []plan.Op{xfer([]plan.Ref{plan.RS(rc[0], slotOf(c.Rank, root))}, plan.L(plan.Input))},
			signals(rc, sem(semData, b))), nil)
		g.Before = doneCredits(rc, sem(semDone, b))
	}
	c.HB.pipelined(&g) // one hop: the copy-out overlaps the next window
	return c.deepen(c.hbPlan(fmt.Sprintf("reduce-r%d", root), len(all), 3, g))
}

// rootedPlans are the memory-channel plans of Broadcast or Reduce,
// smallest messages first: the narrow LL plan, the wide one where
// configured, from SplitMinRanks ranks the split LL plan up to
// Config.BroadcastSplitLLMaxBytes or ReduceSplitLLMaxBytes where set, the all-pairs windowed plan, and
// from SplitMinRanks ranks the split windowed plan from
// Config.RootedSplitMinBytes (Config.Algo "ll" keeps the LL plans, "hb"
// the windowed ones).
func rootedPlans(c Config, coll Collective, root int) ([]Choice, error) {
	narrowB, hb := BroadcastLL, BroadcastHB
	wideB := BroadcastLLWide
	if coll == Reduce {
		narrowB, wideB, hb = ReduceLL, ReduceLLWide, ReduceHB
	}
	split := BroadcastSplitHB
	if coll == Reduce {
		split = ReduceSplitHB
	}
	var out []Choice
	narrow, wide := c.rootedLLBounds(coll)
	if narrow > 0 && c.Algo != "hb" {
		p, err := narrowB(c, root)
		if err != nil {
			return nil, err
		}
		out = append(out, Choice{Plan: p, MaxBytes: narrow})
		if wide > 0 {
			if p, err = wideB(c, root); err != nil {
				return nil, err
			}
			out = append(out, Choice{Plan: p, MaxBytes: wide})
		}
		if c.Algo == "ll" {
			return out, nil
		}
	}
	top := max(narrow, wide) // the LL plans' bound
	splitLL, splitLLMax := BroadcastSplitLL, c.BroadcastSplitLLMaxBytes
	if coll == Reduce {
		splitLL, splitLLMax = ReduceSplitLL, c.ReduceSplitLLMaxBytes
	}
	if c.NRanks >= SplitMinRanks && splitLLMax > top && c.Algo != "hb" && c.WideLL.Blocks > 0 {
		p, err := splitLL(c, root)
		if err != nil {
			return nil, err
		}
		out, top = append(out, Choice{Plan: p, MaxBytes: splitLLMax, Staged: coll == Reduce}), splitLLMax
	}
	p, err := hb(c, root)
	if err != nil {
		return nil, err
	}
	if c.NRanks < SplitMinRanks || c.RootedSplitMinBytes <= 0 {
		return append(out, Choice{Plan: p}), nil
	}
	if c.RootedSplitMinBytes-1 > top { // the all-pairs plan between the LL plans and the split one
		out = append(out, Choice{Plan: p, MaxBytes: c.RootedSplitMinBytes - 1})
	}
	if p, err = split(c, root); err != nil {
		return nil, err
	}
	return append(out, Choice{Plan: p, Staged: coll == Reduce}), nil
}

// BroadcastSplitLL is the split Broadcast (see "Split plans" below) with LL
// packets and Config.WideLL's shape, for messages up to
// Config.BroadcastSplitLLMaxBytes: the root writes chunk j as packets into its
// slot of owner j (and its input into its output); owner j unpacks them
// into its output and, packet by packet, into its slot of every other
// owner, which unpack them. No window: the second hop starts on the first
// packets of the first. Flow control as the LL Broadcast's: every reader
// releases each slot it read at the start of its next run, and every
// writer takes two-launch-old releases (llCredits). Errors: an invalid
// rank or root, fewer than SplitMinRanks ranks.
func BroadcastSplitLL(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	if c.NRanks < SplitMinRanks {
		return nil, fmt.Errorf("algorithms: split Broadcast on %d ranks: want at least %d", c.NRanks, SplitMinRanks)
	}
	peers, chunks := c.splitPeers(root)
	var ops []plan.Op
	if c.Rank == root {
		ops = cat(llCredits(peers, 0), c.splitPuts(peers, chunks, plan.L(plan.Input), plan.L(plan.Output)))
	} else {
		rc := c.chanOf(root)
		ops = cat(llReleases(append([]int{rc}, peers...), 0), llCredits(peers, 0),
			[]plan.Op{c.splitForward(peers, splitChunk(c.NRanks, root, c.Rank), rc)}, c.splitUnpacks(peers, chunks))
	}
	// Each slot holds one chunk: the scratch of n−1 chunks, not of n−1 messages.
	return c.llPlanSlots(fmt.Sprintf("broadcast-split-r%d", root), c.WideLL, c.BroadcastSplitLLMaxBytes, true, ops, 1, c.NRanks-1, c.NRanks-1)
}

// ReduceSplitLL is the split Reduce with LL packets and Config.WideLL's
// shape, for messages up to Config.ReduceSplitLLMaxBytes: every rank but
// the root writes chunk j of its input as packets into its slot of owner j
// (owners skip their own chunk); owner j sums its input's chunk with the
// n−2 slots as their packets land and writes the sum as packets into its
// slot of the root, which adds its own input's chunk as it unpacks them
// into its output (the root's input never leaves it). Flow control as
// BroadcastSplitLL's. Staged (the sum reaches the root in two steps): the
// root's transfers divide an integer Avg (plan.Op.PostDiv), a floating
// Avg runs as PreMulSum. Errors: an invalid rank or root, fewer than
// SplitMinRanks ranks.
func ReduceSplitLL(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	if c.NRanks < SplitMinRanks {
		return nil, fmt.Errorf("algorithms: split Reduce on %d ranks: want at least %d", c.NRanks, SplitMinRanks)
	}
	peers, chunks := c.splitPeers(root)
	var ops []plan.Op
	if c.Rank == root {
		ops = cat(llReleases(peers, 0), c.splitFinals(peers, chunks))
	} else {
		rc := c.chanOf(root)
		ops = cat(llReleases(peers, 0), llCredits(append(slices.Clone(peers), rc), 0), c.splitPuts(peers, chunks, plan.L(plan.Input)),
			[]plan.Op{c.splitSum(peers, root)})
	}
	p, err := c.llPlanSlots(fmt.Sprintf("reduce-split-r%d", root), c.WideLL, c.ReduceSplitLLMaxBytes, true, ops, 1, c.NRanks-1, c.NRanks-1)
	if p != nil {
		p.PostDiv = true
	}
	return p, err
}

// splitSum is an owner's reduction in the split Reduce: its input's chunk
// and the other owners' slots (channels peers) summed into its slot of the
// root.
func (c Config) splitSum(peers []int, root int) plan.Op {
	srcs := []plan.Ref{plan.L(plan.Input)}
	for _, ci := range peers {
		srcs = append(srcs, plan.LS(ci))
	}
	return plan.Transfer(splitChunk(c.NRanks, root, c.Rank), c.NRanks-1, []plan.Ref{plan.RS(c.chanOf(root), slotOf(c.Rank, root))}, srcs...)
}

// splitFinals are the split Reduce root's last step: chunk chunks[i] of
// its input added to owner peers[i]'s sum in that owner's slot, into the
// output (plan.Op.PostDiv: the final value).
func (c Config) splitFinals(peers, chunks []int) []plan.Op {
	in, out := plan.L(plan.Input), plan.L(plan.Output)
	var ops []plan.Op
	for i, ci := range peers {
		ops = append(ops, postDiv(plan.Transfer(chunks[i], c.NRanks-1, []plan.Ref{out}, in, plan.LS(ci))))
	}
	return ops
}

// Split plans: Broadcast and Reduce past two ranks (SplitMinRanks). The
// all-pairs windowed plans above make the root send (Broadcast) or receive
// (Reduce) every byte once per peer, so on n ranks the root's link carries
// (n−1)·S and the collective runs at 1/(n−1) of a link: 4×H100 through the
// C ABI, 32–512 MB, 0.34–0.40× NCCL, whose chains carry S on every link
// (docs/bench/2026-11-27d-h100x2, calls 3–4; the chain plans of ring.go
// reached 0.35–0.53× there, each window paying a handshake at every hop).
// The split plans cut the message into n−1 chunks, chunk j owned by the
// j-th rank after the root (splitOwner), and move every chunk in two hops:
//
//   - Broadcast: the root writes chunk j into its slot of owner j (and its
//     whole input into its own output); owner j copies the chunk from that
//     slot into its output and into its slot of every other owner, which
//     copy it out. The root sends S, an owner sends and receives
//     S·(n−2)/(n−1) + S/(n−1) at most S.
//   - Reduce: every rank but the root writes chunk j of its input into
//     its slot of owner j (owners skip their own chunk); owner j sums its
//     own chunk with the n−2 slots and writes the sum into its slot of the
//     root, which adds its own input's chunk into its output as it reads
//     the sum. The root receives S and sends nothing, an owner sends S and
//     receives S·(n−2)/(n−1). (Until 2026-11-27 the root sent its chunks
//     to the owners too, each owner combining all n contributions: S
//     each way on every link, n sources per sum.)
//
// Windows pipeline the two hops (plan.Group.Pipeline cuts a chunk into at
// least PipelineWindows windows once it reaches a window): the owner
// forwards window w while the root writes window w+1. A rank's writing and
// reading run in separate groups (Config.split's shape), as AllGatherHB's,
// with the same data, free (the shape's Depth windows behind: 2, or
// WEFT_ROOTED_SHAPE's dDEPTH) and done handshakes per channel; each (rank,
// channel, semaphore) has one writer. Same cost model
// as the chain's with two hops instead of n−1 (ring.go; van de Geijn's
// scatter–allgather broadcast, Barnett et al., "Interprocessor collective
// communication library (InterCom)", SHPCC 1994).

// SplitMinRanks is the fewest ranks whose Broadcast and Reduce take the
// split plans (on two ranks a split plan is the all-pairs one), from
// Config.RootedSplitMinBytes; smaller messages beyond the LL bounds keep
// the all-pairs windowed plans, whose one hop wins while a chunk is a
// window or less. The GPU default, 4 MiB: on 4×H100 through the C ABI
// (float), at 2 MB Broadcast took 0.98× NCCL either way and Reduce 0.72×
// all-pairs against 0.65× split; at 8 MB the split plans led, 0.82×
// against 0.50× and 0.58× against 0.46× (docs/bench/2026-11-27d-h100x2,
// call 5).
const SplitMinRanks = 3

// split returns c with the shape of the split plans: Config.RootedHB's
// threads, unroll and window, its blocks shared by the plan's two groups
// (a rank's groups must all be resident at once: an owner's forwarding
// blocks wait for the other owners' receiving ones). On 4×H100 64 × 512
// threads per group took the split plans from 0.70–0.73× NCCL with the
// HB shape's 32 × 1024 to 0.82–0.85× (Broadcast, 32–512 MB; call 5).
func (c Config) split() Config {
	if r := c.RootedHB; r.Blocks > 0 {
		c.HB = Shape{Blocks: (r.Blocks + 1) / 2, Threads: r.Threads, Unroll: r.Unroll, Window: r.Window, Depth: r.Depth, Pipeline: r.Pipeline, PipelineFrom: r.PipelineFrom}
	}
	return c
}

// splitBroadcast is split's shape for the split Broadcast, whose root runs
// one group per owner (splitPutGroups): each group's blocks cut so that the
// root's n−1 groups hold no more than RootedHB's blocks between them (the
// split shape's two groups per owner hold as many), since the windowed
// plans' groups must all be resident at once and a block of 512 threads
// may be the only one its multiprocessor holds: on 4×H100 the root's 3 ×
// 64 blocks were refused at Prepare for the bfloat16 kernel (call 7).
// Measured on 3 and 4 ranks only: past splitPerOwnerMaxRanks the root
// keeps one group (its puts in turn) and the split shape's blocks.
func (c Config) splitBroadcast() Config {
	c = c.split()
	if r := c.RootedHB; r.Blocks > 0 && c.NRanks > 1 && c.NRanks <= splitPerOwnerMaxRanks {
		c.HB.Blocks = max(1, min(c.HB.Blocks, r.Blocks/(c.NRanks-1)))
	}
	return c
}

// splitPerOwnerMaxRanks is the most ranks whose split Broadcast root runs
// a group per owner (splitPutGroups): 4×H100 through the C ABI (docs/bench/
// 2026-11-27h-h100x4, call 8, float, two alternations, NCCL beside twice),
// 4 ranks 32–512 MB 0.81–0.86× NCCL → 0.90–0.94 (42 blocks a group; with
// 64 a group, call 7, 0.84–0.93), 3 ranks 16–512 MB 0.89–0.97 → 0.98–1.01.
// Past 4 the groups would shrink below 32 blocks: not measured.
const splitPerOwnerMaxRanks = 4

// splitOwner returns the rank that owns chunk j of a split plan rooted at
// root (the j-th rank after it), and splitChunk the chunk rank owns (−1
// for the root).
func splitOwner(n, root, j int) int { return mod(root+1+j, n) }

func splitChunk(n, root, rank int) int {
	if rank == root {
		return -1
	}
	return mod(rank-root-1, n)
}

// splitPeers are the channel indices of this rank to the owners other
// than itself, with the chunk each owns, in the order of the chunks after
// the rank's own (the root's position is n−1, after the last chunk): the
// rotation of Config.rotated, so that the first puts of the ranks go to
// different owners rather than all to owner 0.
func (c Config) splitPeers(root int) (chs, chunks []int) {
	n := c.NRanks
	pos := splitChunk(n, root, c.Rank)
	if pos < 0 {
		pos = n - 1
	}
	for s := 1; s < n; s++ {
		if j := mod(pos+s, n); j != n-1 {
			chs, chunks = append(chs, c.chanOf(splitOwner(n, root, j))), append(chunks, j)
		}
	}
	return chs, chunks
}

// splitPuts are the transfers of chunk chunks[i] of src into this rank's
// slot of the owner on channel peers[i] (splitPeers), each also into the
// extra destinations (the root's own output, for Broadcast).
func (c Config) splitPuts(peers, chunks []int, src plan.Ref, extra ...plan.Ref) []plan.Op {
	chs, k := c.channels(), c.NRanks-1
	var ops []plan.Op
	for i, ci := range peers {
		ops = append(ops, plan.Transfer(chunks[i], k, append(slices.Clone(extra), plan.RS(ci, slotOf(c.Rank, chs[ci].Peer))), src))
	}
	return ops
}

// splitForward is an owner's forwarding of its chunk own from the slot of
// channel from into its output and its slot of every other owner (peers).
func (c Config) splitForward(peers []int, own, from int) plan.Op {
	chs, dsts := c.channels(), []plan.Ref{plan.L(plan.Output)}
	for _, ci := range peers {
		dsts = append(dsts, plan.RS(ci, slotOf(c.Rank, chs[ci].Peer)))
	}
	return plan.Transfer(own, c.NRanks-1, dsts, plan.LS(from))
}

// splitUnpacks are the copies of chunk chunks[i] out of the slot of
// channel peers[i] into the output.
func (c Config) splitUnpacks(peers, chunks []int) []plan.Op {
	var ops []plan.Op
	for i, ci := range peers {
		ops = append(ops, plan.Transfer(chunks[i], c.NRanks-1, []plan.Ref{plan.L(plan.Output)}, plan.LS(ci)))
	}
	return ops
}

// BroadcastSplitHB is the split windowed Broadcast (see above) with the
// split shape (Config.split), for 3 to AllPairsMaxRanks ranks. Errors: an
// invalid rank, root or shape.
func BroadcastSplitHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	c = c.splitBroadcast()
	n, b, d := c.NRanks, c.HB.Blocks, c.HB.depth()
	k := n - 1 // chunks
	peers, chunks := c.splitPeers(root)
	name := fmt.Sprintf("broadcast-split-r%d", root)
	if c.Rank == root {
		in, out := plan.L(plan.Input), plan.L(plan.Output)
		var sends []plan.Group
		if n <= splitPerOwnerMaxRanks {
			sends = c.splitPutGroups(peers, chunks, in, out)
		} else {
			sends = []plan.Group{c.splitPutGroup(peers, chunks, in, out)}
		}
		for i := range sends {
			c.HB.pipelined(&sends[i])
		}
		return c.deepen(c.hbPlan(name, n-1, 3, sends...))
	}
	rc := c.chanOf(root)
	// Forward: the root's window of the own chunk into the output and
	// every other owner's slot; release the root's slot; done to it.
	send := c.group(k, cat([]plan.Op{plan.Wait(rc, sem(semData, b))}, skip(waits(peers, sem(semFree, b)), d, 0),
		[]plan.Op{c.splitForward(peers, splitChunk(n, root, c.Rank), rc)}, signals(peers, sem(semData, b)),
		skip(signals([]int{rc}, sem(semFree, b)), 0, d)), signals([]int{rc}, sem(semDone, b)))
	send.Before = doneCredits(peers, sem(semDone, b))
	recv := c.splitCopyOut(peers, c.splitUnpacks(peers, chunks), d) // the other owners' chunks
	c.HB.pipelined(&send, &recv)
	return c.deepen(c.hbPlan(name, n-1, 3, send, recv))
}

// ReduceSplitHB is the split windowed Reduce (see above) with the split
// shape (Config.split), for 3 to AllPairsMaxRanks ranks: the owners sum
// the chunks of every rank but the root, which adds its own input as it
// copies the sums out (ReduceSplitLL; Staged, PostDiv). Errors: an invalid
// rank, root or shape.
func ReduceSplitHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateRootAllPairs(root); err != nil {
		return nil, err
	}
	c = c.split()
	n, b, d := c.NRanks, c.HB.Blocks, c.HB.depth()
	k := n - 1
	peers, chunks := c.splitPeers(root) // the owners this rank writes to (the root: reads from)
	name := fmt.Sprintf("reduce-split-r%d", root)
	var groups []plan.Group
	if c.Rank == root {
		recv := c.splitCopyOut(peers, c.splitFinals(peers, chunks), d)
		c.HB.pipelined(&recv)
		groups = []plan.Group{recv}
	} else {
		// One send group, the puts in turn: as one group per owner (the
		// split Broadcast's root, splitPutGroups) 3 ranks gained 0.01–0.04
		// at 16–512 MB and 4 ranks could not hold the groups' 192 blocks
		// of 512 threads resident (docs/bench/2026-11-27h-h100x4, call 7);
		// with every group cut to RootedHB/n blocks so that they fit, both
		// lost 0.02–0.09 from 16 MB (call 9).
		send := c.splitPutGroup(peers, chunks, plan.L(plan.Input))
		rc := c.chanOf(root)
		recv := c.group(k, cat(waits(peers, sem(semData, b)), skip([]plan.Op{plan.Wait(rc, sem(semFree, b))}, d, 0), []plan.Op{c.splitSum(peers, root)},
			[]plan.Op{plan.Signal(rc, sem(semData, b))}, skip(signals(peers, sem(semFree, b)), 0, d)), signals(peers, sem(semDone, b)))
		recv.Before = doneCredits([]int{rc}, sem(semDone, b))
		c.HB.pipelined(&send, &recv)
		groups = []plan.Group{send, recv}
	}
	p, err := c.deepen(c.hbPlan(name, n-1, 3, groups...))
	if p != nil {
		p.PostDiv = true
	}
	return p, err
}

// splitPutGroups are the split Broadcast's first hop from the root: one
// windowed group per owner of channel peers[i], each of the shape's
// blocks, which waits for that owner's slot (depth d windows behind),
// writes chunk chunks[i] of src into it and into the extra destinations
// (the root's own output) and signals it. In one group the puts ran one
// after the other on all its blocks, so the root wrote to one owner at a
// time, whose NVLink ingress then also took the other owners' second hop
// while the rest idled; as groups, the puts to every owner run at once.
// A group per owner has the blocks of the owner's reading group, as
// per-block semaphores require (the writer's block i signals its reader's
// block i): splitBroadcast sizes them.
func (c Config) splitPutGroups(peers, chunks []int, src plan.Ref, extra ...plan.Ref) []plan.Group {
	gs := make([]plan.Group, len(peers))
	for i := range peers {
		gs[i] = c.splitPutGroup(peers[i:i+1], chunks[i:i+1], src, extra...)
	}
	return gs
}

// splitPutGroup is a split plan's first hop from this rank as one
// windowed group: per window it waits for the slot of each owner of
// channels peers (the shape's depth windows behind), writes chunk
// chunks[i] of src into the slot of owner peers[i] (and into the extra
// destinations) one after the other, and signals them; each launch starts
// with the owners' "done" of the one before.
func (c Config) splitPutGroup(peers, chunks []int, src plan.Ref, extra ...plan.Ref) plan.Group {
	b, d, k := c.HB.Blocks, c.HB.depth(), c.NRanks-1
	g := c.group(k, cat(skip(waits(peers, sem(semFree, b)), d, 0), c.splitPuts(peers, chunks, src, extra...), signals(peers, sem(semData, b))), nil)
	g.Before = doneCredits(peers, sem(semDone, b))
	return g
}

// splitCopyOut is a split plan's receiving group: per window, wait for the
// data of channels chs, run copies (the chunks out of their slots into the
// output: splitUnpacks, or the Reduce root's splitFinals), release the
// slots (depth d windows behind), and send done at the end.
func (c Config) splitCopyOut(chs []int, copies []plan.Op, d int) plan.Group {
	b, k := c.HB.Blocks, c.NRanks-1
	return c.group(k, cat(waits(chs, sem(semData, b)), copies, skip(signals(chs, sem(semFree, b)), 0, d)), signals(chs, sem(semDone, b)))
}
