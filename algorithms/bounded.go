package algorithms

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/weftccl/weft/hal/plan"
)

// Plans with bounded peers.
//
// The all-pairs plans (plans.go, allreduce.go) give each rank a channel to
// every peer: right inside one NVLink domain, wrong beyond it (channels,
// semaphores and scratch per rank grow with n, and a GPU plan holds at most
// plan.MaxPeers channels). The plans of ring.go, tree.go and bruck.go keep
// the channels of a rank bounded whatever the number of ranks n:
//
//   - Ring (ring.go): one channel to rank+1 (send) and one to rank−1
//     (receive); 1 for 2 ranks. AllReduce is a reduce-scatter ring then an
//     all-gather ring, 2(n−1) steps; AllGather and ReduceScatter take n−1;
//     Broadcast and Reduce are a pipelined chain from, or to, the root.
//   - Double binary tree (tree.go): AllReduce over two complementary binary
//     trees, each reducing half of the data up to its root and
//     broadcasting it back down; at most 3 peers per tree, 6 in all.
//   - Bruck (bruck.go): AllGather and ReduceScatter in ⌈log2 n⌉ rounds with
//     peers rank ± 2^k, any n; 2⌈log2 n⌉ channels (NCCL's PAT serves the
//     same need with the same logarithmic step count).
//
// Every plan has an LL form (LL packets into scratch, the packets' flags
// the only synchronisation, for small messages) and an HB form (windowed,
// plain data, semaphores, scratch a few window-sized slots), as the
// all-pairs plans do. The reductions stage partial sums over several
// transfers (Choice.Staged), so no transfer sees every contribution: the
// Avg of floating types runs as PreMulSum with plan.AvgScalar (each
// rank's input is scaled where it is read, plan/premul.go), and the Avg
// of integer types sums and divides once, in the transfer that produces
// each rank's final value (plan.Op.PostDiv, NCCL's SumPostDiv): the ring
// AllReduce's step n−1, before its all-gather; the tree root's combine;
// the last step of ReduceScatter; the chain Reduce's root.
// docs/collectives.md, "Plans with bounded peers", gives step counts,
// chunking and the cost formulas.

// boundedScratchWindows is the scratch budget of an HB plan with bounded
// peers, in windows of Config.HB.Window: a plan with more slots gets
// smaller windows (boundedWindow), so that scratch stays at most this many
// HB windows (64 MiB on GPUs, 256 KiB on hal/host) whatever n is.
const boundedScratchWindows = 16

// chainWindowDivisor makes the windows of the chains (Broadcast and Reduce)
// smaller than HB's: a chain of n ranks pipelines its windows, so its time
// is about (n − 1 + windows) window transfers, and small windows keep the
// fill of the pipeline short (NCCL's chain uses chunks of 128–512 KiB).
const chainWindowDivisor = 8

// minBoundedWindow is the smallest window of a bounded-peer HB plan.
const minBoundedWindow = 1 << 10

// validateBounded checks the rank and the shapes the bounded-peer plans
// use; unlike Config.validate, it sets no limit on the number of ranks.
func (c Config) validateBounded() error {
	if c.NRanks < 1 || c.Rank < 0 || c.Rank >= c.NRanks {
		return fmt.Errorf("algorithms: rank %d of %d", c.Rank, c.NRanks)
	}
	if c.LLBlocks < 1 || c.Threads < 32 {
		return fmt.Errorf("algorithms: LL shape %d blocks × %d threads: want blocks ≥ 1 and threads ≥ 32", c.LLBlocks, c.Threads)
	}
	return validShape("HB", c.HB)
}

// boundedWindow is the window of an HB plan with slots scratch slots per
// half: Config.HB.Window, or less so that the two halves hold at most
// boundedScratchWindows HB windows; a multiple of plan.AlignBytes, at least
// minBoundedWindow (or HB's window when that is smaller).
func (c Config) boundedWindow(slots int) int64 {
	w := c.HB.Window
	if slots > 0 {
		w = min(w, boundedScratchWindows*c.HB.Window/int64(2*slots))
	}
	w = w / plan.AlignBytes * plan.AlignBytes
	return max(w, min(c.HB.Window, minBoundedWindow))
}

// chainWindow is the window of the chains (Broadcast, Reduce).
func (c Config) chainWindow() int64 {
	w := c.HB.Window / chainWindowDivisor / plan.AlignBytes * plan.AlignBytes
	return min(c.HB.Window, max(w, 16<<10))
}

