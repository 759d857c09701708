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
// window w, every step moves window w of its chunk through scratch slot
// i mod k of rank+1, k = min(4, sends per window) slots per half
// (ringHBMaxSlots) whatever n is, so windows stay Config.HB.Window bytes
// at any n; one data semaphore per block carries every step, each wait
// counting the sender's signals in order. The receiver releases each slot
// after reading it (a "free" signal per step), and the sender's step i
// waits for the release of its step i − k, so a rank runs at most k steps
// ahead of rank+1 (credits through the free semaphore); a "done" at the
// end lets the next launch start on any slot. Chains use one slot, with a
// free signal per window awaited two windows later (the slots alternate
// between two halves). The B blocks of a group are B independent rings
// over the parts of each window, which keep the links busy while another
// block waits.
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

// ringDone is the closing handshake of a windowed ring group: a done
// signal to rank−1 once this rank has read its last window, and the wait
// for rank+1's, after which the next launch may write any slot of rank+1.
func (c Config) ringDone(prev, next int) []plan.Op {
	b := c.HB.Blocks
	return []plan.Op{plan.Signal(prev, sem(ringDone, b)), plan.Wait(next, sem(ringDone, b))}
}

// RingAllReduceLL builds the ring AllReduce with LL packets for one rank:
// 2(n−1) steps over n chunks (see the comment above), channels to rank−1
// and rank+1, two scratch slots, LLBlocks × Threads, serving messages up
// to boundedLLMaxBytes(2) (S bytes of count × element size need 2 × 2 ×
// S × 2 bytes of scratch with LL16). Integer Avg divides at step n−1
// (PostDiv). Errors: an invalid rank or shape.
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
	return divided(c.ringLL("all_reduce-ring", chans, c.NRanks, 2, c.boundedLLMaxBytes(2), steps))
}

// RingAllReduceHB builds the windowed ring AllReduce for one rank: in each
// window, the 2(n−1) steps of the ring over window w of each of the n
// chunks, step i through scratch slot i mod k of rank+1 (k =
// ringHBSlots(2(n−1)) ≤ 4 slots per half, windows of Config.HB.Window
// bytes at any n), Config.HB's blocks and threads; 3 semaphores per block.
// Scratch: 2 × k × window bytes, whatever n and the message size. Integer
// Avg divides at step n−1 (PostDiv). Errors: an invalid rank or shape.
func RingAllReduceHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_reduce-ring", 0, 0)
	}
	chans, prev, next := c.ring()
	slots := ringHBSlots(2 * (c.NRanks - 1))
	steps := c.ringAllReduceSteps(next, func(step int) int { return step % slots })
	return divided(c.ringHB("all_reduce-ring", chans, prev, next, c.NRanks, slots, steps))
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
	steps := []ringStep{{mod(r-1, n), []plan.Ref{plan.RS(next, slot(0))}, []plan.Ref{in}, false}}
	for s := 1; s <= n-2; s++ {
		steps = append(steps, ringStep{mod(r-1-s, n), []plan.Ref{plan.RS(next, slot(s))}, []plan.Ref{in, plan.LS(slot(s - 1))}, false})
	}
	// Step n−1 completes chunk r: the integer Avg divides it here, once,
	// before the all-gather forwards it (plan.Op.PostDiv).
	steps = append(steps, ringStep{mod(r, n), []plan.Ref{out, plan.RS(next, slot(n-1))}, []plan.Ref{in, plan.LS(slot(n - 2))}, true})
	for t := 1; t <= n-2; t++ {
		steps = append(steps, ringStep{mod(r-t, n), []plan.Ref{out, plan.RS(next, slot(n-1+t))}, []plan.Ref{plan.LS(slot(n - 2 + t))}, false})
	}
	return append(steps, ringStep{mod(r+1, n), []plan.Ref{out}, []plan.Ref{plan.LS(slot(2*n - 3))}, false})
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
	return c.ringLL("all_gather-ring", chans, 0, n-1, c.boundedLLMaxBytes(n-1), c.ringAllGatherSteps(next, func(t int) int { return t }))
}

// RingAllGatherHB builds the windowed ring AllGather: in each window, n−1
// steps forwarding window w of a segment through slot t mod k of rank+1
// (k = ringHBSlots(n−1) ≤ 4 slots, windows of Config.HB.Window bytes at
// any n). Errors: an invalid rank or shape.
func RingAllGatherHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_gather-ring", 0, 0)
	}
	chans, prev, next := c.ring()
	slots := ringHBSlots(c.NRanks - 1)
	return c.ringHB("all_gather-ring", chans, prev, next, 0, slots, c.ringAllGatherSteps(next, func(t int) int { return t % slots }))
}

