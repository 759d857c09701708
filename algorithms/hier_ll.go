package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Hierarchical LL plans: small AllGather and AllReduce across nodes of L
// ranks each (N nodes, Config.Nodes) over LL packets, where the network
// writes host windows (Config.stageSends). The flat LL port plans
// (portll.go) send a frame to every other rank, the node's own peers
// included, over the network's loopback; these send one frame to each of
// the N−1 counterparts (the ranks of the same local index on the other
// nodes) and meet the node's peers over memory channels, LL packets
// stored over NVLink:
//
//   - AllGather: put the input as packets into this rank's slot of every
//     counterpart (port channels, staged in a network window); then, for
//     every node k, write segment k of local index l — the input, or the
//     counterpart's packets — into the output and, as packets, into this
//     rank's slot set of every local peer; read the local peers' N
//     segments each into the output.
//   - AllReduce: put the input into every counterpart; sum the N inputs of
//     local index l in node order into P_l, stored into the output and, as
//     packets, into this rank's slot of every local peer; sum the L
//     partials in local-index order into the output. Every rank of local
//     index l computes the same P_l, and every rank sums the partials in
//     the same order, so every rank ends with the same bits. It reduces in
//     two stages (Choice.Staged).
//
// One network hop and one NVLink hop, one frame per counterpart. No
// semaphores: every rank puts to and reads from each of its peers in every
// launch, so a half is rewritten only after its packets were read (the
// argument of portll.go, made for each hop). Windows are split
// (plan.Plan.NetSlot): the slots the local peers write are device memory,
// the counterparts' slots and the staging slots of the puts are network
// windows, host memory the network's receivers store into with the CPU.

// HierLLPlan builds the hierarchical LL plan of coll (AllGather or
// AllReduce) for one rank; an error wrapping ErrNoPlan where the layout
// (hierLayout, fits), the network (host windows) or the collective does
// not allow one.
func HierLLPlan(c Config, coll Collective) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	lay, ok := c.hierLayout()
	if !ok || !lay.fits() || !c.stageSends() || c.PortLLMaxBytes <= 0 || (coll != AllGather && coll != AllReduce) {
		return nil, fmt.Errorf("algorithms: %v has no hierarchical LL plan here (it needs AllGather or AllReduce, ≥ 2 nodes of equal size ≥ 2, host windows; nodes by rank: %v): %w", coll, c.Nodes, ErrNoPlan)
	}
	L, N, n, l := lay.local, lay.nodes, lay.node, lay.idx
	var chs []plan.Channel
	for _, p := range lay.peers {
		chs = append(chs, plan.Channel{Peer: p})
	}
	for _, p := range lay.counter {
		chs = append(chs, plan.Channel{Peer: p, Port: true, Net: true})
	}
	nodeAt := func(j int) int { // node of position j in this rank's list of other nodes
		if j >= n {
			return j + 1
		}
		return j
	}
	whole := func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(plan.All, 0, dsts, srcs...) }
	// Device windows first: per local peer, per (AllGather) node, a slot.
	perPeer := 1
	if coll == AllGather {
		perPeer = N
	}
	netSlot := (L - 1) * perPeer
	recv := func(j int) int { return netSlot + j }          // from the counterpart at node-list position j
	stage := func(j int) int { return netSlot + N - 1 + j } // staging of the put to it
	var ops []plan.Op
	for j := range lay.counter {
		ci := L - 1 + j
		put := plan.PortPut(ci, plan.All, 0, plan.RS(ci, recv(slotOf(n, nodeAt(j)))), plan.L(plan.Input))
		put.Stage = 1 + stage(j)
		ops = append(ops, put)
	}
	// fromNode is segment k of local index l here: the input or the
	// counterpart's packets.
	fromNode := func(k int) plan.Ref {
		if k == n {
			return plan.L(plan.Input)
		}
		return plan.LS(recv(slotOf(k, n)))
	}
	name := "all_gather"
	switch coll {
	case AllGather:
		for k := 0; k < N; k++ {
			dsts := []plan.Ref{plan.L(plan.Output).At(lay.byNode[k][l])}
			for ci := 0; ci < L-1; ci++ {
				dsts = append(dsts, plan.RS(ci, slotOf(l, localIndexOf(ci, l))*N+k))
			}
			ops = append(ops, whole(dsts, fromNode(k)))
		}
		for ci := 0; ci < L-1; ci++ {
			m := localIndexOf(ci, l)
			for k := 0; k < N; k++ {
				ops = append(ops, whole([]plan.Ref{plan.L(plan.Output).At(lay.byNode[k][m])}, plan.LS(ci*N+k)))
			}
		}
	case AllReduce:
		name = "all_reduce"
		var srcs []plan.Ref
		for k := 0; k < N; k++ {
			srcs = append(srcs, fromNode(k))
		}
		dsts := []plan.Ref{plan.L(plan.Output)}
		for ci := 0; ci < L-1; ci++ {
			dsts = append(dsts, plan.RS(ci, slotOf(l, localIndexOf(ci, l))))
		}
		ops = append(ops, whole(dsts, srcs...))
		srcs = nil
		for j := 0; j < L; j++ {
			if j == l {
				srcs = append(srcs, plan.L(plan.Output))
			} else {
				srcs = append(srcs, plan.LS(slotOf(j, l)))
			}
		}
		ops = append(ops, whole([]plan.Ref{plan.L(plan.Output)}, srcs...))
	}
	threads := c.Threads
	p := &plan.Plan{Name: fmt.Sprintf("%s-2ph-%dx%d-%s-1x%d-hs", name, N, L, c.LL, threads), Rank: c.Rank, NRanks: c.NRanks,
		Channels: chs, Threads: threads, Scratch: c.LL, ScratchSlots: netSlot + 2*(N-1), NetSlot: netSlot,
		MaxBytes: c.PortLLMaxBytes, StageSends: true, Groups: []plan.Group{{Blocks: 1, Ops: ops}}}
	return p, p.Validate()
}