// peerSet collects the channels of a bounded-peer plan: one per distinct
// peer, in the order first asked for.
type peerSet struct {
	chans []plan.Channel
}

// ch returns the channel index of peer, adding a channel when new.
func (s *peerSet) ch(peer int) int {
	for i, c := range s.chans {
		if c.Peer == peer {
			return i
		}
	}
	s.chans = append(s.chans, plan.Channel{Peer: peer})
	return len(s.chans) - 1
}

// divided marks a reducing plan as one that divides the integer Avg at
// its final step (plan.Plan.PostDiv; its builder marks the transfers,
// postDiv), passing err through.
func divided(p *plan.Plan, err error) (*plan.Plan, error) {
	if err == nil {
		p.PostDiv = true
	}
	return p, err
}

// mod is x mod n in [0, n).
func mod(x, n int) int { return ((x % n) + n) % n }

// log2Ceil is ⌈log2 n⌉ for n ≥ 1.
func log2Ceil(n int) int { return bits.Len(uint(n - 1)) }

// boundedLL finishes an LL plan with bounded peers: one group of
// LLBlocks × Threads, slots scratch slots of c.LL packets, sems semaphores
// per block, serving messages up to maxBytes.
func (c Config) boundedLL(name string, chans []plan.Channel, slots, sems int, maxBytes int64, ops []plan.Op) (*plan.Plan, error) {
	p := &plan.Plan{Name: name + "-" + c.LL.String(), Rank: c.Rank, NRanks: c.NRanks, Channels: chans, Threads: c.Threads,
		Scratch: c.LL, ScratchSlots: slots, Semaphores: sems * c.LLBlocks, MaxBytes: maxBytes}
	if slots == 0 {
		p.Scratch = plan.Simple
	}
	p.Groups = []plan.Group{llGroup(c.LLBlocks, ops)}
	pruneChannels(p)
	return p, p.Validate()
}

// pruneChannels removes the channels no op of p names and renumbers the
// others: a receiver of LL packets needs no channel to their writer (it
// polls its own scratch), so an LL plan keeps only the channels it writes
// through or signals on.
func pruneChannels(p *plan.Plan) {
	used := make([]bool, len(p.Channels))
	each := func(f func(o *plan.Op)) {
		for gi := range p.Groups {
			g := &p.Groups[gi]
			for _, ops := range [][]plan.Op{g.Before, g.Ops, g.After} {
				for oi := range ops {
					f(&ops[oi])
				}
			}
		}
	}
	each(func(o *plan.Op) {
		if o.Kind != plan.OpTransfer {
			used[o.Chan] = true
		}
		for _, r := range append(append([]plan.Ref{}, o.Srcs...), o.Dsts...) {
			if r.Remote() {
				used[r.Chan] = true
			}
		}
	})
	index := make([]int, len(p.Channels))
	var kept []plan.Channel
	for i, ch := range p.Channels {
		index[i] = len(kept)
		if used[i] {
			kept = append(kept, ch)
		}
	}
	if len(kept) == len(p.Channels) {
		return
	}
	p.Channels = kept
	renumber := func(rs []plan.Ref) []plan.Ref {
		out := append([]plan.Ref(nil), rs...)
		for i := range out {
			if out[i].Remote() {
				out[i].Chan = index[out[i].Chan]
			}
		}
		return out
	}
	each(func(o *plan.Op) {
		if o.Kind != plan.OpTransfer {
			o.Chan = index[o.Chan]
		}
		o.Srcs, o.Dsts = renumber(o.Srcs), renumber(o.Dsts)
	})
}

// boundedHB finishes a windowed plan with bounded peers: groups of
// Config.HB's blocks with windows of window bytes over nchunks chunks,
// slots scratch slots per half, sems semaphores per block.
func (c Config) boundedHB(name string, chans []plan.Channel, window int64, slots, sems int, groups ...plan.Group) (*plan.Plan, error) {
	s := c.HB
	p := &plan.Plan{Name: fmt.Sprintf("%s-hb-%dx%d-w%d", name, s.Blocks, s.Threads, window), Rank: c.Rank, NRanks: c.NRanks,
		Channels: chans, Threads: s.Threads, Unroll: s.Unroll, Scratch: plan.Simple, ScratchSlots: slots, Semaphores: sems * s.Blocks}
	for _, g := range groups {
		if len(g.Ops) > 0 || len(g.After) > 0 {
			g.Blocks, g.Window = s.Blocks, window
			p.Groups = append(p.Groups, g)
		}
	}
	return p, p.Validate()
}