// ringAllGatherSteps: step t forwards segment r−t (its own input at t = 0)
// through slot(t) of rank+1 and keeps it in that output segment; the last
// step only keeps segment r+1.
func (c Config) ringAllGatherSteps(next int, slot func(step int) int) []ringStep {
	n, r := c.NRanks, c.Rank
	out := func(seg int) plan.Ref { return plan.L(plan.Output).At(mod(seg, n)) }
	steps := []ringStep{{-1, []plan.Ref{out(r), plan.RS(next, slot(0))}, []plan.Ref{plan.L(plan.Input)}, false}}
	for t := 1; t <= n-2; t++ {
		steps = append(steps, ringStep{-1, []plan.Ref{out(r - t), plan.RS(next, slot(t))}, []plan.Ref{plan.LS(slot(t - 1))}, false})
	}
	return append(steps, ringStep{-1, []plan.Ref{out(r + 1)}, []plan.Ref{plan.LS(slot(n - 2))}, false})
}

// RingReduceScatterLL builds the ring ReduceScatter with LL packets: step s
// sends input segment (r−1−s) mod n, reduced from s = 1 with the partial
// sum received in slot s−1, to slot s of rank+1; the last step reduces
// segment r into the output. Segments up to boundedLLMaxBytes(n−1).
// Integer Avg divides at the last step (PostDiv). Errors: an invalid rank
// or shape.
func RingReduceScatterLL(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("reduce_scatter-ring", 0, 0)
	}
	chans, _, next := c.ring()
	n := c.NRanks
	return divided(c.ringLL("reduce_scatter-ring", chans, 0, n-1, c.boundedLLMaxBytes(n-1), c.ringReduceScatterSteps(next, func(s int) int { return s })))
}

// RingReduceScatterHB builds the windowed ring ReduceScatter (the steps of
// RingReduceScatterLL per window, through slot s mod k of rank+1, k =
// ringHBSlots(n−1) ≤ 4). Integer Avg divides at the last step (PostDiv).
// Errors: an invalid rank or shape.
func RingReduceScatterHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("reduce_scatter-ring", 0, 0)
	}
	chans, prev, next := c.ring()
	slots := ringHBSlots(c.NRanks - 1)
	return divided(c.ringHB("reduce_scatter-ring", chans, prev, next, 0, slots, c.ringReduceScatterSteps(next, func(s int) int { return s % slots })))
}

// ringReduceScatterSteps: step s sends input segment r−1−s, reduced from
// s = 1 with the partial sum received in slot(s−1), to slot(s) of rank+1;
// the last step reduces segment r into the output.
func (c Config) ringReduceScatterSteps(next int, slot func(step int) int) []ringStep {
	n, r := c.NRanks, c.Rank
	in := func(seg int) plan.Ref { return plan.L(plan.Input).At(mod(seg, n)) }
	steps := []ringStep{{-1, []plan.Ref{plan.RS(next, slot(0))}, []plan.Ref{in(r - 1)}, false}}
	for s := 1; s <= n-2; s++ {
		steps = append(steps, ringStep{-1, []plan.Ref{plan.RS(next, slot(s))}, []plan.Ref{in(r - 1 - s), plan.LS(slot(s - 1))}, false})
	}
	return append(steps, ringStep{-1, []plan.Ref{plan.L(plan.Output)}, []plan.Ref{in(r), plan.LS(slot(n - 2))}, true})
}

// ringStep is one step of a ring plan: chunk (0 to the plan's chunks − 1;
// −1: the whole range) moved from srcs to dsts. The remote destination and the
// local source name scratch slots.
type ringStep struct {
	chunk      int
	dsts, srcs []plan.Ref
	postDiv    bool // the step completes this rank's reduced chunk (plan.Op.PostDiv)
}

