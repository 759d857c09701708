package algorithms

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// The collectives other than the zero-copy AllReduce move data through the
// communicator's scratch buffers, so user buffers need no registration (the
// NCCL API never registers them). Each has two plans:
//
//   - LL (one-phase all-pairs, LL packets): every rank writes what a peer
//     needs as LL packets into its slot of the peer's scratch, and each
//     receiver unpacks (or reduces) the slots it needs. The packets' flags
//     are the only synchronisation, so a call costs one one-way trip. Where
//     data flows one way only (Broadcast, Reduce), the readers release each
//     launch's scratch half with a signal that the writers consume at the
//     start of the launch that reuses the half (a credit, rooted.go), so a
//     writer never runs two launches ahead into a half a reader still
//     reads and no launch waits for an acknowledgement at its end.
//     Scratch grows with the count: LL plans serve segments up to
//     Config.CollLLMaxBytes (Broadcast and Reduce: RootedLLMaxBytes).
//   - HB (windowed, plain data): each segment moves in windows of
//     Shape.Window bytes through two halves of window-sized slots. Sending
//     and receiving run in separate thread-block groups so they pipeline:
//     a sender pushes window w and signals "data", then goes on with w+1;
//     it waits for the receiver's "free" of window w−2 before reusing that
//     half. A closing "done" from every receiver ends a launch, so the next
//     launch may start in either half. Scratch is 2 × slots × Window bytes
//     whatever the message size.
//
// The reducing collectives combine all n contributions in one transfer
// (plan.Op.Combine), so every operator, Avg included, is served; PreMulSum
// scales each rank's input where it is read (plan/premul.go).

// Semaphore bases of windowed plans (per block: base + part).
const (
	semData = iota
	semFree
	semDone
	semData2
	semFree2
	semDone2
)

// sem returns the base of semaphore s for groups of b blocks.
func sem(s, b int) int { return s * b }

// others returns the channel indices 0..n−2 (one per peer).
func (c Config) others() []int {
	chs := make([]int, c.NRanks-1)
	for i := range chs {
		chs[i] = i
	}
	return chs
}

// chanOf is the index of the channel to peer in this rank's channel list.
func (c Config) chanOf(peer int) int { return slotOf(peer, c.Rank) }

// rotated returns the channel indices in the order of their peers rank+1,
// rank+2, …, rank−1 (mod n): the order in which a windowed group puts one
// segment per peer. A group runs its ops one after the other on all its
// blocks, so with every rank walking its peers in ascending rank order the
// first put of ranks 1..n−1 all went to rank 0, whose NVLink ingress took
// n−1 writers while rank n−1's took none; rotated, the i-th put of every
// rank goes to a different peer (a permutation, the order of NCCL's
// all-to-all peer schedule and of a ring's steps).
func (c Config) rotated() []int {
	chs := make([]int, 0, c.NRanks-1)
	for i := 1; i < c.NRanks; i++ {
		chs = append(chs, c.chanOf(mod(c.Rank+i, c.NRanks)))
	}
	return chs
}

func signals(chs []int, s int) []plan.Op {
	var ops []plan.Op
	for _, ci := range chs {
		ops = append(ops, plan.Signal(ci, s))
	}
	return ops
}

// releases are the signals by which a reader frees the slots it has
// read on channels chs, semaphore s (plan.Op.Ack on a signal): a port
// engine applies them without waiting for this rank's own puts to land.
func releases(chs []int, s int) []plan.Op {
	ops := signals(chs, s)
	for i := range ops {
		ops[i].Ack = true
	}
	return ops
}

func waits(chs []int, s int) []plan.Op {
	var ops []plan.Op
	for _, ci := range chs {
		ops = append(ops, plan.Wait(ci, s))
	}
	return ops
}

// doneCredits are a writer group's waits, at the start of each launch
// (plan.Group.Before), for the "done" its readers signal at the end of the
// previous launch (in their After, once their last copy out of this
// rank's slots is finished): a credit wait with one credit, so the first
// launch does not wait. Before, the writer waited for "done" at the end
// of the launch that filled the slots, which put one more one-way trip on
// every launch's critical path: a store and a poll over NVLink for the HB
// plans, a pass through both proxies for the port plans (on two emulated
// nodes over sockets, the "done" frame's hop). A port writer's launch
// still ends with its flushes, so its input is read when the stream goes
// on; an HB writer's stores are complete when issued. Only for writers
// into the peers' scratch: a plan that writes a peer's output (2PA push)
// must still wait for its peers' "done" before its own output is whole.
func doneCredits(chs []int, s int) []plan.Op { return creditWaits(chs, s, 1) }

