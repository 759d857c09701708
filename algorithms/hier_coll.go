package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Hierarchical AllGather and ReduceScatter (2PH, as AllReduce2PH in
// hier.go) for L ranks on each of N nodes. The flat port-channel plans send
// every rank's segment to each of the (N−1)·L ranks on other nodes; these
// send it to the N−1 counterparts only (the ranks of the same local index
// on the other nodes) and finish inside the node over memory channels, so
// each rank puts (N−1)·S on the network instead of (N−1)·L·S (S: one
// rank's segment). Both run in windows of Config.HB.Window bytes per
// segment, with Config.HB's blocks and threads; slot halves alternate by
// window as in every windowed plan. Their windows are split as
// AllReduce2PH's (plan.Plan.NetSlot): the slots the node's peers write in
// device memory, the slots the counterparts write and those staged for
// them in the network windows.

// Semaphores of AllGather2PH and ReduceScatter2PH (per block: base + part).
const (
	gData1 = iota
	gFree1
	gData2
	gFree2
	gDone
	gSems
)

// hierSetup is what both plans share: the layout, the channels (memory
// channels to the local peers first, then port channels to the
// counterparts), their indices and the block count.
type hierSetup struct {
	lay    layout
	chs    []plan.Channel
	lc, rc []int // channel indices of the local peers, of the counterparts
	s      Shape
}

func (c Config) hierSetup(what string) (hierSetup, error) {
	if err := c.validateBounded(); err != nil {
		return hierSetup{}, err
	}
	lay, ok := c.hierLayout()
	if !ok {
		return hierSetup{}, fmt.Errorf("algorithms: hierarchical %s needs ≥ 2 nodes of equal size ≥ 2 (nodes by rank: %v)", what, c.Nodes)
	}
	if err := validShape("hierarchical", c.HB); err != nil {
		return hierSetup{}, err
	}
	h := hierSetup{lay: lay, s: c.HB, chs: lay.channels()}
	for i := range lay.peers {
		h.lc = append(h.lc, i)
	}
	for j := range lay.counter {
		h.rc = append(h.rc, lay.local-1+j)
	}
	return h, nil
}

// plan wraps the group of a hierarchical plan whose slots from netSlot on
// are network windows; at its end every channel exchanges "done".
func (h hierSetup) plan(c Config, name string, slots, netSlot int, ops []plan.Op) (*plan.Plan, error) {
	return h.planOn(c, name, slots, netSlot, ops, h.lc, h.rc)
}

// planOn is plan whose end exchanges "done" on the local channels lc and
// the port channels rc only (the channels the rank uses; the peer on each
// uses it too), and flushes rc.
func (h hierSetup) planOn(c Config, name string, slots, netSlot int, ops []plan.Op, lc, rc []int) (*plan.Plan, error) {
	b := h.s.Blocks
	all := append(append([]int{}, lc...), rc...)
	g := plan.Group{Blocks: b, Window: h.s.Window, NChunks: 1, Ops: ops,
		After: cat(signals(all, sem(gDone, b)), waits(all, sem(gDone, b)), flushes(rc))}
	p := &plan.Plan{Name: fmt.Sprintf("%s-2ph-%dx%d-%dx%d-w%d", name, h.lay.nodes, h.lay.local, b, h.s.Threads, h.s.Window),
		Rank: c.Rank, NRanks: c.NRanks, Channels: h.chs, Threads: h.s.Threads, Unroll: h.s.Unroll, Scratch: plan.Simple,
		ScratchSlots: slots, NetSlot: netSlot, Semaphores: gSems * b, Groups: []plan.Group{g}}
	return p, p.Validate()
}

// AllGather2PH builds the hierarchical AllGather of one rank (node n, local
// index l). In each window:
//
//  1. inter-node: put the input window into this rank's slot of every
//     counterpart (port channels); wait for theirs. This rank now holds
//     the segments of local index l of all N nodes.
//  2. intra-node: write each of those N segments into this rank's slot
//     set of every local peer and into its own output (one transfer per
//     segment, all destinations at once); wait for the peers' N segments
//     each and copy them into the output.
//
// The block copies the input window into a network window once, and the
// puts to every counterpart leave from there.
//
// Scratch: 2 halves × ((L−1)·N + N) window-sized slots, the last N
// network windows.
func AllGather2PH(c Config) (*plan.Plan, error) {
	h, err := c.hierSetup("AllGather")
	if err != nil {
		return nil, err
	}
	L, N, n, l, b := h.lay.local, h.lay.nodes, h.lay.node, h.lay.idx, h.s.Blocks
	netSlot := (L - 1) * N
	slot2 := func(i, k int) int { return i*N + k }  // node k's segment from the local peer at position i
	slot1 := func(j int) int { return netSlot + j } // from the counterpart at node-list position j
	stage := netSlot + N - 1                        // this rank's input, staged for the network
	var ops []plan.Op
	// Phase 1: exchange with the counterparts.
	ops = append(ops, skip(acks(h.rc, sem(gFree1, b)), 2, 0)...)
	ops = append(ops, xfer([]plan.Ref{plan.LS(stage)}, plan.L(plan.Input)))
	for j, ci := range h.rc {
		ops = append(ops, plan.PortPut(ci, 0, 1, plan.RS(ci, slot1(slotOf(n, h.lay.nodeAt(j)))), plan.LS(stage)))
	}
	ops = append(ops, signals(h.rc, sem(gData1, b))...)
	ops = append(ops, waits(h.rc, sem(gData1, b))...)
	// Phase 2: spread the N segments of local index l inside the node.
	ops = append(ops, skip(acks(h.lc, sem(gFree2, b)), 2, 0)...)
	for k := 0; k < N; k++ {
		src := plan.L(plan.Input)
		if k != n {
			src = plan.LS(slot1(slotOf(k, n)))
		}
		dsts := []plan.Ref{plan.L(plan.Output).At(h.lay.byNode[k][l])}
		for ci := range h.lc {
			dsts = append(dsts, plan.RS(ci, slot2(slotOf(l, localIndexOf(ci, l)), k)))
		}
		ops = append(ops, xfer(dsts, src))
	}
	ops = append(ops, skip(releases(h.rc, sem(gFree1, b)), 0, 2)...)
	ops = append(ops, signals(h.lc, sem(gData2, b))...)
	ops = append(ops, waits(h.lc, sem(gData2, b))...)
	for ci := range h.lc {
		m := localIndexOf(ci, l)
		for k := 0; k < N; k++ {
			ops = append(ops, xfer([]plan.Ref{plan.L(plan.Output).At(h.lay.byNode[k][m])}, plan.LS(slot2(ci, k))))
		}
	}
	ops = append(ops, skip(releases(h.lc, sem(gFree2, b)), 0, 2)...)
	return h.plan(c, "all_gather", netSlot+N, netSlot, ops)
}

// ReduceScatter2PH builds the hierarchical ReduceScatter of one rank (node
// n, local index l). Rank (k, l)'s output is the sum over every rank of
// its input segment (k, l). In each window:
//
//  1. intra-node: write, for every node k, input segment (k, m) into this
//     rank's slot set of local peer m; wait for the peers' segments (k, l)
//     and reduce, for every node k, the L partials of segment (k, l):
//     into the output for k = n, into a staging slot for the others.
//  2. inter-node: put each staged partial into this rank's slot of the
//     counterpart on its node (port channels), flush (the engines read the
//     staging slots), wait for the counterparts' partials and add them to
//     the output.
//
// The reduction happens in two stages, so the plan serves every operator
// but Avg (Choice.Staged; PreMulSum scales the input where phase 1 reads
// it). Scratch: 2 halves × ((L−1)·N + 2(N−1))
// window-sized slots, the last 2(N−1) network windows.
func ReduceScatter2PH(c Config) (*plan.Plan, error) {
	h, err := c.hierSetup("ReduceScatter")
	if err != nil {
		return nil, err
	}
	L, N, n, l, b := h.lay.local, h.lay.nodes, h.lay.node, h.lay.idx, h.s.Blocks
	slot1 := func(i, k int) int { return i*N + k }          // node k's partial from the local peer at position i
	stage := func(j int) int { return (L-1)*N + j }         // this rank's partial for the counterpart at position j
	slot2 := func(j int) int { return (L-1)*N + N - 1 + j } // from the counterpart at position j
	var ops []plan.Op
	// Phase 1: intra-node reduce of every node's segment of local index l.
	ops = append(ops, skip(acks(h.lc, sem(gFree1, b)), 2, 0)...)
	for ci := range h.lc {
		m := localIndexOf(ci, l)
		for k := 0; k < N; k++ {
			ops = append(ops, xfer([]plan.Ref{plan.RS(ci, slot1(slotOf(l, m), k))}, plan.L(plan.Input).At(h.lay.byNode[k][m])))
		}
	}
	ops = append(ops, signals(h.lc, sem(gData1, b))...)
	ops = append(ops, waits(h.lc, sem(gData1, b))...)
	for k := 0; k < N; k++ {
		srcs := []plan.Ref{plan.L(plan.Input).At(h.lay.byNode[k][l])}
		for ci := range h.lc {
			srcs = append(srcs, plan.LS(slot1(ci, k)))
		}
		dst := plan.L(plan.Output)
		if k != n {
			dst = plan.LS(stage(slotOf(k, n)))
		}
		ops = append(ops, xfer([]plan.Ref{dst}, srcs...))
	}
	ops = append(ops, skip(releases(h.lc, sem(gFree1, b)), 0, 2)...)
	// Phase 2: exchange the partials with the counterparts.
	ops = append(ops, skip(acks(h.rc, sem(gFree2, b)), 2, 0)...)
	for j, ci := range h.rc {
		ops = append(ops, plan.PortPut(ci, 0, 1, plan.RS(ci, slot2(slotOf(n, h.lay.nodeAt(j)))), plan.LS(stage(j))))
	}
	ops = append(ops, signals(h.rc, sem(gData2, b))...)
	ops = append(ops, flushes(h.rc)...)
	ops = append(ops, waits(h.rc, sem(gData2, b))...)
	srcs := []plan.Ref{plan.L(plan.Output)}
	for j := range h.rc {
		srcs = append(srcs, plan.LS(slot2(j)))
	}
	ops = append(ops, xfer([]plan.Ref{plan.L(plan.Output)}, srcs...))
	ops = append(ops, skip(releases(h.rc, sem(gFree2, b)), 0, 2)...)
	return h.plan(c, "reduce_scatter", (L-1)*N+2*(N-1), (L-1)*N, ops)
}

// Broadcast2PH builds the hierarchical Broadcast of one rank (node n,
// local index l) from root (node nr, local index lr). The root's
// counterparts (local index lr on the other nodes) lead their nodes. In
// each window:
//
//  1. inter-node: the root copies its input window into a network window
//     and puts it into the slot of every counterpart (port channels); a
//     leader waits for it.
//  2. intra-node: the root (on its node) and each leader (on theirs)
//     write the window into their own output and into the slot of every
//     local peer (one transfer, all destinations at once); the peers wait
//     for it and copy it into their outputs. A leader releases the root's
//     slot after that transfer.
//
// The flat port plan (BroadcastPort) puts the root's window on the network
// once per other rank, the root's own node's peers included (over
// loopback for emulated nodes); this one puts it once per other node and
// moves the rest over memory channels. The ranks of local index other
// than lr use no port channel, and each rank exchanges "done" only on the
// channels it uses. Scratch: 2 halves × 3 window-sized slots on every
// rank (from the leader; then the network windows: from the root, and the
// root's staged input).
func Broadcast2PH(c Config, root int) (*plan.Plan, error) {
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	h, err := c.hierSetup("Broadcast")
	if err != nil {
		return nil, err
	}
	lay, b := h.lay, h.s.Blocks
	nr := c.Nodes[root]
	lr := 0
	for lr < lay.local && lay.byNode[nr][lr] != root {
		lr++
	}
	const fromLeader, fromRoot, staged = 0, 1, 2
	// spread writes src into the output and every local peer's slot.
	spread := func(src plan.Ref) []plan.Op {
		dsts := []plan.Ref{plan.L(plan.Output)}
		for _, ci := range h.lc {
			dsts = append(dsts, plan.RS(ci, fromLeader))
		}
		return cat(skip(acks(h.lc, sem(gFree2, b)), 2, 0), []plan.Op{xfer(dsts, src)}, signals(h.lc, sem(gData2, b)))
	}
	var ops []plan.Op
	lc, rc := h.lc, h.rc
	switch {
	case c.Rank == root:
		ops = cat(skip(acks(h.rc, sem(gFree1, b)), 2, 0), []plan.Op{xfer([]plan.Ref{plan.LS(staged)}, plan.L(plan.Input))})
		for _, ci := range h.rc {
			ops = append(ops, plan.PortPut(ci, 0, 1, plan.RS(ci, fromRoot), plan.LS(staged)))
		}
		ops = cat(ops, signals(h.rc, sem(gData1, b)), spread(plan.L(plan.Input)))
	case lay.idx == lr:
		j := nr // the root's node among the counterparts (node order, this node left out)
		if nr > lay.node {
			j--
		}
		rc = []int{h.rc[j]}
		ops = cat(waits(rc, sem(gData1, b)), spread(plan.LS(fromRoot)), skip(releases(rc, sem(gFree1, b)), 0, 2))
	default:
		ci := lr // the leader's local channel (channels skip this rank)
		if lr > lay.idx {
			ci--
		}
		lc, rc = []int{ci}, nil
		ops = cat(waits(lc, sem(gData2, b)), []plan.Op{xfer([]plan.Ref{plan.L(plan.Output)}, plan.LS(fromLeader))},
			skip(releases(lc, sem(gFree2, b)), 0, 2))
	}
	return h.planOn(c, fmt.Sprintf("broadcast-r%d", root), 3, 1, ops, lc, rc)
}