// copyPlan is the plan of a communicator of one rank: the input (segment
// in) copied into the output (segment out), with the operator's scaling of
// this rank's input (PreMulSum); its one transfer is the final step
// (PostDiv: the integer Avg divides by 1).
func (c Config) copyPlan(name string, in, out int) (*plan.Plan, error) {
	p := &plan.Plan{Name: name, Rank: c.Rank, NRanks: c.NRanks, Threads: c.Threads,
		PostDiv: true, Groups: []plan.Group{{Blocks: c.LLBlocks, Ops: []plan.Op{postDiv(plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(out)}, plan.L(plan.Input).At(in)))}}}}
	return p, p.Validate()
}

// Semaphore bases of the windowed ring and chain plans (per block: base +
// part). One data semaphore serves every step of a window: the waits on it
// count the sender's signals in order.
const (
	ringData = iota
	ringFree
	ringDone
	ringSems
)

// boundedLLMaxBytes is the largest segment the LL plans with bounded peers
// serve when a rank's LL scratch holds slots segments: slots × segment ≤
// Config.CollLLMaxBytes (LL scratch is then at most 4 × CollLLMaxBytes
// with LL16 packets and two halves), a power of two, at least 1 KiB.
func (c Config) boundedLLMaxBytes(slots int) int64 {
	return max(1<<10, floorPow2(c.CollLLMaxBytes/int64(max(1, slots))))
}

// bruckMaxBytes is the largest segment the Bruck HB plans serve in
// BoundedPlans (rings beyond): a first choice from the cost model of
// docs/collectives.md, not measured.
const bruckMaxBytes = 1 << 20

// treeRingSwitch is where BoundedPlans' AllReduce moves from the double
// binary tree to the ring, by rank count: the message (bytes) at which
// `weft sim` predicts the same time for both, on dgx-h100 clusters (8 H100
// a node, a 400 Gb/s NIC per GPU, rail leaves of 32 nodes; sim/cluster.go),
// interpolated linearly between the powers of two where the faster plan
// changes and rounded down to 4 KiB, from sweeps by factors of 2 such as
//
//	weft sim all_reduce --preset dgx-h100:128 --family tree,ring -b 1M -e 2G -f 2
//
// (docs/scale.md, "Selection by rank count", lists each run and the two
// sizes around each switch). A tree pays 2(⌈log2 n⌉+1)
// hop latencies and moves S/2 per tree over up to three links; a ring pays
// 2(n−1) latencies and moves 2(n−1)/n·S: the switch grows about linearly
// with n at scale. sim's TestTreeRingSwitch re-checks the entries up to
// 128 ranks.
var treeRingSwitch = []struct {
	ranks int
	bytes int64
}{
	{16, 708 << 10},
	{32, 1064 << 10},
	{64, 1652 << 10},
	{128, 2696 << 10},
	{256, 4532 << 10},
	{512, 7756 << 10},
	{1024, 15852 << 10},
	{16384, 203360 << 10},
}

// TreeMaxBytes is the largest AllReduce message (bytes) BoundedPlans gives
// the double binary tree on n ranks (the ring takes larger ones):
// treeRingSwitch interpolated linearly in log n and log bytes between its
// entries, its first entry below 16 ranks, and beyond the last entry that
// entry scaled by n/ranks; a multiple of 4 KiB.
func TreeMaxBytes(n int) int64 {
	t := treeRingSwitch
	var b float64
	switch last := t[len(t)-1]; {
	case n <= t[0].ranks:
		b = float64(t[0].bytes)
	case n >= last.ranks:
		b = float64(last.bytes) * float64(n) / float64(last.ranks)
	default:
		i := 1
		for t[i].ranks < n {
			i++
		}
		lo, hi := t[i-1], t[i]
		f := math.Log(float64(n)/float64(lo.ranks)) / math.Log(float64(hi.ranks)/float64(lo.ranks))
		b = float64(lo.bytes) * math.Pow(float64(hi.bytes)/float64(lo.bytes), f)
	}
	return int64(b) / 4096 * 4096
}

