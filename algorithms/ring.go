package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Rings and chains: every rank sends to rank+1 and receives from rank−1
// (mod n), so a rank has two channels (one for 2 ranks) whatever n is.
//
// Chunks and steps. AllReduce cuts the count into n chunks (plan.ChunkRange)
// and runs 2(n−1) steps: in reduce-scatter step s (0 ≤ s ≤ n−2), rank r
// sends chunk (r−1−s) mod n to rank r+1, its own input at s = 0 and, from
// s = 1, its input reduced with what it received at step s−1; at step n−1
// it reduces chunk r, now complete, into its output and starts the
// all-gather, in which step t forwards chunk (r−t) mod n. AllGather and
// ReduceScatter run the same n−1 steps over whole segments (one per rank:
// plan.Ref.Seg). Broadcast and Reduce are chains: the root sends to
// root+1, which forwards to root+2, …, or root+1 starts and root−1 delivers
// to the root; each intermediate rank forwards (or reduces and forwards)
// what it has received while more arrives, so the chain pipelines.
//
// LL forms: each step writes LL packets into a scratch slot of rank+1, at
// the element range of the step's chunk; a rank reads a slot as packets
// land, so a step starts on the first packets of the previous one (the
// steps pipeline at packet granularity, across the LLBlocks blocks).
// AllReduce needs two slots (the reduce-scatter and the all-gather each
// receive every chunk at most once), AllGather and ReduceScatter one per
// step (n−1: a step moves a whole segment), chains one. A rank's launch
// k+1 ends only after data that every rank sent in launch k+1 reached it
// (AllReduce, AllGather, ReduceScatter), so no rank writes a scratch half
// (launch k+2) before its reader has finished launch k: those need no
// flow control. Chains do: each writer takes its reader's release with a
// two-credit wait (rooted.go).
//
// HB forms: windowed groups (plan.Group.Window) of Config.HB's blocks. In
// window w, every step moves window w of its chunk through a scratch slot
// of its own (AllReduce 2(n−1) slots, the others n−1, chains 1); one data
// semaphore per block carries every step, each wait counting the sender's
// signals in order. A rank releases its slots with one "free" signal per
// window, which its sender awaits two windows later (the slots alternate
// between two halves), and a "done" at the end, after which the next
// launch may start in either half. Windows shrink with the slot count
// (Config.boundedWindow) so that scratch stays bounded; the B blocks of a
// group are B independent rings over the parts of each window, which keep
// the links busy while another block waits.
//
// Cost (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for
// clusters of workstations", JPDC 2009; NCCL's docs/PERFORMANCE.md for the
// bus-bandwidth factors): AllReduce 2(n−1)·α + 2(n−1)/n·S/B, AllGather and
// ReduceScatter (n−1)·α + (n−1)/n·n·S/B for segments of S bytes, a chain
// (n−1+W)·(α + S/(W·B)) for S bytes in W windows.

// ring returns the channels of a ring rank, [rank−1, rank+1] (one channel
// for 2 ranks), and the indices of the channels to rank−1 and rank+1.
func (c Config) ring() (chans []plan.Channel, prev, next int) {
	s := peerSet{}
	prev = s.ch(mod(c.Rank-1, c.NRanks))
	next = s.ch(mod(c.Rank+1, c.NRanks))
	return s.chans, prev, next
}

// ringHandshakes are the flow-control ops of a windowed ring group: the
// wait for rank+1's release of the half this window writes (from window
// 2), the release of this rank's slots to rank−1 (until 2 windows before
// the end), and the closing done signal and wait.
func (c Config) ringHandshakes(prev, next int) (waitFree, signalFree plan.Op, after []plan.Op) {
	b := c.HB.Blocks
	waitFree = plan.Wait(next, sem(ringFree, b))
	waitFree.SkipFirst = 2
	signalFree = plan.Signal(prev, sem(ringFree, b))
	signalFree.SkipLast = 2
	return waitFree, signalFree, []plan.Op{plan.Signal(prev, sem(ringDone, b)), plan.Wait(next, sem(ringDone, b))}
}