// transfer is the step's transfer in a plan of nChunks chunks (0: the whole
// range, as windowed plans take it, in chunk 0 of 1; LL plans, in plan.All).
func (s ringStep) transfer(nChunks int, ll bool) plan.Op {
	var o plan.Op
	switch {
	case s.chunk >= 0:
		o = plan.Transfer(s.chunk, nChunks, s.dsts, s.srcs...)
	case ll:
		o = plan.Transfer(plan.All, 0, s.dsts, s.srcs...)
	default:
		o = xfer(s.dsts, s.srcs...)
	}
	o.PostDiv = s.postDiv
	return o
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

// ringHBMaxSlots is the number of scratch slots (per half) of a windowed
// ring: a ring step needs only the slots of the steps in flight to rank+1,
// not one per step, so the ring keeps Config.HB.Window-sized windows at
// any n (2(n−1) slots per step made them 16 KB at 1,024 ranks). Four let
// a rank run up to four steps ahead of rank+1's reads (NCCL's Simple
// protocol pipelines with NCCL_STEPS = 8 slots of a buffer per peer; the
// steps of a weft ring window are whole chunk windows, so fewer suffice).
const ringHBMaxSlots = 4

// ringHBSlots is the slot count of a windowed ring with sends steps that
// write rank+1's scratch per window: ringHBMaxSlots, or sends when fewer.
func ringHBSlots(sends int) int { return max(1, min(ringHBMaxSlots, sends)) }

// ringHB is the windowed form over slots scratch slots (per half; the
// steps write slot i mod slots, as the step builders were told). Per
// window, step i waits for rank−1's data of step i−1 before it reads
// (i ≥ 1), for rank+1's release of the slot it writes (the release of
// send i − slots; the first window's first slots sends write free slots),
// transfers, signals its data to rank+1 and releases the slot it read to
// rank−1 (every release but those of the last window's last slots sends,
// which no send waits for), so a rank runs at most slots steps ahead of
// rank+1's reads, and the data, free and done semaphores count signals in
// order; done handshakes close the launch (ringDone), after which
// the next launch reuses every slot.
func (c Config) ringHB(name string, chans []plan.Channel, prev, next, nChunks, slots int, steps []ringStep) (*plan.Plan, error) {
	b := c.HB.Blocks
	after := c.ringDone(prev, next)
	sig, wait := plan.Signal(next, sem(ringData, b)), plan.Wait(prev, sem(ringData, b))
	sends := len(steps) - 1 // every step but the last writes rank+1's scratch
	ops := make([]plan.Op, 0, 5*len(steps))
	for i, s := range steps {
		if i > 0 {
			ops = append(ops, wait)
		}
		if i < sends {
			free := plan.Wait(next, sem(ringFree, b))
			free.Ack = true // a release orders; the data waits check counts
			if i < slots {
				free.SkipFirst = 1
			}
			ops = append(ops, free)
		}
		ops = append(ops, s.transfer(nChunks, false))
		if i < sends {
			ops = append(ops, sig)
		}
		if i > 0 {
			release := plan.Signal(prev, sem(ringFree, b))
			if i-1 >= sends-slots {
				release.SkipLast = 1
			}
			ops = append(ops, release)
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
// Every reader releases its launch's half to its writer at the start of
// its next launch (llReleases), which the writer takes with a two-credit
// wait two launches later (rooted.go). One slot,
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
		ops = cat(llReleases([]int{prev}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{out}, plan.LS(0))})
	default:
		ops = cat(llReleases([]int{prev}, 0), llCredits([]int{next}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{out, plan.RS(next, 0)}, plan.LS(0))})
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
// Integer Avg: PostDiv at the root. Errors: an invalid rank, root or shape.
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
		ops = cat(llReleases([]int{prev}, 0), []plan.Op{postDiv(plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, in, plan.LS(0)))})
	default:
		ops = cat(llReleases([]int{prev}, 0), llCredits([]int{next}, 0), []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(next, 0)}, in, plan.LS(0))})
	}
	return divided(c.boundedLL(name, chans, 1, 1, c.boundedLLMaxBytes(1), ops))
}

// RingReduceHB builds the windowed chain Reduce (RingReduceLL's chain, per
// window of Config.chainWindow bytes); the root's combine divides the
// integer Avg (PostDiv). Errors: an invalid rank, root or shape.
func RingReduceHB(c Config, root int) (*plan.Plan, error) {
	if err := c.validateBoundedRoot(root); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("reduce-chain-r%d", root)
	if c.NRanks == 1 {
		return c.copyPlan(name, 0, 0)
	}
	chans, prev, next := c.chainRole(mod(root+1, c.NRanks))
	srcs := []plan.Ref{plan.L(plan.Input)}
	if prev >= 0 {
		srcs = append(srcs, plan.LS(0))
	}
	x := postDiv(xfer([]plan.Ref{plan.L(plan.Output)}, srcs...)) // the root's last combine
	if next >= 0 {
		x = xfer([]plan.Ref{plan.RS(next, 0)}, srcs...)
	}
	return divided(c.chainHB(name, chans, prev, next, x))
}

// postDiv marks o as the transfer that produces a rank's final reduced
// value (plan.Op.PostDiv: the integer Avg divides there).
func postDiv(o plan.Op) plan.Op {
	o.PostDiv = true
	return o
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

// ringFrom ends choices (whose last serves every larger size) with the
// windowed ring plan ring from bound bytes (as Select counts them: the
// AllReduce message, a ReduceScatter segment), on as many ranks as the
// all-pairs plans serve and no family forced: the last choice then stops
// below it. The ring takes Config.RingHB's shape where set. Without a
// bound (≤ 0), choices unchanged.
func (c Config) ringFrom(choices []Choice, ring func(Config) (*plan.Plan, error), bound int64) ([]Choice, error) {
	if bound <= 0 || c.Algo != "" || c.NRanks < 3 || c.NRanks > AllPairsMaxRanks || len(choices) == 0 {
		return choices, nil
	}
	rc := c
	if c.RingHB.Blocks > 0 {
		rc.HB = c.RingHB
	}
	p, err := ring(rc)
	if err != nil {
		return nil, err
	}
	for _, ch := range choices[:len(choices)-1] { // never inside the LL plans' range
		bound = max(bound, ch.MaxBytes+1)
	}
	choices[len(choices)-1].MaxBytes = bound - 1
	return append(choices, Choice{Plan: p, Staged: true}), nil
}
