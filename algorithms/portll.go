package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// LL plans over port channels, for small messages between ranks that are
// each alone on their node (Config.stageSends: the network's host
// windows). A staged HB port plan (port.go) sends every window as a put
// and a "data" signal, and its reader polls the semaphore, then reads the
// slot, then releases it with a signal back: two frames each way through
// both proxies per call, two pushes and two reads of host memory over
// PCIe on the critical path (docs/network.md, "Where a hop's time goes").
// Here each put carries its own completion, as NCCL's LL protocol does
// over its network transports: the sender's block writes LL packets into
// a staging slot of its host-memory scratch and pushes one trigger, the
// put of those bytes into its slot of the peer's scratch (plan/port.go,
// "LL puts"); the reader polls the packets' flags there. No semaphores,
// no signals, no flushes: one frame per peer and call.
//
// Why no credits. Slots alternate halves by launch. The plans here are
// all-pairs and symmetric: in every launch each rank puts to and reads
// from every peer. Rank a writes half h of peer b's slot (and its own
// staging slot's half h) in launch k+2 only after its launch k+1, which
// read b's launch-(k+1) packets, which b wrote after finishing launch k,
// in which it read what a wrote into half h — and those packets had left
// a's staging slot, or b could not have read them. So every rewrite of a
// half follows the read of what it held, with no message for it.
//
// Scratch: 2 halves × 2(n−1) slots (a receive slot per peer, then a
// staging slot per peer) of packets for PortLLMaxBytes of data, in host
// memory.

// PortLLMaxBytes is DefaultConfig's Config.PortLLMaxBytes: the largest
// segment (count × element size) the LL port plans serve. LL packets
// double the bytes on the wire and in host memory, so they pay only while
// a call's time is the round trip, not the bytes; a first bound, measured
// against the staged HB plans in docs/network.md.
const PortLLMaxBytes = 64 << 10

// portLL reports whether the LL port plans serve coll: collectives whose
// plans are all-pairs and symmetric (see above), with staged sends.
func (c Config) portLL(coll Collective) bool {
	if !c.stageSends() || c.PortLLMaxBytes <= 0 {
		return false
	}
	switch coll {
	case AllGather, AllToAll, ReduceScatter, AllReduce:
		return true
	}
	return false
}

// PortLLPlan is the LL port plan of a collective (AllGather, AllToAll,
// ReduceScatter, AllReduce) where every rank is alone on its node and the
// network writes host windows (Config.HostWindows, Config.Nodes); an error
// wrapping ErrNoPlan otherwise.
func PortLLPlan(c Config, coll Collective) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if !c.stageSends() {
		return nil, fmt.Errorf("algorithms: the LL plans over port channels need every rank alone on its node and host windows: %w", ErrNoPlan)
	}
	chs := c.channels()
	m := len(chs)
	var puts, rest []plan.Op
	put := func(ci int, src plan.Ref) {
		o := plan.PortPut(ci, plan.All, 0, plan.RS(ci, slotOf(c.Rank, chs[ci].Peer)), src)
		o.Stage = 1 + m + ci
		puts = append(puts, o)
	}
	whole := func(dst plan.Ref, srcs ...plan.Ref) plan.Op {
		return plan.Transfer(plan.All, 0, []plan.Ref{dst}, srcs...)
	}
	name := ""
	switch coll {
	case AllGather, AllToAll:
		// Every peer's segment from its slot; the own one copied.
		src := func(peer int) plan.Ref { return plan.L(plan.Input) }
		name = "all_gather"
		if coll == AllToAll {
			src = func(peer int) plan.Ref { return plan.L(plan.Input).At(peer) }
			name = "alltoall"
		}
		rest = append(rest, whole(plan.L(plan.Output).At(c.Rank), src(c.Rank)))
		for ci, ch := range chs {
			put(ci, src(ch.Peer))
			rest = append(rest, whole(plan.L(plan.Output).At(ch.Peer), plan.LS(ci)))
		}
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
			put(ci, seg(ch.Peer))
			srcs = append(srcs, plan.LS(ci))
		}
		rest = combineChain(func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(plan.All, 0, dsts, srcs...) }, plan.L(plan.Output), srcs)
	default:
		return nil, fmt.Errorf("algorithms: %v has no LL plan over port channels: %w", coll, ErrNoPlan)
	}
	threads := c.Threads
	p := &plan.Plan{Name: fmt.Sprintf("%s-%s-%s-1x%d-hs", name, PortFamily, c.LL, threads), Rank: c.Rank, NRanks: c.NRanks,
		Channels: c.portChannels(), Threads: threads, Scratch: c.LL, ScratchSlots: 2 * m, MaxBytes: c.PortLLMaxBytes,
		StageSends: true, Groups: []plan.Group{{Blocks: 1, Ops: cat(puts, rest)}}}
	return p, p.Validate()
}
