package algorithms

import (
	"math/bits"

	"github.com/weftccl/weft/hal/plan"
)

// Double binary tree AllReduce (Sanders, Speck and Träff, "Two-tree
// algorithms for full bandwidth broadcast, reduction and scan", Parallel
// Computing 2009; NCCL 2.4's trees, NVIDIA blog "Massively Scale Your Deep
// Learning Training with NCCL 2.4", 2019).
//
// Tree 0 is an in-order binary tree over positions 0 … n−1 = ranks: the
// parent of position p ≥ 1 whose lowest set bit is b is (p − b) | 2b, or
// p − b when that is n or more; the top, the largest power of two below n,
// hangs from position 0, the root, which so has one child. Interior nodes
// are even positions (and 0), leaves odd ones. Tree 1 is tree 0 mirrored
// (rank = n−1−position) for even n and shifted (rank = position+1 mod n)
// for odd n, so that each rank is a leaf in at least one of the trees and
// the two trees together use each rank's links about evenly.
//
// AllReduce cuts the count into two chunks; tree t reduces chunk t from the
// leaves up to its root, which combines the last partial sums with its
// input into its output and sends the result back down, each rank copying
// it into its output and forwarding it to its children. A rank has at
// most 3 peers per tree (a parent, two children) and 6 channels in all.
// Up and down a tree take ⌈log2 n⌉ + 1 hops each.
//
// LL form: one group, ops in the order up(0), up(1), down(0), down(1), each
// reading packets as they land (the up and down passes pipeline at packet
// granularity). Scratch slots: 3t + i receives tree t's partial sum from
// child i, 3t + 2 its result from the parent. A launch ends only after
// both results, which contain every rank's input of that launch, arrived,
// so no flow control is needed across launches.
//
// HB form: an "up" group and a "down" group, so that the reduction of
// window w+1 overlaps the broadcast of window w; the root's up group sends
// the result down itself (no ordering between groups of a rank is
// needed). Handshakes per tree and direction: data, free (two windows
// later), done (12 semaphores per block).
//
// Cost: 2·(⌈log2 n⌉ + 1)·α latency for small messages; a pipelined
// message of S bytes moves S/2 per tree up and down, and an interior rank
// sends to up to three peers per window, so about 2·S/B for large S on a
// flat network (NCCL's tree busbw is about the link bandwidth, the ring's
// 2(n−1)/n of it).

// treeSlots is the scratch slots of the tree AllReduce: per tree, one per
// child and one for the parent's result.
const treeSlots = 6

// Semaphore kinds of the windowed tree AllReduce, per tree (base 6t).
const (
	treeUpData = iota
	treeUpFree
	treeUpDone
	treeDownData
	treeDownFree
	treeDownDone
	treeKinds
)

// btree returns the parent position (−1 for the root, position 0) and the
// children positions of position p in tree 0 of n positions.
func btree(n, p int) (parent int, children []int) {
	parent = btreeParent(n, p)
	for q := 1; q < n; q++ {
		if btreeParent(n, q) == p {
			children = append(children, q)
		}
	}
	return parent, children
}

func btreeParent(n, p int) int {
	if p == 0 {
		return -1
	}
	top := 1 << (bits.Len(uint(n-1)) - 1) // the largest power of two ≤ n−1
	if p == top {
		return 0
	}
	b := p & -p
	if up := (p ^ b) | b<<1; up < n {
		return up
	}
	return p ^ b
}

// Tree is one rank's place in one tree of the double binary tree: its
// parent rank (−1 at the root) and child ranks (0 to 2).
type Tree struct {
	Parent   int
	Children []int
}

// DoubleTree returns rank's place in the two trees of NCCL's double binary
// tree over n ranks (see the comment above): tree 0 in-order over ranks,
// tree 1 mirrored (n even) or shifted by one (n odd).
func DoubleTree(n, rank int) [2]Tree {
	var out [2]Tree
	for t := range 2 {
		toPos, toRank := func(r int) int { return r }, func(p int) int { return p }
		if t == 1 && n%2 == 0 {
			toPos, toRank = func(r int) int { return n - 1 - r }, func(p int) int { return n - 1 - p }
		} else if t == 1 {
			toPos, toRank = func(r int) int { return mod(r-1, n) }, func(p int) int { return mod(p+1, n) }
		}
		par, kids := btree(n, toPos(rank))
		out[t].Parent = -1
		if par >= 0 {
			out[t].Parent = toRank(par)
		}
		for _, k := range kids {
			out[t].Children = append(out[t].Children, toRank(k))
		}
	}
	return out
}

// treeShape is what the tree builders need of one tree: channel indices of
// the parent (−1 at the root) and children, and this rank's index among
// its parent's children (its up slot at the parent).
type treeShape struct {
	parent, childIdx int
	children         []int
}

func (c Config) trees() ([]plan.Channel, [2]treeShape) {
	s := peerSet{}
	var out [2]treeShape
	for t, tr := range DoubleTree(c.NRanks, c.Rank) {
		sh := treeShape{parent: -1}
		if tr.Parent >= 0 {
			sh.parent = s.ch(tr.Parent)
			for i, k := range DoubleTree(c.NRanks, tr.Parent)[t].Children {
				if k == c.Rank {
					sh.childIdx = i
				}
			}
		}
		for _, k := range tr.Children {
			sh.children = append(sh.children, s.ch(k))
		}
		out[t] = sh
	}
	return s.chans, out
}