// RingAllReduceLL builds the ring AllReduce with LL packets for one rank:
// 2(n−1) steps over n chunks (see the comment above), channels to rank−1
// and rank+1, two scratch slots, LLBlocks × Threads, serving messages up
// to boundedLLMaxBytes(2) (S bytes of count × element size need 2 × 2 ×
// S × 2 bytes of scratch with LL16). Not Avg (partial sums are staged).
// Errors: an invalid rank or shape.
func RingAllReduceLL(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_reduce-ring", 0, 0)
	}
	chans, _, next := c.ring()
	// Two slots: the reduce-scatter steps use slot 0, the all-gather steps 1.
	steps := c.ringAllReduceSteps(next, func(step int) int {
		if step >= c.NRanks-1 {
			return 1
		}
		return 0
	})
	return c.ringLL("all_reduce-ring", chans, c.NRanks, 2, c.boundedLLMaxBytes(2), steps)
}

// RingAllReduceHB builds the windowed ring AllReduce for one rank: in each
// window, the 2(n−1) steps of the ring over window w of each of the n
// chunks, each step through its own scratch slot of rank+1 (2(n−1) slots
// per half, windows of Config.boundedWindow(2(n−1)) bytes), Config.HB's
// blocks and threads; 3 semaphores per block. Scratch: 2 × 2(n−1) ×
// window bytes, whatever the message size. Not Avg. Errors: an invalid
// rank or shape.
func RingAllReduceHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_reduce-ring", 0, 0)
	}
	chans, prev, next := c.ring()
	steps := c.ringAllReduceSteps(next, func(step int) int { return step })
	return c.ringHB("all_reduce-ring", chans, prev, next, c.NRanks, 2*(c.NRanks-1), steps)
}

// ringAllReduceSteps are the 2(n−1) steps of the ring AllReduce on this
// rank, over n chunks: n−1 reduce-scatter steps (step s sends chunk r−1−s,
// from s = 1 reduced with the partial sum received), the step that
// completes chunk r into the output and forwards it, and n−2 all-gather
// steps forwarding what arrives. slot(step) is the scratch slot of rank+1
// that step writes (and, one step later, this rank reads).
func (c Config) ringAllReduceSteps(next int, slot func(step int) int) []ringStep {
	n, r := c.NRanks, c.Rank
	in, out := plan.L(plan.Input), plan.L(plan.Output)
	steps := []ringStep{{mod(r-1, n), []plan.Ref{plan.RS(next, slot(0))}, []plan.Ref{in}}}
	for s := 1; s <= n-2; s++ {
		steps = append(steps, ringStep{mod(r-1-s, n), []plan.Ref{plan.RS(next, slot(s))}, []plan.Ref{in, plan.LS(slot(s - 1))}})
	}
	steps = append(steps, ringStep{mod(r, n), []plan.Ref{out, plan.RS(next, slot(n-1))}, []plan.Ref{in, plan.LS(slot(n - 2))}})
	for t := 1; t <= n-2; t++ {
		steps = append(steps, ringStep{mod(r-t, n), []plan.Ref{out, plan.RS(next, slot(n-1+t))}, []plan.Ref{plan.LS(slot(n - 2 + t))}})
	}
	return append(steps, ringStep{mod(r+1, n), []plan.Ref{out}, []plan.Ref{plan.LS(slot(2*n - 3))}})
}

// RingAllGatherLL builds the ring AllGather with LL packets: n−1 steps,
// step t forwarding segment (r−t) mod n to rank+1 through slot t of its
// scratch (n−1 slots) and unpacking it into that output segment; segments
// (count × element size) up to boundedLLMaxBytes(n−1). Errors: an invalid
// rank or shape.
func RingAllGatherLL(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_gather-ring", 0, 0)
	}
	chans, _, next := c.ring()
	n := c.NRanks
	return c.ringLL("all_gather-ring", chans, 0, n-1, c.boundedLLMaxBytes(n-1), c.ringAllGatherSteps(next))
}