// creditWaits are credit waits (plan.Op.Credits) on channels chs,
// semaphore s, that many releases behind.
func creditWaits(chs []int, s, credits int) []plan.Op {
	ops := acks(chs, s)
	for i := range ops {
		ops[i].Credits = credits
	}
	return ops
}

// acks are waits that only order (plan.Op.Ack).
func acks(chs []int, s int) []plan.Op {
	ops := waits(chs, s)
	for i := range ops {
		ops[i].Ack = true
	}
	return ops
}

// skip sets SkipFirst/SkipLast on ops.
func skip(ops []plan.Op, first, last int) []plan.Op {
	for i := range ops {
		ops[i].SkipFirst, ops[i].SkipLast = first, last
	}
	return ops
}

func cat(parts ...[]plan.Op) []plan.Op {
	var ops []plan.Op
	for _, p := range parts {
		ops = append(ops, p...)
	}
	return ops
}

// newPlan starts a plan of this rank with one channel per peer.
func (c Config) newPlan(name string, threads int) *plan.Plan {
	return &plan.Plan{Name: name, Rank: c.Rank, NRanks: c.NRanks, Channels: c.channels(), Threads: threads}
}

// collLLBounds returns the largest segment of the narrow LL plans of
// AllGather, ReduceScatter and AllToAll and, when a WideLL-shaped LL plan
// takes the segments above it, that plan's bound (0: no wide plan).
func (c Config) collLLBounds() (narrow, wide int64) {
	if c.WideLL.Blocks > 0 && c.CollWideMinBytes > 0 && c.CollLLMaxBytes > c.CollWideMinBytes {
		return c.CollWideMinBytes, c.CollLLMaxBytes
	}
	return c.CollLLMaxBytes, 0
}

// llPlan finishes an LL plan: one group of LLBlocks, one scratch slot per
// peer (slot i receives from channel i's peer).
func (c Config) llPlan(name string, ops []plan.Op, sems int) (*plan.Plan, error) {
	return c.llPlanShape(name, c.narrowLL(), c.CollLLMaxBytes, false, ops, sems)
}

// WideLLProto is the packet format of the WideLL-shaped plans
// (Config.WideProto, else Config.LL).
func (c Config) WideLLProto() plan.Protocol {
	if c.WideProto != plan.Simple {
		return c.WideProto
	}
	return c.LL
}

// LL128Users names what in c takes LL128 lines (plan.LL128): the LL
// packet format, the wide plans' (WideProto), AllReduce tiers; empty when
// nothing does. A communicator whose links do not all carry LL128 lines
// refuses a configuration that names any.
func (c Config) LL128Users() []string {
	var out []string
	if c.LL == plan.LL128 {
		out = append(out, "the LL packet format (Config.LL)")
	}
	if c.WideProto == plan.LL128 {
		out = append(out, "the wide LL plans (Config.WideProto)")
	}
	for _, t := range c.AllReduceTiers() {
		if t.Algo == Algo1PA && t.LL == plan.LL128 {
			out = append(out, "AllReduce tier "+t.String())
		}
	}
	return out
}

// llPlanShape finishes an LL plan of s.Blocks × s.Threads serving messages
// up to maxBytes; sems semaphores per block. A wide plan's name carries its
// shape ("broadcast-r0-LL16-32x1024"); the narrow plans keep their names.
func (c Config) llPlanShape(name string, s Shape, maxBytes int64, wide bool, ops []plan.Op, sems int) (*plan.Plan, error) {
	return c.llPlanSlots(name, s, maxBytes, wide, ops, sems, c.NRanks-1, 0)
}

// llPlanSlots is llPlanShape with slots scratch slots, each holding one
// of slotChunks chunks where that is above 0 (plan.Plan.SlotChunks).
func (c Config) llPlanSlots(name string, s Shape, maxBytes int64, wide bool, ops []plan.Op, sems, slots, slotChunks int) (*plan.Plan, error) {
	if s.Blocks < 1 || s.Threads < 32 {
		return nil, fmt.Errorf("algorithms: %s LL shape %d blocks × %d threads: want blocks ≥ 1 and threads ≥ 32", name, s.Blocks, s.Threads)
	}
	proto := c.LL
	if wide {
		proto = c.WideLLProto()
	}
	name += "-" + proto.String()
	if wide {
		name += fmt.Sprintf("-%dx%d", s.Blocks, s.Threads)
	}
	p := c.newPlan(name, s.Threads)
	p.Scratch, p.ScratchSlots, p.MaxBytes, p.Semaphores, p.SlotChunks = proto, slots, maxBytes, sems*s.Blocks, slotChunks
	if c.NRanks == 1 {
		p.Scratch, p.ScratchSlots, p.SlotChunks = plan.Simple, 0, 0
	}
	p.Groups = []plan.Group{llGroup(s.Blocks, ops)}
	return p, p.Validate()
}

