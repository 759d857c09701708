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
//   - ReduceScatter: put input segment (m, j) — the segment of the rank of
//     local index j on node m — into counterpart (m, l), L puts each;
//     sum, for every local index j, the N segments (n, j) that local index
//     l holds (its input's and the counterparts') in node order into R_j:
//     R_l into the output, the others as packets into local peer j's slot;
//     sum the L partials of segment (n, l) in local-index order into the
//     output.
//
// One network hop and one NVLink hop, one frame per counterpart (L for
// ReduceScatter: an LL put stages only input, one segment each). No
// semaphores: every rank puts to and reads from each of its peers in every
// launch, so a half is rewritten only after its packets were read (the
// argument of portll.go, made for each hop). Windows are split
// (plan.Plan.NetSlot): the slots the local peers write are device memory,
// the counterparts' slots and the staging slots of the puts are network
// windows, host memory the network's receivers store into with the CPU.

// maxHierLLSlots bounds a hierarchical LL ReduceScatter's scratch slots
// (2·(N−1)·L + L−1, each of PortLLMaxBytes of packets per half): past it
// the flat LL plan serves.
const maxHierLLSlots = 64

// HierLLPlan builds the hierarchical LL plan of coll (AllGather,
// AllReduce or ReduceScatter) for one rank; an error wrapping ErrNoPlan
// where the layout (hierLayout, fits), the network (host windows) or the
// collective does not allow one.
func HierLLPlan(c Config, coll Collective) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	lay, ok := c.hierLayout()
	if !ok || !lay.fits() || !c.stageSends() || c.PortLLMaxBytes <= 0 || (coll != AllGather && coll != AllReduce && coll != ReduceScatter) {
		return nil, fmt.Errorf("algorithms: %v has no hierarchical LL plan here (it needs AllGather, AllReduce or ReduceScatter, ≥ 2 nodes of equal size ≥ 2, host windows; nodes by rank: %v): %w", coll, c.Nodes, ErrNoPlan)
	}
	if coll == ReduceScatter && 2*(lay.nodes-1)*lay.local+lay.local-1 > maxHierLLSlots {
		return nil, fmt.Errorf("algorithms: the hierarchical LL ReduceScatter of %d nodes of %d ranks needs more than %d slots: %w", lay.nodes, lay.local, maxHierLLSlots, ErrNoPlan)
	}
	L, N, n, l := lay.local, lay.nodes, lay.node, lay.idx
	whole := func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(plan.All, 0, dsts, srcs...) }
	// Device windows first: per local peer, per (AllGather) node, a slot;
	// then per counterpart a receive slot and a staging slot per put
	// (ReduceScatter: one per local index).
	perPeer, puts := 1, 1
	switch coll {
	case AllGather:
		perPeer = N
	case ReduceScatter:
		puts = L
	}
	netSlot := (L - 1) * perPeer
	recv := func(j, s int) int { return netSlot + j*puts + s }               // from the counterpart at node-list position j, its put s
	stage := func(j, s int) int { return netSlot + (N-1)*puts + j*puts + s } // staging of this rank's put s to it
	var ops []plan.Op
	for j := range lay.counter {
		ci, m := L-1+j, lay.nodeAt(j)
		for s := 0; s < puts; s++ {
			src := plan.L(plan.Input)
			if coll == ReduceScatter {
				src = src.At(lay.byNode[m][s])
			}
			put := plan.PortPut(ci, plan.All, 0, plan.RS(ci, recv(slotOf(n, m), s)), src)
			put.Stage = 1 + stage(j, s)
			ops = append(ops, put)
		}
	}
	// fromNode is segment k of local index l here (put s of it): the
	// input, or the counterpart's packets.
	fromNode := func(k, s int) plan.Ref {
		if k == n {
			if coll == ReduceScatter {
				return plan.L(plan.Input).At(lay.byNode[n][s])
			}
			return plan.L(plan.Input)
		}
		return plan.LS(recv(slotOf(k, n), s))
	}
	// partials sums, in local-index order, this rank's partial (in the
	// output) and the local peers' (their packets in this rank's slots).
	partials := func() plan.Op {
		var srcs []plan.Ref
		for j := 0; j < L; j++ {
			if j == l {
				srcs = append(srcs, plan.L(plan.Output))
			} else {
				srcs = append(srcs, plan.LS(slotOf(j, l)))
			}
		}
		return whole([]plan.Ref{plan.L(plan.Output)}, srcs...)
	}
	name := "all_gather"
	switch coll {
	case AllGather:
		for k := 0; k < N; k++ {
			dsts := []plan.Ref{plan.L(plan.Output).At(lay.byNode[k][l])}
			for ci := 0; ci < L-1; ci++ {
				dsts = append(dsts, plan.RS(ci, slotOf(l, localIndexOf(ci, l))*N+k))
			}
			ops = append(ops, whole(dsts, fromNode(k, 0)))
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
			srcs = append(srcs, fromNode(k, 0))
		}
		dsts := []plan.Ref{plan.L(plan.Output)}
		for ci := 0; ci < L-1; ci++ {
			dsts = append(dsts, plan.RS(ci, slotOf(l, localIndexOf(ci, l))))
		}
		ops = append(ops, whole(dsts, srcs...), partials())
	case ReduceScatter:
		name = "reduce_scatter"
		// R_j for every local index j: this rank's own into the output
		// first, then the local peers' into their slots.
		order := []int{l}
		for ci := 0; ci < L-1; ci++ {
			order = append(order, localIndexOf(ci, l))
		}
		for _, j := range order {
			var srcs []plan.Ref
			for k := 0; k < N; k++ {
				srcs = append(srcs, fromNode(k, j))
			}
			dst := plan.L(plan.Output)
			if j != l {
				dst = plan.RS(slotOf(j, l), slotOf(l, j))
			}
			ops = append(ops, whole([]plan.Ref{dst}, srcs...))
		}
		ops = append(ops, partials())
	}
	threads := c.Threads
	p := &plan.Plan{Name: fmt.Sprintf("%s-2ph-%dx%d-%s-1x%d-hs", name, N, L, c.LL, threads), Rank: c.Rank, NRanks: c.NRanks,
		Channels: lay.channels(), Threads: threads, Scratch: c.LL, ScratchSlots: netSlot + 2*(N-1)*puts, NetSlot: netSlot,
		MaxBytes: c.PortLLMaxBytes, StageSends: true, Groups: []plan.Group{{Blocks: 1, Ops: ops}}}
	return p, p.Validate()
}