// BoundedPlans returns the plans with bounded peers of a collective for a
// rank (with root for Broadcast and Reduce), smallest messages first, each
// with the largest message (bytes of count × element size: a segment for
// AllGather and ReduceScatter) it serves; the last is unbounded:
//
//   - AllReduce: DoubleTreeAllReduceLL up to its MaxBytes
//     (CollLLMaxBytes / 6, as a power of two), DoubleTreeAllReduceHB up
//     to TreeMaxBytes(n) (from `weft sim`: 708 KiB at 16 ranks, 2.6 MiB
//     at 128, 15.5 MiB at 1,024, 199 MiB at 16,384), RingAllReduceHB
//     beyond.
//   - AllGather, ReduceScatter: the Bruck LL plan up to its MaxBytes
//     (CollLLMaxBytes / (n−1)), the Bruck HB plan up to 1 MiB, the ring
//     HB plan beyond; past 256 ranks (the Bruck plans' limit) the ring LL
//     and HB plans.
//   - Broadcast, Reduce: the chain's LL plan up to CollLLMaxBytes, its HB
//     plan beyond.
//
// The reductions are Staged and PostDiv (integer Avg divides once, at
// the final step; floating Avg runs as PreMulSum). Every plan's channels go to at most
// 2·⌈log2 n⌉ peers (6 for the trees, 2 for rings and chains), whatever n
// is; the plans validate for any n ≥ 1. Errors: an invalid rank, root or
// shape; a collective without such plans (AllToAll, SendRecv: every rank
// sends to every rank) wraps ErrNoPlan.
func BoundedPlans(c Config, coll Collective, root int) ([]Choice, error) {
	steps, bounds, err := boundedSteps(c, coll)
	if err != nil {
		return nil, err
	}
	return c.boundedChoices(coll, root, steps, bounds)
}

// BoundedPlan is choice i of BoundedPlans(c, coll, root), built alone:
// the same plan and bound, without building the others (a simulator that
// needs one plan of every rank of a large communicator builds only the
// one it runs; a ring's plan grows with n). Errors: those of
// BoundedPlans, and an i out of range.
func BoundedPlan(c Config, coll Collective, root, i int) (Choice, error) {
	steps, bounds, err := boundedSteps(c, coll)
	if err != nil {
		return Choice{}, err
	}
	if i < 0 || i >= len(steps) {
		return Choice{}, fmt.Errorf("algorithms: %v has %d plans with bounded peers, not %d", coll, len(steps), i+1)
	}
	p, err := steps[i](c, root)
	if err != nil {
		return Choice{}, err
	}
	bound := bounds[i]
	if i == 0 {
		bound = p.MaxBytes
	}
	return Choice{Plan: p, MaxBytes: bound, Staged: coll.Reduces()}, nil
}

// boundedSteps are the builders of BoundedPlans for coll, smallest
// messages first, and the bound of each (see boundedChoices).
func boundedSteps(c Config, coll Collective) ([]boundedBuild, []int64, error) {
	switch coll {
	case AllReduce:
		return []boundedBuild{plain(DoubleTreeAllReduceLL), plain(DoubleTreeAllReduceHB), plain(RingAllReduceHB)},
			[]int64{0, TreeMaxBytes(c.NRanks), 0}, nil
	case AllGather, ReduceScatter:
		if c.NRanks > bruckRanks {
			return boundedFamilyBuilds(coll, RingFamily), []int64{0, 0}, nil
		}
		if coll == AllGather {
			return []boundedBuild{plain(BruckAllGatherLL), plain(BruckAllGatherHB), plain(RingAllGatherHB)}, []int64{0, bruckMaxBytes, 0}, nil
		}
		return []boundedBuild{plain(BruckReduceScatterLL), plain(BruckReduceScatterHB), plain(RingReduceScatterHB)}, []int64{0, bruckMaxBytes, 0}, nil
	case Broadcast, Reduce:
		return boundedFamilyBuilds(coll, RingFamily), []int64{0, 0}, nil
	}
	return nil, nil, fmt.Errorf("algorithms: %v has no plan with bounded peers: %w", coll, ErrNoPlan)
}

// Families of the plans with bounded peers, as Config.Algo names them.
const (
	RingFamily  = "ring"
	TreeFamily  = "tree"
	BruckFamily = "bruck"
)

// boundedBuild builds one plan with bounded peers for a root (ignored by
// the collectives without one).
type boundedBuild func(c Config, root int) (*plan.Plan, error)