// llGroup is the one group of an LL plan: blocks blocks running ops, the
// readers' deferred releases (llReleases) moved to the start of each run
// (plan.Group.Before).
func llGroup(blocks int, ops []plan.Op) plan.Group {
	g := plan.Group{Blocks: blocks}
	for _, o := range ops {
		if o.Kind == plan.OpSignal && o.Deferred {
			g.Before = append(g.Before, o)
		} else {
			g.Ops = append(g.Ops, o)
		}
	}
	return g
}

// hbPlan finishes a windowed plan with the given groups; slots are
// scratch slots per half.
func (c Config) hbPlan(name string, slots, sems int, groups ...plan.Group) (*plan.Plan, error) {
	s := c.HB
	if err := validShape("HB", s); err != nil {
		return nil, err
	}
	p := c.newPlan(fmt.Sprintf("%s-hb-%dx%d-w%d", name, s.Blocks, s.Threads, s.Window), s.Threads)
	p.Unroll, p.Scratch, p.ScratchSlots, p.Semaphores = s.Unroll, plan.Simple, slots, sems*s.Blocks
	for _, g := range groups {
		if len(g.Ops) > 0 || len(g.After) > 0 {
			p.Groups = append(p.Groups, g)
		}
	}
	if len(p.Groups) == 0 { // one rank: nothing moves between ranks
		p.Groups = []plan.Group{{Blocks: 1, Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input))}}}
	}
	if slots == 0 {
		p.Scratch, p.ScratchSlots = plan.Simple, 0
		for i := range p.Groups {
			p.Groups[i].Window, p.Groups[i].NChunks, p.Groups[i].Pipeline = 0, 0, 0
		}
	}
	return p, p.Validate()
}

// pair returns c with PairHB, where set, as the HB shape: the shape of
// the windowed plans with two groups per rank.
func (c Config) pair() Config {
	if c.PairHB.Blocks > 0 {
		c.HB = c.PairHB
	}
	return c
}

// group is a windowed group of the HB shape over nchunks chunks.
func (c Config) group(nchunks int, ops, after []plan.Op) plan.Group {
	return plan.Group{Blocks: c.HB.Blocks, Window: c.HB.Window, NChunks: nchunks, Ops: ops, After: after}
}

// xfer is a transfer of the whole count (chunk 0 of 1: windowed groups
// move chunks).
func xfer(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(0, 1, dsts, srcs...) }

// llPeerGroupsMinRanks is the fewest ranks whose AllGather, ReduceScatter
// and AllToAll LL plans run one group per peer (llPlanPeers) instead of
// one group running every op in turn. A block runs its ops one after the
// other, each with its own header check and end-of-op barrier, so the
// one-group plans cost about 0.6 µs per op at small sizes (4×H100 through
// the C ABI, 8 B – 8 KB: AllReduce's two ops 5.1 µs, AllGather's and
// ReduceScatter's four 6.3, AllToAll's seven 8.0; NCCL 5.1–7.7 and, for
// AllToAll, 6.4–7.1; docs/bench/2026-11-27e-h100x4, call 1). In groups a
// peer's put and unpack run beside every other peer's (call 5: AllGather
// of 8 B – 32 KB 1.09–1.32× NCCL → 1.84–2.13, AllToAll 0.78–1.06 →
// 1.60–2.13). On two ranks AllGather runs its put and its unpack in groups
// of their own and ReduceScatter its put and its combine (2×H100, call
// 10: AllGather 8 B – 8 KB 1.43–1.62 → 1.57–1.73, through symmetric
// windows 0.98–1.05 → 1.08–1.14, ReduceScatter 1.33–1.58 → 1.52–1.66;
// AllGather of 512 KB 1.58 → 1.48, its put on half the wide blocks);
// AllToAll keeps one group there (in place, a separate unpack would
// overwrite the segment its put reads).
const llPeerGroupsMinRanks = 3

// llPlanPeers is llPlan with its ops in parallel groups (one per peer and
// any the caller adds), LLBlocks shared among them, one block each at
// least; a final group of combine ops (reduce, when not nil) takes all
// LLBlocks, since it alone reads every peer's packets. A group runs as
// soon as its blocks do (LL packets carry their own flags), so no group
// waits for another's end.
func (c Config) llPlanPeers(name string, groups [][]plan.Op, reduce []plan.Op) (*plan.Plan, error) {
	var all []plan.Op
	for _, g := range groups {
		all = append(all, g...)
	}
	p, err := c.llPlan(name, append(all, reduce...), 0)
	if err != nil {
		return nil, err
	}
	whole := p.Groups[0].Blocks
	b := max(1, whole/(len(groups)+min(1, len(reduce))))
	p.Groups = p.Groups[:0]
	for _, g := range groups {
		p.Groups = append(p.Groups, llGroup(b, g))
	}
	if len(reduce) > 0 {
		p.Groups = append(p.Groups, llGroup(whole, reduce))
	}
	return p, p.Validate()
}

