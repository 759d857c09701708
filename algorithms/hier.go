package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Two-phase hierarchical AllReduce (2PH, the MSCCL++ paper's name) for
// ranks on several nodes (Config.Nodes): L ranks on each of N nodes, the
// message cut into L shards, shard l owned by the rank of local index l on
// every node. In each window:
//
//  1. intra-node reduce-scatter over memory channels: every rank writes
//     shard m of its input into its slot of local peer m's scratch, and
//     reduces shard l of its input with the slots into shard l of its
//     output;
//  2. inter-node all-reduce of shard l over port channels (the network's
//     engines) with the ranks of local index l on the other nodes (its
//     counterparts): each puts its partial shard into its slot of every
//     counterpart, flushes, and combines the N partials in node order, so
//     that every counterpart computes the same bits;
//  3. intra-node all-gather over memory channels: every rank writes its
//     reduced shard into its slot of every local peer, which copies it into
//     its output.
//
// Only 1/L of the data crosses the network from each rank, N−1 times, and
// each network link carries the traffic of one rank pair. The reduction
// happens in two stages, so the plan serves every operator but Avg
// (Choice.Staged), which keeps the flat port-channel plan. PreMulSum is
// served: each rank scales its own input where phase 1 reads it
// (plan/premul.go), so the partials that cross nodes are already sums of
// scaled contributions.
//
// Windows are split (plan.Plan.NetSlot): the slots the node's peers
// write (phases 1 and 3) are device memory they map; the slots the
// counterparts write (phase 2), and the staging slot phase 1 reduces into
// and phase 2 puts from, are the network windows, host memory where the
// network writes it (docs/network.md, "Streams and the network path"), so
// no copy engine of the device moves a byte the kernel waits for. The
// port channels carry the Net mark: they go over the network.
//
// Scratch: 2 halves × (2(L−1) + N) window-sized slots, the last N
// network windows.

// Semaphores of AllReduce2PH (per block: base + part).
const (
	hData1 = iota
	hFree1
	hData2
	hFree2
	hData3
	hFree3
	hDone
	hSems
)

// layout is the node structure of Config.Nodes seen from one rank.
type layout struct {
	nodes, local int     // N nodes, L ranks on each
	node, idx    int     // this rank's node and local index
	peers        []int   // ranks of this node other than this one, by local index
	counter      []int   // ranks of local index idx on the other nodes, by node
	byNode       [][]int // byNode[m][j]: the rank of local index j on node m
}

// hierLayout returns the layout when the hierarchical plan applies: at
// least 2 nodes with the same number of ranks, at least 2 each.
func (c Config) hierLayout() (layout, bool) {
	if len(c.Nodes) != c.NRanks || c.NRanks < 4 {
		return layout{}, false
	}
	var byNode [][]int
	for r, n := range c.Nodes {
		if n < 0 || n >= c.NRanks {
			return layout{}, false
		}
		for len(byNode) <= n {
			byNode = append(byNode, nil)
		}
		byNode[n] = append(byNode[n], r)
	}
	l := layout{nodes: len(byNode), local: len(byNode[0]), node: c.Nodes[c.Rank], byNode: byNode}
	for _, rs := range byNode {
		if len(rs) != l.local {
			return layout{}, false
		}
	}
	if l.nodes < 2 || l.local < 2 {
		return layout{}, false
	}
	for i, r := range byNode[l.node] {
		if r == c.Rank {
			l.idx = i
		} else {
			l.peers = append(l.peers, r)
		}
	}
	for n, rs := range byNode {
		if n != l.node {
			l.counter = append(l.counter, rs[l.idx])
		}
	}
	return l, true
}

// channels are a hierarchical plan's channels: memory channels to the
// node's peers (by local index), then port channels over the network
// (plan.Channel.Net) to the counterparts (by node).
func (l layout) channels() []plan.Channel {
	var chs []plan.Channel
	for _, p := range l.peers {
		chs = append(chs, plan.Channel{Peer: p})
	}
	for _, p := range l.counter {
		chs = append(chs, plan.Channel{Peer: p, Port: true, Net: true})
	}
	return chs
}

// nodeAt is the node of position j in this rank's list of other nodes.
func (l layout) nodeAt(j int) int {
	if j >= l.node {
		return j + 1
	}
	return j
}

// fits reports whether the hierarchical plans serve the layout: a
// transfer combines (or writes) the L ranks of a node or the N nodes'
// partials, at most plan.MaxOperands, and a rank's channels, L−1 local
// peers and N−1 counterparts, are at most plan.MaxPeers. Elsewhere the
// flat port-channel plan serves (hierPlans).
func (l layout) fits() bool {
	return l.local <= plan.MaxOperands && l.nodes <= plan.MaxOperands && l.local-1+l.nodes-1 <= plan.MaxPeers
}

// AllReduce2PH builds the hierarchical AllReduce of one rank. Channels:
// memory channels to the L−1 local peers first, then port channels to the
// N−1 counterparts. It returns an error when Config.Nodes does not give
// at least 2 nodes of equal size ≥ 2.
func AllReduce2PH(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	lay, ok := c.hierLayout()
	if !ok {
		return nil, fmt.Errorf("algorithms: hierarchical AllReduce needs ≥ 2 nodes of equal size ≥ 2 (nodes by rank: %v)", c.Nodes)
	}
	s := c.HB
	if err := validShape("hierarchical", s); err != nil {
		return nil, err
	}
	L, N, b := lay.local, lay.nodes, s.Blocks
	chs := lay.channels()
	lc, rc := make([]int, L-1), make([]int, N-1)
	for i := range lc {
		lc[i] = i
	}
	for i := range rc {
		rc[i] = L - 1 + i
	}
	// Slots: phase 1 from local peer i at i, phase 3 from local peer i at
	// L−1+i (device windows); phase 2 from the counterpart of node-list
	// position j at 2(L−1)+j, and this rank's partial, staged for the
	// network, at 2(L−1)+N−1 (network windows). A sender's position in a
	// receiver's lists is its local index (or node) with the receiver's
	// own left out.
	pos := func(me, them int) int { return slotOf(me, them) }
	slot1 := func(i int) int { return i }
	slot3 := func(i int) int { return L - 1 + i }
	netSlot := 2 * (L - 1)
	slot2 := func(j int) int { return netSlot + j }
	stage := plan.LS(netSlot + N - 1)

	var ops []plan.Op
	// Phase 1: intra-node reduce-scatter.
	ops = append(ops, skip(acks(lc, sem(hFree1, b)), 2, 0)...)
	for ci := range lc {
		m := localIndexOf(ci, lay.idx)
		ops = append(ops, plan.Transfer(m, L, []plan.Ref{plan.RS(ci, slot1(pos(lay.idx, m)))}, plan.L(plan.Input)))
	}
	ops = append(ops, signals(lc, sem(hData1, b))...)
	ops = append(ops, waits(lc, sem(hData1, b))...)
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci := range lc {
		srcs = append(srcs, plan.LS(slot1(ci)))
	}
	ops = append(ops, plan.Transfer(lay.idx, L, []plan.Ref{stage}, srcs...))
	ops = append(ops, skip(releases(lc, sem(hFree1, b)), 0, 2)...)
	// Phase 2: inter-node all-reduce of shard idx with the counterparts.
	ops = append(ops, skip(acks(rc, sem(hFree2, b)), 2, 0)...)
	for j, ci := range rc {
		ops = append(ops, plan.PortPut(ci, lay.idx, L, plan.RS(ci, slot2(pos(lay.node, lay.nodeAt(j)))), stage))
	}
	ops = append(ops, signals(rc, sem(hData2, b))...)
	// The engines read the staging slot: done before the next window of
	// this half rewrites it.
	ops = append(ops, flushes(rc)...)
	ops = append(ops, waits(rc, sem(hData2, b))...)
	srcs = nil
	for n := 0; n < N; n++ {
		switch {
		case n == lay.node:
			srcs = append(srcs, stage)
		case n < lay.node:
			srcs = append(srcs, plan.LS(slot2(n)))
		default:
			srcs = append(srcs, plan.LS(slot2(n-1)))
		}
	}
	ops = append(ops, plan.Transfer(lay.idx, L, []plan.Ref{plan.L(plan.Output)}, srcs...))
	ops = append(ops, skip(releases(rc, sem(hFree2, b)), 0, 2)...)
	// Phase 3: intra-node all-gather.
	ops = append(ops, skip(acks(lc, sem(hFree3, b)), 2, 0)...)
	var dsts []plan.Ref
	for ci := range lc {
		m := localIndexOf(ci, lay.idx)
		dsts = append(dsts, plan.RS(ci, slot3(pos(lay.idx, m))))
	}
	ops = append(ops, plan.Transfer(lay.idx, L, dsts, plan.L(plan.Output)))
	ops = append(ops, signals(lc, sem(hData3, b))...)
	ops = append(ops, waits(lc, sem(hData3, b))...)
	for ci := range lc {
		ops = append(ops, plan.Transfer(localIndexOf(ci, lay.idx), L, []plan.Ref{plan.L(plan.Output)}, plan.LS(slot3(ci))))
	}
	ops = append(ops, skip(releases(lc, sem(hFree3, b)), 0, 2)...)

	all := append(append([]int{}, lc...), rc...)
	g := plan.Group{Blocks: b, Window: s.Window, NChunks: L, Ops: ops,
		After: cat(signals(all, sem(hDone, b)), waits(all, sem(hDone, b)), flushes(rc))}
	p := &plan.Plan{Name: fmt.Sprintf("all_reduce-2ph-%dx%d-%dx%d-w%d", N, L, b, s.Threads, s.Window), Rank: c.Rank, NRanks: c.NRanks,
		Channels: chs, Threads: s.Threads, Unroll: s.Unroll, Scratch: plan.Simple, ScratchSlots: netSlot + N, NetSlot: netSlot,
		Semaphores: hSems * b, Groups: []plan.Group{g}}
	return p, p.Validate()
}

// The hierarchical plans come in two shapes (hierPlans): up to
// hierSmallMaxBytes per rank, at most hierBlocks blocks with windows of at
// most hierSmallWindow; above, Config.HB's. Each block pushes its own put,
// signal and flush per window, a message over the network each, while
// more blocks move the node's part (NVLink, host windows) faster. On 2
// emulated nodes × 2 H100s over sockets (2026-11-27,
// docs/bench/2026-11-27k-h100x4, call 2), against NCCL's socket transport:
// with 32 blocks 256 KB AllReduce, AllGather and ReduceScatter ran at
// 0.35, 0.21 and 0.17× and 4 MB at 0.81–1.16×; with 4 blocks 1.59, 1.09,
// 0.99× and 1.42–2.27×; at 64 MB (16 MB per rank for AllGather and
// ReduceScatter) 32 blocks were 1–15% faster than 4 (1.73–2.38×).
const (
	hierBlocks        = 4
	hierSmallWindow   = 2 << 20
	hierSmallMaxBytes = 8 << 20
)

// hierSmall is c with the small hierarchical plans' shape (see
// hierBlocks), and whether it differs from c's.
func (c Config) hierSmall() (Config, bool) {
	s := c.HB
	s.Blocks = min(s.Blocks, hierBlocks)
	if s.Window > hierSmallWindow {
		s.Window = hierSmallWindow
	}
	if s == c.HB {
		return c, false
	}
	c.HB = s
	return c, true
}

// localIndexOf is the local index of the peer on local channel ci of the
// rank of local index me (channels skip the rank itself).
func localIndexOf(ci, me int) int {
	if ci < me {
		return ci
	}
	return ci + 1
}

// HierBroadcastMinBytes is the smallest Broadcast the hierarchical plan
// (Broadcast2PH) serves where a flat port plan exists; below it the flat
// one-way plan (BroadcastPort), which rolls its credits across launches on
// one block where Broadcast2PH puts and signals per block and ends every
// launch with a "done" exchange over the network. On 2 emulated nodes × 2
// H100s over loopback sockets (docs/bench/2026-11-28-h100x2, calls 4–5,
// alternated twice) the hierarchical plan lost at 128 KB – 2 MB (128 KB
// 128–139 against 58 µs), was within the spread at 4 MB, ahead at 8 MB
// (2,055–2,117 against 2,289–2,455 µs) and even at 64 MB. Loopback gives
// every connection its own bandwidth, so what it saves there is the
// root's copies (one network put per other node instead of one per other
// rank); across real nodes it also halves, for 2 × 2, what the root's NIC
// carries.
const HierBroadcastMinBytes = 8 << 20

// hierarchical reports whether coll has hierarchical plans (hierPlans).
func (coll Collective) hierarchical() bool {
	return coll == AllReduce || coll == AllGather || coll == ReduceScatter || coll == Broadcast
}

// hierPlans puts the hierarchical plans of coll (AllReduce, AllGather,
// ReduceScatter, Broadcast from root) before the flat port-channel plan
// flat where the nodes allow it (Config.Nodes): the small shape up to
// hierSmallMaxBytes per rank where it differs from Config.HB (hierSmall),
// then Config.HB's; SelectFor falls back to flat for Avg where the
// hierarchical plans reduce in stages.
func hierPlans(c Config, coll Collective, root int, flat *plan.Plan) ([]Choice, error) {
	if lay, ok := c.hierLayout(); !ok || !lay.fits() {
		if flat == nil {
			return nil, fmt.Errorf("algorithms: %v over %d ranks on port-mapped links: the flat port-channel plans serve up to %d ranks and the hierarchical ones need equal nodes of at most %d ranks, at most %d nodes and at most %d channels (nodes by rank: %v): %w",
				coll, c.NRanks, PeerPlansMaxRanks, plan.MaxOperands, plan.MaxOperands, plan.MaxPeers, c.Nodes, ErrTooManyRanks)
		}
		return []Choice{{Plan: flat}}, nil
	}
	build := func(c Config) (*plan.Plan, error) {
		switch coll {
		case AllReduce:
			return AllReduce2PH(c)
		case AllGather:
			return AllGather2PH(c)
		case Broadcast:
			return Broadcast2PH(c, root)
		default:
			return ReduceScatter2PH(c)
		}
	}
	if !coll.hierarchical() {
		return []Choice{{Plan: flat}}, nil
	}
	h, err := build(c)
	if err != nil {
		return nil, err
	}
	out := []Choice{{Plan: h, Staged: coll.Reduces()}}
	if sc, ok := c.hierSmall(); ok {
		small, err := build(sc)
		if err != nil {
			return nil, err
		}
		out = append([]Choice{{Plan: small, MaxBytes: hierSmallMaxBytes, Staged: coll.Reduces()}}, out...)
	}
	if flat != nil { // past PeerPlansMaxRanks: no flat plan (no Avg)
		out = append(out, Choice{Plan: flat})
		if coll == Broadcast {
			// Below HierBroadcastMinBytes the flat one-way plan (see there).
			out = append([]Choice{{Plan: flat, MaxBytes: HierBroadcastMinBytes - 1}}, out...)
		}
	}
	return out, nil
}