// treeOps are the transfers of tree t for chunk t of 2: up (this rank's
// input and its children's partial sums, to the parent's slot or, at the
// root, to the output and the children's result slots) and down (the
// parent's result to the output and the children's result slots; nil at
// the root). chunk is how each transfer selects its range.
func treeOps(t int, sh treeShape, chunk func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op) (up, down plan.Op) {
	srcs := []plan.Ref{plan.L(plan.Input)}
	for i := range sh.children {
		srcs = append(srcs, plan.LS(3*t+i))
	}
	dsts := []plan.Ref{plan.L(plan.Output)}
	for _, k := range sh.children {
		dsts = append(dsts, plan.RS(k, 3*t+2))
	}
	if sh.parent < 0 {
		// The root's last combine: the integer Avg divides here, before
		// the result goes down (plan.Op.PostDiv).
		return postDiv(chunk(dsts, srcs...)), plan.Op{}
	}
	return chunk([]plan.Ref{plan.RS(sh.parent, 3*t+sh.childIdx)}, srcs...), chunk(dsts, plan.LS(3*t+2))
}

// DoubleTreeAllReduceLL builds the double-binary-tree AllReduce with LL
// packets for one rank: up to 6 channels, 6 scratch slots, LLBlocks ×
// Threads, messages up to boundedLLMaxBytes(6). Integer Avg divides at the
// roots (PostDiv). Errors: an invalid rank or shape.
func DoubleTreeAllReduceLL(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_reduce-tree", 0, 0)
	}
	chans, sh := c.trees()
	var ups, downs []plan.Op
	for t := range 2 {
		up, down := treeOps(t, sh[t], func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(t, 2, dsts, srcs...) })
		ups = append(ups, up)
		if down.Kind != 0 {
			downs = append(downs, down)
		}
	}
	return divided(c.boundedLL("all_reduce-tree", chans, treeSlots, 0, c.boundedLLMaxBytes(treeSlots), cat(ups, downs)))
}

// DoubleTreeAllReduceHB builds the windowed double-binary-tree AllReduce:
// an up group and a down group of Config.HB's blocks over 2 chunks,
// windows of boundedWindow(6) bytes, 6 slots per half, 12 semaphores per
// block. Integer Avg divides at the roots (PostDiv). Errors: an invalid
// rank or shape.
func DoubleTreeAllReduceHB(c Config) (*plan.Plan, error) {
	if err := c.validateBounded(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_reduce-tree", 0, 0)
	}
	chans, sh := c.trees()
	b := c.HB.Blocks
	var up, upAfter, upAfterWait, down, downAfter, downAfterWait []plan.Op
	for t := range 2 {
		s := func(kind int) int { return sem(treeKinds*t+kind, b) }
		x := sh[t]
		u, d := treeOps(t, x, func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(t, 2, dsts, srcs...) })
		// Up: the children's partial sums of this window, the parent's
		// release of the half (the root: the children's release of their
		// result slots), reduce, tell the parent (the root: the children).
		up = append(up, waits(x.children, s(treeUpData))...)
		if x.parent >= 0 {
			up = append(up, skip(waits([]int{x.parent}, s(treeUpFree)), 2, 0)...)
		} else {
			up = append(up, skip(waits(x.children, s(treeDownFree)), 2, 0)...)
		}
		up = append(up, u)
		if x.parent >= 0 {
			up = append(up, plan.Signal(x.parent, s(treeUpData)))
			upAfterWait = append(upAfterWait, plan.Wait(x.parent, s(treeUpDone)))
		} else {
			up = append(up, signals(x.children, s(treeDownData))...)
			upAfterWait = append(upAfterWait, waits(x.children, s(treeDownDone))...)
		}
		up = append(up, skip(signals(x.children, s(treeUpFree)), 0, 2)...)
		upAfter = append(upAfter, signals(x.children, s(treeUpDone))...)
		if x.parent < 0 {
			continue
		}
		// Down: the parent's result of this window, the children's release
		// of the half, copy and forward, tell the children, release the
		// parent's slot.
		down = append(down, plan.Wait(x.parent, s(treeDownData)))
		down = append(down, skip(waits(x.children, s(treeDownFree)), 2, 0)...)
		down = append(down, d)
		down = append(down, signals(x.children, s(treeDownData))...)
		down = append(down, skip([]plan.Op{plan.Signal(x.parent, s(treeDownFree))}, 0, 2)...)
		downAfter = append(downAfter, plan.Signal(x.parent, s(treeDownDone)))
		downAfterWait = append(downAfterWait, waits(x.children, s(treeDownDone))...)
	}
	return divided(c.boundedHB("all_reduce-tree", chans, c.boundedWindow(treeSlots), treeSlots, 2*treeKinds,
		plan.Group{NChunks: 2, Ops: up, After: cat(upAfter, upAfterWait)},
		plan.Group{NChunks: 2, Ops: down, After: cat(downAfter, downAfterWait)}))
}