// AllGatherLL: rank r's input goes as packets into slot r of every peer
// and into segment r of its own output; each rank unpacks slot i into
// segment peer(i). From llPeerGroupsMinRanks, group i puts into peer i and
// unpacks slot i (group 0 also writes the own segment); on two ranks the
// put and the unpack run in groups of their own.
func AllGatherLL(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	chs := c.channels()
	own := plan.L(plan.Output).At(c.Rank)
	if c.NRanks >= llPeerGroupsMinRanks {
		groups := make([][]plan.Op, len(chs))
		for ci, ch := range chs {
			dsts := []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}
			if ci == 0 {
				dsts = append(dsts, own)
			}
			groups[ci] = []plan.Op{plan.Transfer(plan.All, 0, dsts, plan.L(plan.Input)),
				plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.LS(ci))}
		}
		return c.llPlanPeers("all_gather", groups, nil)
	}
	dsts := []plan.Ref{own}
	for ci, ch := range chs {
		dsts = append(dsts, plan.RS(ci, slotOf(c.Rank, ch.Peer)))
	}
	ops := []plan.Op{plan.Transfer(plan.All, 0, dsts, plan.L(plan.Input))}
	for ci, ch := range chs {
		ops = append(ops, plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.LS(ci)))
	}
	if c.NRanks == 2 {
		// The put and the unpack in groups of their own (in place the
		// put reads the own segment, the unpack writes the peer's).
		return c.llPlanPeers("all_gather", [][]plan.Op{ops[:1], ops[1:]}, nil)
	}
	return c.llPlan("all_gather", ops, 0)
}

// AllGatherHB is the windowed AllGather: a send group pushes the input
// into every peer's slot (and the own output segment), a receive group
// copies each slot into its segment.
func AllGatherHB(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	c = c.pair()
	chs, all := c.channels(), c.others()
	b := c.HB.Blocks
	dsts := []plan.Ref{plan.L(plan.Output).At(c.Rank)}
	var copies []plan.Op
	for ci, ch := range chs {
		dsts = append(dsts, plan.RS(ci, slotOf(c.Rank, ch.Peer)))
		copies = append(copies, xfer([]plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.LS(ci)))
	}
	send := c.group(1, cat(skip(waits(all, sem(semFree, b)), 2, 0), []plan.Op{xfer(dsts, plan.L(plan.Input))}, signals(all, sem(semData, b))), nil)
	send.Before = doneCredits(all, sem(semDone, b))
	recv := c.group(1, cat(waits(all, sem(semData, b)), copies, skip(signals(all, sem(semFree, b)), 0, 2)), signals(all, sem(semDone, b)))
	if c.NRanks == 1 {
		send.Ops = []plan.Op{xfer(dsts, plan.L(plan.Input))}
	}
	return c.hbPlan("all_gather", len(chs), 3, send, recv)
}

// AllToAllLL: segment p of rank r's input goes as packets into slot r of
// peer p; each rank unpacks slot i into segment peer(i) and copies its own
// segment. From llPeerGroupsMinRanks, group i puts segment peer(i) and
// unpacks slot i (group 0 also copies the own segment).
func AllToAllLL(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs := c.channels()
	self := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(c.Rank)}, plan.L(plan.Input).At(c.Rank))
	if c.NRanks >= llPeerGroupsMinRanks && c.NRanks <= AllPairsMaxRanks {
		groups := make([][]plan.Op, len(chs))
		for ci, ch := range chs {
			groups[ci] = []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input).At(ch.Peer)),
				plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.LS(ci))}
		}
		groups[0] = append([]plan.Op{self}, groups[0]...)
		return c.llPlanPeers("alltoall", groups, nil)
	}
	ops := []plan.Op{self}
	for ci, ch := range chs {
		ops = append(ops, plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input).At(ch.Peer)))
	}
	for ci, ch := range chs {
		ops = append(ops, plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.LS(ci)))
	}
	return c.llPlan("alltoall", ops, 0)
}

