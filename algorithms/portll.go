package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// LL plans over port channels, for small messages of every collective
// across nodes where the network writes host windows (Config.stageSends;
// every channel goes over the network, a peer of the rank's own node
// included; where nodes hold several ranks, AllGather, AllReduce and
// ReduceScatter take the hierarchical LL plans of hier_ll.go instead). A staged HB port plan (port.go) sends
// every window as a put and a "data" signal, and its reader polls the
// semaphore, then reads the slot, then releases it with a signal back: two frames each way through
// both proxies per call, two pushes and two reads of host memory over
// PCIe on the critical path (docs/network.md, "Where a hop's time goes").
// Here each put carries its own completion, as NCCL's LL protocol does
// over its network transports: the sender's block writes LL packets into
// a staging slot of its host-memory scratch and pushes one trigger, the
// put of those bytes into its slot of the peer's scratch (plan/port.go,
// "LL puts"); the reader polls the packets' flags there. No data signals
// and no flushes: one frame per peer and call (and, for the collectives
// that move data one way, a release frame back, below).
//
// Credits. Slots alternate halves by launch. AllGather, AllToAll,
// ReduceScatter and AllReduce are all-pairs and symmetric: in every launch
// each rank puts to and reads from every peer. Rank a writes half h of
// peer b's slot (and its own staging slot's half h) in launch k+2 only
// after its launch k+1, which read b's launch-(k+1) packets, which b wrote
// after finishing launch k, in which it read what a wrote into half h —
// and those packets had left a's staging slot, or b could not have read
// them. So every rewrite of a half follows the read of what it held, and
// no message says so. Broadcast, Reduce and point-to-point move data one
// way, so their readers release each slot (a port signal after the
// unpack: a frame back) and their writers take the release of launch
// k−portLLDepth as a credit at the start of launch k (plan.Op.Credits), as
// the memory-channel LL plans do with stores two launches behind. Their
// scratch has portLLDepth parts (plan.Plan.WindowDepth), not two: a
// release takes a round trip through both proxies, two frame writes of
// 5–7 µs on loopback (docs/network.md), so with two parts a writer that
// runs ahead of its reader waits for it every other launch.
//
// Scratch: 2 halves (portLLDepth parts in the one-way plans) × 2(n−1)
// slots (a receive slot per peer, then a staging slot per peer) of packets
// for PortLLMaxBytes of data, in host memory; the same layout on every
// rank, whatever it sends, since a writer addresses the reader's slots by
// its own layout.

// portLLDepth is the number of scratch parts of the one-way LL port plans
// (Broadcast, Reduce, point-to-point): how many launches a writer may run
// ahead of its reader's releases. NCCL keeps NCCL_STEPS = 8 steps in
// flight per connection (src/include/device.h); 4 covers a release's round
// trip through both proxies at one frame write per launch: on 2×H100 over
// sockets, 64 B broadcast 26 → 12 µs and reduce 23 → 13 against two
// parts (docs/bench/2026-11-26k-h100x2/, calls 3 and 8).
const portLLDepth = 4

// PortLLMaxBytes is DefaultConfig's Config.PortLLMaxBytes: the largest
// segment (count × element size) the LL port plans serve. LL packets
// double the bytes on the wire and in host memory, so they pay only while
// a call's time is the round trip, not the bytes: on 2×H100 over sockets
// the windowed port plans were faster from 32 KB segments on in every
// collective (with a bound of 16 KiB against 64: broadcast 32 KB 13–14
// against 21–22 µs, 64 KB 20 against 32–33; all_reduce 32 KB 42–50
// against 83–90; alltoall 64 KB 60 against 85–89;
// docs/bench/2026-11-27-h100x2/, call 7).
const PortLLMaxBytes = 16 << 10

// portLL reports whether the LL port plans serve coll: with staged sends
// (nodes and host windows) and a positive bound.
func (c Config) portLL(coll Collective) bool {
	return c.stageSends() && c.PortLLMaxBytes > 0 && coll <= SendRecv
}