// RingAllGatherHB builds the windowed ring AllGather: in each window, n−1
// steps forwarding window w of a segment through slot t of rank+1 (n−1
// slots, windows of boundedWindow(n−1) bytes). Errors: an invalid rank or
// shape.
func RingAllGatherHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_gather-ring", 0, 0)
	}
	chans, prev, next := c.ring()
	return c.ringHB("all_gather-ring", chans, prev, next, 0, c.NRanks-1, c.ringAllGatherSteps(next))
}

// ringAllGatherSteps: step t forwards segment r−t (its own input at t = 0)
// through slot t of rank+1 and keeps it in that output segment; the last
// step only keeps segment r+1.
func (c Config) ringAllGatherSteps(next int) []ringStep {
	n, r := c.NRanks, c.Rank
	out := func(seg int) plan.Ref { return plan.L(plan.Output).At(mod(seg, n)) }
	steps := []ringStep{{-1, []plan.Ref{out(r), plan.RS(next, 0)}, []plan.Ref{plan.L(plan.Input)}}}
	for t := 1; t <= n-2; t++ {
		steps = append(steps, ringStep{-1, []plan.Ref{out(r - t), plan.RS(next, t)}, []plan.Ref{plan.LS(t - 1)}})
	}
	return append(steps, ringStep{-1, []plan.Ref{out(r + 1)}, []plan.Ref{plan.LS(n - 2)}})
}

// RingReduceScatterLL builds the ring ReduceScatter with LL packets: step s
// sends input segment (r−1−s) mod n, reduced from s = 1 with the partial
// sum received in slot s−1, to slot s of rank+1; the last step reduces
// segment r into the output. Segments up to boundedLLMaxBytes(n−1). Not
// Avg. Errors: an invalid rank or shape.
func RingReduceScatterLL(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("reduce_scatter-ring", 0, 0)
	}
	chans, _, next := c.ring()
	n := c.NRanks
	return c.ringLL("reduce_scatter-ring", chans, 0, n-1, c.boundedLLMaxBytes(n-1), c.ringReduceScatterSteps(next))
}

// RingReduceScatterHB builds the windowed ring ReduceScatter (the steps of
// RingReduceScatterLL per window, n−1 slots). Not Avg. Errors: an invalid
// rank or shape.
func RingReduceScatterHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("reduce_scatter-ring", 0, 0)
	}
	chans, prev, next := c.ring()
	return c.ringHB("reduce_scatter-ring", chans, prev, next, 0, c.NRanks-1, c.ringReduceScatterSteps(next))
}

// ringReduceScatterSteps: step s sends input segment r−1−s, reduced from
// s = 1 with the partial sum received in slot s−1, to slot s of rank+1;
// the last step reduces segment r into the output.
func (c Config) ringReduceScatterSteps(next int) []ringStep {
	n, r := c.NRanks, c.Rank
	in := func(seg int) plan.Ref { return plan.L(plan.Input).At(mod(seg, n)) }
	steps := []ringStep{{-1, []plan.Ref{plan.RS(next, 0)}, []plan.Ref{in(r - 1)}}}
	for s := 1; s <= n-2; s++ {
		steps = append(steps, ringStep{-1, []plan.Ref{plan.RS(next, s)}, []plan.Ref{in(r - 1 - s), plan.LS(s - 1)}})
	}
	return append(steps, ringStep{-1, []plan.Ref{plan.L(plan.Output)}, []plan.Ref{in(r), plan.LS(n - 2)}})
}

// ringStep is one step of a ring plan: chunk (0 to the plan's chunks − 1;
// −1: the whole range) moved from srcs to dsts. The remote destination and the
// local source name scratch slots.
type ringStep struct {
	chunk      int
	dsts, srcs []plan.Ref
}

// transfer is the step's transfer in a plan of nChunks chunks (0: the whole
// range, as windowed plans take it, in chunk 0 of 1; LL plans, in plan.All).
func (s ringStep) transfer(nChunks int, ll bool) plan.Op {
	switch {
	case s.chunk >= 0:
		return plan.Transfer(s.chunk, nChunks, s.dsts, s.srcs...)
	case ll:
		return plan.Transfer(plan.All, 0, s.dsts, s.srcs...)
	}
	return xfer(s.dsts, s.srcs...)
}