// AllToAllHB is the windowed AllToAll (AllGatherHB with one input segment
// per peer), its segments cut into the shape's Pipeline windows at least
// where that is set.
func AllToAllHB(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	c = c.pair()
	chs, all := c.channels(), c.others()
	b := c.HB.Blocks
	puts := []plan.Op{xfer([]plan.Ref{plan.L(plan.Output).At(c.Rank)}, plan.L(plan.Input).At(c.Rank))}
	var copies []plan.Op
	for _, ci := range c.rotated() {
		ch := chs[ci]
		puts = append(puts, xfer([]plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input).At(ch.Peer)))
	}
	for ci, ch := range chs {
		copies = append(copies, xfer([]plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.LS(ci)))
	}
	send := c.group(1, cat(skip(waits(all, sem(semFree, b)), 2, 0), puts, signals(all, sem(semData, b))), nil)
	send.Before = doneCredits(all, sem(semDone, b))
	recv := c.group(1, cat(waits(all, sem(semData, b)), copies, skip(signals(all, sem(semFree, b)), 0, 2)), signals(all, sem(semDone, b)))
	// The shape's own pipeline where it has one (PairHB from 4 ranks).
	send.Pipeline, recv.Pipeline = c.HB.Pipeline, c.HB.Pipeline
	return c.hbPlan("alltoall", len(chs), 3, send, recv)
}

// ReduceScatterLL: segment p of rank r's input goes as packets into slot r
// of peer p; each rank combines its own segment with its slots. From
// two ranks, one group per peer puts its segment and one more combines on
// every LL block.
func ReduceScatterLL(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	chs := c.channels()
	var ops []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input).At(c.Rank)}
	for ci, ch := range chs {
		ops = append(ops, plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input).At(ch.Peer)))
		srcs = append(srcs, plan.LS(ci))
	}
	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, srcs...)
	red.Combine = true
	if c.NRanks >= 2 {
		groups := make([][]plan.Op, 0, len(ops)+1)
		for _, o := range ops {
			groups = append(groups, []plan.Op{o})
		}
		return c.llPlanPeers("reduce_scatter", groups, []plan.Op{red})
	}
	return c.llPlan("reduce_scatter", append(ops, red), 0)
}

// ReduceScatterHB is the windowed ReduceScatter: the send group pushes
// segment p into peer p's slot, the receive group combines the own segment
// with the slots.
func ReduceScatterHB(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	c = c.pair()
	chs, all := c.channels(), c.others()
	b := c.HB.Blocks
	var puts []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input).At(c.Rank)}
	for _, ci := range c.rotated() {
		ch := chs[ci]
		puts = append(puts, xfer([]plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input).At(ch.Peer)))
	}
	for ci := range chs {
		srcs = append(srcs, plan.LS(ci)) // slot order: the sum's order is unchanged
	}
	red := xfer([]plan.Ref{plan.L(plan.Output)}, srcs...)
	red.Combine = true
	send := c.group(1, cat(skip(waits(all, sem(semFree, b)), 2, 0), puts, signals(all, sem(semData, b))), nil)
	send.Before = doneCredits(all, sem(semDone, b))
	recv := c.group(1, cat(waits(all, sem(semData, b)), []plan.Op{red}, skip(signals(all, sem(semFree, b)), 0, 2)), signals(all, sem(semDone, b)))
	if c.NRanks == 1 {
		recv.Ops, recv.After = []plan.Op{red}, nil
	}
	return c.hbPlan("reduce_scatter", len(chs), 3, send, recv)
}

// AllReduceHB is the windowed two-phase all-pairs AllReduce through
// scratch (no registered buffers): in each window, a send group pushes
// chunk p of the input into peer p's first slot set (reduce-scatter); a
// reduce group combines chunk r from the input and those slots, writes the
// result into chunk r of the output and into this rank's slot of every
// peer's second set (all-gather); a gather group copies the second set
// into the output chunks of the peers. Scratch: 2 × 2(n−1) window-sized
// slots.
func AllReduceHB(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	n, b := c.NRanks, c.HB.Blocks
	m := len(chs) // slots per set
	var puts, copies []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input)}
	outs := []plan.Ref{plan.L(plan.Output)}
	// Puts in ascending peer order, not rotated (Config.rotated): on
	// 4×H100 the rotated order took the 2 MB AllReduce from 1.06–1.08×
	// NCCL to 0.98 (docs/bench/2026-11-27h-h100x4, call 1). Here a rank
	// reduces once every peer's chunk has landed, and in ascending order
	// rank 0 has them first and starts its reduce and all-gather while
	// the others still receive: a stagger the rotation takes away.
	for ci, ch := range chs {
		puts = append(puts, plan.Transfer(ch.Peer, n, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input)))
		srcs = append(srcs, plan.LS(ci))
		outs = append(outs, plan.RS(ci, m+slotOf(c.Rank, ch.Peer)))
		copies = append(copies, plan.Transfer(ch.Peer, n, []plan.Ref{plan.L(plan.Output)}, plan.LS(m+ci)))
	}
	red := plan.Transfer(c.Rank, n, outs, srcs...)
	red.Combine = true
	if n == 1 {
		p, err := c.hbPlan("all_reduce", 0, 0, plan.Group{Blocks: b, Ops: []plan.Op{red}})
		return p, err
	}
	// The "done" waits stay at the end of the launch here: with them at
	// the start of the next launch (doneCredits, as the one-hop plans)
	// this plan was 5–10% slower at 8–64 MB on 2×H100 in an A/B of the
	// same run (docs/bench/notes.md, "done credits").
	send := c.group(n, cat(skip(waits(all, sem(semFree, b)), 2, 0), puts, signals(all, sem(semData, b))), waits(all, sem(semDone, b)))
	reduce := c.group(n, cat(waits(all, sem(semData, b)), skip(waits(all, sem(semFree2, b)), 2, 0), []plan.Op{red},
		skip(signals(all, sem(semFree, b)), 0, 2), signals(all, sem(semData2, b))),
		cat(signals(all, sem(semDone, b)), waits(all, sem(semDone2, b))))
	gather := c.group(n, cat(waits(all, sem(semData2, b)), copies, skip(signals(all, sem(semFree2, b)), 0, 2)), signals(all, sem(semDone2, b)))
	return c.hbPlan("all_reduce", 2*m, 6, send, reduce, gather)
}