// PortLLPlan is the LL port plan of a collective, with root for Broadcast
// and Reduce, across nodes where the network writes host windows
// (Config.HostWindows, Config.Nodes); an error wrapping ErrNoPlan
// otherwise. SendRecv's has the argument slots of P2PPlan (SendArg,
// RecvArg, SelfArg) and moves raw bytes (plan.Uint8).
func PortLLPlan(c Config, coll Collective, root int) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if !c.stageSends() {
		return nil, fmt.Errorf("algorithms: the LL plans over port channels need ranks across nodes and host windows: %w", ErrNoPlan)
	}
	if coll.Rooted() {
		if err := c.checkRoot(root); err != nil {
			return nil, err
		}
	}
	chs, all := c.channels(), c.others()
	m := len(chs)
	put := func(ci int, src plan.Ref) plan.Op {
		o := plan.PortPut(ci, plan.All, 0, plan.RS(ci, slotOf(c.Rank, chs[ci].Peer)), src)
		o.Stage = 1 + m + ci
		return o
	}
	whole := func(dst plan.Ref, srcs ...plan.Ref) plan.Op {
		return plan.Transfer(plan.All, 0, []plan.Ref{dst}, srcs...)
	}
	reduce := func(srcs []plan.Ref) []plan.Op {
		return combineChain(func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(plan.All, 0, dsts, srcs...) }, plan.L(plan.Output), srcs)
	}
	// The release of a reader's slot, and the writer's credit for it.
	release := func(chs ...int) []plan.Op { return releases(chs, 0) }
	credit := func(chs ...int) []plan.Op { return creditWaits(chs, 0, portLLDepth) }
	var g plan.Group    // the one group of every plan but SendRecv's
	var gs []plan.Group // SendRecv's groups
	name, sems := "", 0
	switch coll {
	case AllGather, AllToAll:
		// Every peer's segment from its slot; the own one copied.
		src := func(peer int) plan.Ref { return plan.L(plan.Input) }
		name = "all_gather"
		if coll == AllToAll {
			src = func(peer int) plan.Ref { return plan.L(plan.Input).At(peer) }
			name = "alltoall"
		}
		var puts, gets []plan.Op
		for ci, ch := range chs {
			puts = append(puts, put(ci, src(ch.Peer)))
			gets = append(gets, whole(plan.L(plan.Output).At(ch.Peer), plan.LS(ci)))
		}
		g.Ops = cat(puts, []plan.Op{whole(plan.L(plan.Output).At(c.Rank), src(c.Rank))}, gets)
	case ReduceScatter, AllReduce:
		// The own input (segment) combined with every peer's slot.
		seg := func(peer int) plan.Ref { return plan.L(plan.Input).At(peer) }
		name = "reduce_scatter"
		if coll == AllReduce {
			seg = func(int) plan.Ref { return plan.L(plan.Input) }
			name = "all_reduce-1pa"
		}
		srcs := []plan.Ref{seg(c.Rank)}
		for ci, ch := range chs {
			g.Ops = append(g.Ops, put(ci, seg(ch.Peer)))
			srcs = append(srcs, plan.LS(ci))
		}
		g.Ops = append(g.Ops, reduce(srcs)...)
	case Broadcast:
		name, sems = fmt.Sprintf("broadcast-r%d", root), 1
		if c.Rank == root {
			g.Before = credit(all...)
			for ci := range chs {
				g.Ops = append(g.Ops, put(ci, plan.L(plan.Input)))
			}
			g.Ops = append(g.Ops, whole(plan.L(plan.Output), plan.L(plan.Input)))
		} else {
			rc := c.chanOf(root)
			g.Ops = cat([]plan.Op{whole(plan.L(plan.Output), plan.LS(rc))}, release(rc))
		}
	case Reduce:
		name, sems = fmt.Sprintf("reduce-r%d", root), 1
		if c.Rank == root {
			srcs := []plan.Ref{plan.L(plan.Input)}
			for ci := range chs {
				srcs = append(srcs, plan.LS(ci))
			}
			g.Ops = cat(reduce(srcs), release(all...))
		} else {
			rc := c.chanOf(root)
			g.Before = credit(rc)
			g.Ops = []plan.Op{put(rc, plan.L(plan.Input))}
		}
	case SendRecv:
		// Per peer a send group and a receive group, one block each
		// (every block's put is a frame), and the copy to itself.
		name, sems = "sendrecv", 1
		for ci, ch := range chs {
			gs = append(gs,
				plan.Group{Blocks: 1, Arg: SendArg(c.Rank, ch.Peer), Before: credit(ci), Ops: []plan.Op{put(ci, plan.L(plan.Input))}, Span: c.PortLLMaxBytes},
				plan.Group{Blocks: 1, Arg: RecvArg(c.Rank, ch.Peer), Ops: cat([]plan.Op{whole(plan.L(plan.Output), plan.LS(ci))}, release(ci)), Span: c.PortLLMaxBytes})
		}
		gs = append(gs, plan.Group{Blocks: 1, Arg: SelfArg(c.NRanks), Ops: []plan.Op{whole(plan.L(plan.Output), plan.L(plan.Input))}})
	default:
		return nil, fmt.Errorf("algorithms: %v has no LL plan over port channels: %w", coll, ErrNoPlan)
	}
	if gs == nil {
		g.Blocks = 1
		gs = []plan.Group{g}
	}
	threads := c.Threads
	p := &plan.Plan{Name: fmt.Sprintf("%s-%s-%s-1x%d", name, PortFamily, c.LL, threads), Rank: c.Rank, NRanks: c.NRanks,
		Channels: c.portChannels(), Threads: threads, Scratch: c.LL, ScratchSlots: 2 * m, MaxBytes: c.PortLLMaxBytes,
		Semaphores: sems, StageSends: true, Groups: gs}
	if sems > 0 { // one way: releases and credits
		p.WindowDepth = portLLDepth
		p.Name += fmt.Sprintf("-d%d", portLLDepth)
	}
	p.Name += "-hs" // staged sends, as the windowed port plans name them
	return p, p.Validate()
}