// ringLL is a ring plan with LL packets: the steps in order (a step reads
// what the one before it received; LL flags are the waits), slots scratch
// slots, messages up to maxBytes.
func (c Config) ringLL(name string, chans []plan.Channel, nChunks, slots int, maxBytes int64, steps []ringStep) (*plan.Plan, error) {
	ops := make([]plan.Op, len(steps))
	for i, s := range steps {
		ops[i] = s.transfer(nChunks, true)
	}
	return c.boundedLL(name, chans, slots, 0, maxBytes, ops)
}

// ringHB is the windowed form over slots scratch slots: in each window the
// first step waits until rank+1 has freed its slots, every later step
// waits for the data of rank−1 before it reads, every step but the last
// signals rank+1, and the last frees this rank's slots for rank−1
// (ringHandshakes).
func (c Config) ringHB(name string, chans []plan.Channel, prev, next, nChunks, slots int, steps []ringStep) (*plan.Plan, error) {
	b := c.HB.Blocks
	waitFree, signalFree, after := c.ringHandshakes(prev, next)
	sig, wait := plan.Signal(next, sem(ringData, b)), plan.Wait(prev, sem(ringData, b))
	ops := make([]plan.Op, 0, 3*len(steps))
	for i, s := range steps {
		if i == 0 {
			ops = append(ops, waitFree)
		} else {
			ops = append(ops, wait)
		}
		ops = append(ops, s.transfer(nChunks, false))
		if i == len(steps)-1 {
			ops = append(ops, signalFree)
		} else {
			ops = append(ops, sig)
		}
	}
	return c.boundedHB(name, chans, c.boundedWindow(slots), slots, ringSems, plan.Group{NChunks: max(nChunks, 1), Ops: ops, After: after})
}

// chainRole is a rank's place in a chain: whether it receives from rank−1
// and whether it sends to rank+1, with the channel indices (−1 where not).
// A chain starts at rank first and ends at first−1 (mod n).
func (c Config) chainRole(first int) (chans []plan.Channel, prev, next int) {
	pos := mod(c.Rank-first, c.NRanks)
	s := peerSet{}
	prev, next = -1, -1
	if pos > 0 {
		prev = s.ch(mod(c.Rank-1, c.NRanks))
	}
	if pos < c.NRanks-1 {
		next = s.ch(mod(c.Rank+1, c.NRanks))
	}
	return s.chans, prev, next
}

// RingBroadcastLL builds the chain Broadcast with LL packets: the root
// writes its input into slot 0 of root+1, which unpacks each packet into
// its output and forwards it to root+2 as it lands, …, up to root−1.
// Every reader releases its launch's half to its writer, which takes the
// release with a two-credit wait two launches later (rooted.go). One slot,
// one semaphore per block, messages up to boundedLLMaxBytes(1). Errors:
// an invalid rank, root or shape.
func RingBroadcastLL(c Config, root int) (*plan.Plan, error) {
	if err := c.validateBoundedRoot(root); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("broadcast-chain-r%d", root)
	if c.NRanks == 1 {
		return c.copyPlan(name, 0, 0)
	}
	chans, prev, next := c.chainRole(root)
	out := plan.L(plan.Output)
	var ops []plan.Op
	switch {
	case prev < 0:
		ops = cat(llCredits([]int{next}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{out, plan.RS(next, 0)}, plan.L(plan.Input))})
	case next < 0:
		ops = []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{out}, plan.LS(0)), plan.Signal(prev, 0)}
	default:
		ops = cat(llCredits([]int{next}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{out, plan.RS(next, 0)}, plan.LS(0)), plan.Signal(prev, 0)})
	}
	return c.boundedLL(name, chans, 1, 1, c.boundedLLMaxBytes(1), ops)
}