// P2PPlan is the point-to-point plan of a rank: for channel i a send
// group (argument slot 2i+1) and a receive group (2i+2), and a copy group
// for a send to itself (2n−1), each windowed through the channel's scratch
// slot. A launch runs the groups its operations need (plan.GroupArgs) and
// leaves the others idle; the data type is raw bytes (plan.Uint8), so one
// compiled plan serves every point-to-point pattern of the communicator.
//
// Each window crosses the link once and a local copy once. By default
// (push) the sender stores the window into its slot of the receiver's
// scratch and the receiver copies it out. With Config.P2P.Pull the sender
// copies the window into its own scratch slot for the peer and the
// receiver loads it from there straight into its output, as NCCL's P2P
// transport reads over NVLink (P2P/read): the link is crossed by loads
// whose completion the receiver sees, so a window's release needs no
// fence over remote stores, and the sender's local copy runs ahead of the
// receiver's reads. The semaphores, credits and posted-buffer exchange are
// the same in both directions.
func P2PPlan(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := c.P2P
	if err := validShape("point-to-point", s); err != nil {
		return nil, err
	}
	chs := c.channels()
	b := s.Blocks
	d := s.depth()
	name := fmt.Sprintf("sendrecv-hb-%dx%d-w%d", b, s.Threads, s.Window) + s.flowName()
	if s.Pull {
		name += "-pull"
	}
	p := c.newPlan(name, s.Threads)
	// Semaphores 0..3b−1: the windows' free, data and done; 3b..6b−1: the
	// posted-buffer mailbox (p2pPostSems, algorithms/p2p.go).
	p.Unroll, p.Scratch, p.ScratchSlots, p.Semaphores = s.Unroll, plan.Simple, len(chs), 3*b+p2pPostSems(b)
	if len(chs) > 0 && d != 2 {
		p.WindowDepth = d
	}
	for ci, ch := range chs {
		one := []int{ci}
		put := xfer([]plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input))
		get := xfer([]plan.Ref{plan.L(plan.Output)}, plan.LS(ci))
		if s.Pull {
			// The sender's slot for this peer is its channel's index
			// (slot ci); the receiver finds it in the peer's scratch as
			// slotOf(receiver, sender), the same index seen from there.
			put = xfer([]plan.Ref{plan.LS(ci)}, plan.L(plan.Input))
			get = xfer([]plan.Ref{plan.L(plan.Output)}, plan.RS(ci, slotOf(c.Rank, ch.Peer)))
		}
		send := plan.Group{Blocks: b, Arg: 2*ci + 1, Window: s.Window, NChunks: 1,
			Before: doneCredits(one, sem(semDone, b)),
			Ops:    cat(skip(waits(one, sem(semFree, b)), d, 0), []plan.Op{put}, signals(one, sem(semData, b))),
			Post:   p2pSendPost(ch, ci, 3*b)}
		recv := plan.Group{Blocks: b, Arg: 2*ci + 2, Window: s.Window, NChunks: 1,
			Ops: cat(waits(one, sem(semData, b)), []plan.Op{get}, skip(signals(one, sem(semFree, b)), 0, d)), After: signals(one, sem(semDone, b)),
			Post: p2pRecvPost(ch, ci, 3*b)}
		s.pipelined(&send, &recv)
		p.Groups = append(p.Groups, send, recv)
	}
	p.Groups = append(p.Groups, plan.Group{Blocks: b, Arg: 2*len(chs) + 1, Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input))}})
	if len(chs) == 0 {
		p.Scratch, p.ScratchSlots = plan.Simple, 0
	}
	return p, p.Validate()
}