func plain(f func(Config) (*plan.Plan, error)) boundedBuild {
	return func(c Config, _ int) (*plan.Plan, error) { return f(c) }
}

// boundedFamilyBuilds are the builders of one family for a collective, LL
// plan first: nil where the family has no plan for it (a tree serves
// AllReduce only, Bruck AllGather and ReduceScatter).
func boundedFamilyBuilds(coll Collective, family string) []boundedBuild {
	type key struct {
		coll   Collective
		family string
	}
	return map[key][]boundedBuild{
		{AllReduce, RingFamily}:      {plain(RingAllReduceLL), plain(RingAllReduceHB)},
		{AllGather, RingFamily}:      {plain(RingAllGatherLL), plain(RingAllGatherHB)},
		{ReduceScatter, RingFamily}:  {plain(RingReduceScatterLL), plain(RingReduceScatterHB)},
		{Broadcast, RingFamily}:      {RingBroadcastLL, RingBroadcastHB},
		{Reduce, RingFamily}:         {RingReduceLL, RingReduceHB},
		{AllReduce, TreeFamily}:      {plain(DoubleTreeAllReduceLL), plain(DoubleTreeAllReduceHB)},
		{AllGather, BruckFamily}:     {plain(BruckAllGatherLL), plain(BruckAllGatherHB)},
		{ReduceScatter, BruckFamily}: {plain(BruckReduceScatterLL), plain(BruckReduceScatterHB)},
	}[key{coll, family}]
}

// boundedFamily returns the LL and HB plans of one family (ring, tree,
// bruck) for a collective: the LL plan up to its MaxBytes, the HB plan
// beyond. Bruck past its 256 ranks takes the ring's. ErrNoPlan where the
// family has no plan of the collective.
func boundedFamily(c Config, coll Collective, root int, family string) ([]Choice, error) {
	if family == BruckFamily && c.NRanks > bruckRanks {
		family = RingFamily
	}
	steps := boundedFamilyBuilds(coll, family)
	if steps == nil {
		return nil, fmt.Errorf("algorithms: %v has no %s plan: %w", coll, family, ErrNoPlan)
	}
	return c.boundedChoices(coll, root, steps, []int64{0, 0})
}

// boundedChoices builds steps in order: the first (an LL plan) serves up
// to its own MaxBytes, each next one up to its bound in bounds (0:
// unbounded; the last is).
func (c Config) boundedChoices(coll Collective, root int, steps []boundedBuild, bounds []int64) ([]Choice, error) {
	var out []Choice
	for i, f := range steps {
		p, err := f(c, root)
		if err != nil {
			return nil, err
		}
		bound := bounds[i]
		if i == 0 {
			bound = p.MaxBytes // the LL plan's own bound (0 for one rank: a copy)
		}
		out = append(out, Choice{Plan: p, MaxBytes: bound, Staged: coll.Reduces()})
	}
	return out, nil
}

// UsesBounded reports whether Plans serves coll with plans with bounded
// peers (ring, tree, Bruck) rather than all-pairs ones: for the
// collectives that have them (AllReduce, AllGather, ReduceScatter,
// Broadcast, Reduce) on memory-mapped links, past AllPairsMaxRanks ranks
// or where Config.Algo names a family (ring, tree, bruck) that has a plan
// of coll.
func (c Config) UsesBounded(coll Collective) bool {
	if c.PortOnly || c.Algo == PortFamily || c.Algo == NVLSFamily {
		return false
	}
	switch coll {
	case AllReduce, AllGather, ReduceScatter, Broadcast, Reduce:
	default:
		return false
	}
	return c.NRanks > AllPairsMaxRanks || boundedFamilyBuilds(coll, c.Algo) != nil
}

// boundedSelection is Plans for a collective that UsesBounded: the forced
// family's plans (Config.Algo ring, tree or bruck) where it has a plan of
// coll, else BoundedPlans; Config.Algo "ll" keeps the LL plan (the
// smallest messages' choice) alone, "hb" drops it.
func boundedSelection(c Config, coll Collective, root int) ([]Choice, error) {
	if boundedFamilyBuilds(coll, c.Algo) != nil {
		return boundedFamily(c, coll, root, c.Algo)
	}
	out, err := BoundedPlans(c, coll, root)
	if err != nil || len(out) < 2 {
		return out, err
	}
	switch c.Algo {
	case "ll":
		return out[:1], nil
	case "hb":
		return out[1:], nil
	}
	return out, nil
}