// RingBroadcastHB builds the windowed chain Broadcast: window w goes from
// the root to root+1, …, each rank copying it into its output and
// forwarding it while the next window arrives; windows of
// Config.chainWindow bytes, one slot. Errors: an invalid rank, root or
// shape.
func RingBroadcastHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateBoundedRoot(root); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("broadcast-chain-r%d", root)
	if c.NRanks == 1 {
		return c.copyPlan(name, 0, 0)
	}
	chans, prev, next := c.chainRole(root)
	out := plan.L(plan.Output)
	src, dsts := plan.L(plan.Input), []plan.Ref{out}
	if prev >= 0 {
		src = plan.LS(0)
	}
	if next >= 0 {
		dsts = append(dsts, plan.RS(next, 0))
	}
	return c.chainHB(name, chans, prev, next, xfer(dsts, src))
}

// chainHB finishes a windowed chain plan around the rank's transfer: wait
// for rank−1's window (data) and for rank+1's release of the half the
// window writes (from window 2), transfer, signal rank+1, release rank−1's
// slot; done handshakes at the end.
func (c Config) chainHB(name string, chans []plan.Channel, prev, next int, x plan.Op) (*plan.Plan, error) {
	b := c.HB.Blocks
	var ops, after []plan.Op
	if prev >= 0 {
		ops = append(ops, plan.Wait(prev, sem(ringData, b)))
	}
	if next >= 0 {
		ops = append(ops, skip([]plan.Op{plan.Wait(next, sem(ringFree, b))}, 2, 0)...)
	}
	ops = append(ops, x)
	if next >= 0 {
		ops = append(ops, plan.Signal(next, sem(ringData, b)))
	}
	if prev >= 0 {
		ops = append(ops, skip([]plan.Op{plan.Signal(prev, sem(ringFree, b))}, 0, 2)...)
		after = append(after, plan.Signal(prev, sem(ringDone, b)))
	}
	if next >= 0 {
		after = append(after, plan.Wait(next, sem(ringDone, b)))
	}
	return c.boundedHB(name, chans, c.chainWindow(), 1, ringSems, plan.Group{NChunks: 1, Ops: ops, After: after})
}

// RingReduceLL builds the chain Reduce with LL packets: root+1 writes its
// input into slot 0 of root+2, which reduces each packet with its own
// input and forwards the partial sum as it lands, …, until the root
// reduces the last into its output. Flow control as RingBroadcastLL's.
// Not Avg. Errors: an invalid rank, root or shape.
func RingReduceLL(c Config, root int) (*plan.Plan, error) {
	if err := c.validateBoundedRoot(root); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("reduce-chain-r%d", root)
	if c.NRanks == 1 {
		return c.copyPlan(name, 0, 0)
	}
	chans, prev, next := c.chainRole(mod(root+1, c.NRanks))
	in := plan.L(plan.Input)
	var ops []plan.Op
	switch {
	case prev < 0:
		ops = cat(llCredits([]int{next}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(next, 0)}, in)})
	case next < 0:
		ops = []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, in, plan.LS(0)), plan.Signal(prev, 0)}
	default:
		ops = cat(llCredits([]int{next}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(next, 0)}, in, plan.LS(0)), plan.Signal(prev, 0)})
	}
	return c.boundedLL(name, chans, 1, 1, c.boundedLLMaxBytes(1), ops)
}

// RingReduceHB builds the windowed chain Reduce (RingReduceLL's chain, per
// window of Config.chainWindow bytes). Not Avg. Errors: an invalid rank,
// root or shape.
func RingReduceHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateBoundedRoot(root); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("reduce-chain-r%d", root)
	if c.NRanks == 1 {
		return c.copyPlan(name, 0, 0)
	}
	chans, prev, next := c.chainRole(mod(root+1, c.NRanks))
	srcs, dst := []plan.Ref{plan.L(plan.Input)}, plan.L(plan.Output)
	if prev >= 0 {
		srcs = append(srcs, plan.LS(0))
	}
	if next >= 0 {
		dst = plan.RS(next, 0)
	}
	return c.chainHB(name, chans, prev, next, xfer([]plan.Ref{dst}, srcs...))
}

func (c Config) validateBoundedRoot(root int) error {
	if err := c.validateBounded(); err != nil {
		return err
	}
	if root < 0 || root >= c.NRanks {
		return fmt.Errorf("algorithms: root %d of %d ranks", root, c.NRanks)
	}
	return nil
}