// SendArg and RecvArg are the argument slots (plan.Args.Groups index + 1)
// of P2PPlan's groups for peer rank `peer` of rank `rank`; SelfArg is the
// slot of a rank's copy to itself.
func SendArg(rank, peer int) int { return 2*slotOf(peer, rank) + 1 }
func RecvArg(rank, peer int) int { return 2*slotOf(peer, rank) + 2 }
func SelfArg(nranks int) int     { return 2*(nranks-1) + 1 }

// validateRoot is validate with a root rank.
func (c Config) validateRoot(root int) error {
	if err := c.validate(); err != nil {
		return err
	}
	return c.checkRoot(root)
}

// validateRootAllPairs is validateAllPairs with a root rank.
func (c Config) validateRootAllPairs(root int) error {
	if err := c.validateAllPairs(); err != nil {
		return err
	}
	return c.checkRoot(root)
}

func (c Config) checkRoot(root int) error {
	if root < 0 || root >= c.NRanks {
		return fmt.Errorf("algorithms: root %d of %d ranks", root, c.NRanks)
	}
	return nil
}

// combineChain is the reduction of srcs into dst as a chain of Combine
// transfers made by mk, each within plan.MaxOperands sources: the first
// combines up to MaxOperands of srcs, each next one dst with up to
// MaxOperands−1 more, in the order of srcs (so every rank that combines
// the same sources gets the same bits). One transfer for up to
// MaxOperands sources; more reduce in stages, which serves every operator
// but Avg (Choice.Staged). dst must not alias any of srcs but itself.
func combineChain(mk func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op, dst plan.Ref, srcs []plan.Ref) []plan.Op {
	var ops []plan.Op
	for len(srcs) > 0 {
		k := plan.MaxOperands
		var in []plan.Ref
		if len(ops) > 0 {
			k--
			in = append(in, dst)
		}
		k = min(k, len(srcs))
		in = append(in, srcs[:k]...)
		srcs = srcs[k:]
		op := mk([]plan.Ref{dst}, in...)
		op.Combine = true
		ops = append(ops, op)
	}
	return ops
}

// Plans returns the plans of a collective for a rank (with root for
// Broadcast and Reduce), smallest messages first: the LL plans up to
// Config.CollLLMaxBytes per segment (Broadcast and Reduce: a narrow and a
// wide LL plan up to RootedLLMaxBytes, rooted.go; AllReduce: the 1PA tiers
// and a wide 1PA up to ScratchLLMaxBytes, scratch.go), then the HB
// plan, then, from Config.PortMinBytes, the port-channel plan where the
// collective has one. AllReduce here is the scratch-based set (1PA-LL,
// windowed 2PA, 2PA over port channels) that serves unregistered buffers;
// AllReducePlans gives the zero-copy ones. Config.Algo keeps one family
// (collectives without a port-channel plan ignore "port"); Config.PortOnly
// keeps the port-channel plan, the only one that runs on
// links without memory mapping (an error wrapping ErrNoPlan for a
// collective that has none). Config.Algo "nvls" gives the NVLS plan of
// AllReduce and AllGather first (nvls.go; ErrNoPlan when the links are not
// switch-mapped); the NVLS plans are offered only then, and SelectFor
// picks among the choices by type and operator too.
//
// Past AllPairsMaxRanks ranks on memory-mapped links, and wherever
// Config.Algo names a family with bounded peers ("ring", "tree",
// "bruck") that has a plan of the collective, AllReduce, AllGather,
// ReduceScatter, Broadcast and Reduce take the plans with bounded peers
// (Config.UsesBounded, BoundedPlans); AllToAll and SendRecv keep their
// all-pairs plans up to PeerPlansMaxRanks. On port-mapped links the
// port-channel plans serve up to PeerPlansMaxRanks ranks, reducing in a
// chain of transfers past AllPairsMaxRanks (Staged), and the hierarchical
// plans come first where the nodes allow them (hierPlans).
// docs/collectives.md, "Selection", has the table. Every choice is fitted
// to Config.Budget, the most (and fewest) thread blocks a launch may hold
// (BlockBudget, FitBlocks).
func Plans(c Config, coll Collective, root int) ([]Choice, error) {
	if c.Budget.Set() { // fitted to the block budget (budget.go)
		choices, _, err := FitBlocks(c, coll, root, false)
		return choices, err
	}
	if c.Algo == NVLSFamily {
		return nvlsPlans(c, coll, root)
	}
	if c.PortOnly || c.Algo == PortFamily {
		p, err := PortPlanRoot(c, coll, root)
		var out []Choice
		switch {
		case errors.Is(err, ErrTooManyRanks) && c.PortOnly && coll.hierarchical():
			return hierPlans(c, coll, root, nil) // the hierarchical plan alone, where it fits
		case err != nil:
			return nil, err
		case p != nil && c.PortOnly && coll.hierarchical():
			if out, err = hierPlans(c, coll, root, p); err != nil {
				return nil, err
			}
			if coll == AllReduce && c.stageSends() && len(out) == 1 {
				// No hierarchical plan (every rank on its own node, or
				// nodes of unequal size): small AllReduces in one hop.
				one, err := AllReduceOneShotPort(c)
				if err != nil {
					return nil, err
				}
				out = append([]Choice{{Plan: one, MaxBytes: PortOneShotMaxBytes, Staged: c.NRanks > AllPairsMaxRanks}}, out...)
			}
		case p != nil:
			out = []Choice{{Plan: p}}
		case c.PortOnly:
			return nil, fmt.Errorf("algorithms: %v has no port-channel plan (%d ranks), and the links are not memory-mapped: %w", coll, c.NRanks, ErrNoPlan)
		}
		if out != nil {
			if coll.Reduces() && c.NRanks > AllPairsMaxRanks {
				// The flat plan combines in a chain (combineChain).
				out[len(out)-1].Staged = true
			}
			if c.portLL(coll) {
				// Small messages in one frame per peer (portll.go), or
				// per counterpart where nodes hold several ranks
				// (hier_ll.go).
				ll, err := HierLLPlan(c, coll)
				staged := coll.Reduces()
				if errors.Is(err, ErrNoPlan) {
					ll, err = PortLLPlan(c, coll, root)
					staged = coll.Reduces() && c.NRanks > AllPairsMaxRanks
				}
				if err != nil {
					return nil, err
				}
				out = append([]Choice{{Plan: ll, MaxBytes: c.PortLLMaxBytes, Staged: staged}}, out...)
			}
			return out, nil
		}
		c.Algo = "" // collectives without a port-channel plan keep their own
	}
	if c.UsesBounded(coll) {
		return boundedSelection(c, coll, root)
	}
	out, err := memoryPlans(c, coll, root)
	if err != nil || c.PortMinBytes <= 0 || c.Algo != "" {
		return out, err
	}
	p, err := PortPlanRoot(c, coll, root)
	if err != nil || p == nil {
		return out, err
	}
	out[len(out)-1].MaxBytes = c.PortMinBytes - 1
	return append(out, Choice{Plan: p}), nil
}

// ErrNoPlan is wrapped by Plans when no plan of the collective can run
// with the configuration.
var ErrNoPlan = errors.New("no plan")

// memoryPlans are the LL and HB plans of Plans, filtered by Config.Algo;
// AllReduce and ReduceScatter end with the windowed ring from
// Config.RingMinBytes.
func memoryPlans(c Config, coll Collective, root int) ([]Choice, error) {
	type builder func(Config) (*plan.Plan, error)
	var ll, hb builder
	llMax := c.CollLLMaxBytes
	switch coll {
	case AllReduce:
		return scratchAllReducePlans(c)
	case AllGather:
		ll, hb = AllGatherLL, AllGatherHB
		if c.AllGatherLLMaxBytes > 0 {
			c.CollLLMaxBytes, llMax = c.AllGatherLLMaxBytes, c.AllGatherLLMaxBytes
		}
	case ReduceScatter:
		ll, hb = ReduceScatterLL, ReduceScatterHB
	case AllToAll:
		ll, hb = AllToAllLL, AllToAllHB
	case Broadcast, Reduce:
		return rootedPlans(c, coll, root)
	case SendRecv:
		return p2pPlans(c)
	default:
		return nil, fmt.Errorf("algorithms: no plans for %v", coll)
	}
	var out []Choice
	if llMax > 0 && c.Algo != "hb" {
		narrow, wide := c.collLLBounds()
		cn := c
		cn.CollLLMaxBytes = narrow
		p, err := ll(cn)
		if err != nil {
			return nil, err
		}
		out = append(out, Choice{Plan: p, MaxBytes: narrow})
		if wide > 0 {
			cw := c
			cw.LLBlocks, cw.Threads, cw.LL = c.WideLL.Blocks, c.WideLL.Threads, c.WideLLProto()
			pw, err := ll(cw)
			if err != nil {
				return nil, err
			}
			pw.Name += fmt.Sprintf("-%dx%d", c.WideLL.Blocks, c.WideLL.Threads)
			out = append(out, Choice{Plan: pw, MaxBytes: wide})
		}
		if c.Algo == "ll" {
			return out, nil
		}
	}
	p, err := hb(c)
	if err != nil {
		return nil, err
	}
	out = append(out, Choice{Plan: p})
	if coll == ReduceScatter {
		// Select counts a ReduceScatter's segment: the input is n of them.
		return c.ringFrom(out, RingReduceScatterHB, (c.RingMinBytes+int64(c.NRanks)-1)/int64(c.NRanks)) // ring.go
	}
	return out, nil
}
