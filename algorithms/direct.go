package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Direct plans: AllGather and ReduceScatter over buffers that every rank
// has mapped (the root package's symmetric memory windows, NCCL's
// ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), one phase, no
// scratch: the AllGather stores each rank's input straight into its
// segment of every rank's output, the ReduceScatter reads segment r of
// every rank's input and reduces it into rank r's output. Their scratch
// counterparts (AllGatherHB, ReduceScatterHB) pass every byte through a
// peer's scratch and copy it out again; the direct plans move each byte
// once, as the zero-copy AllReduce (AllReduce2PA) does. Both open with a
// barrier (every peer has entered the collective, so its stream's earlier
// work on its buffers is done) and close with one (no rank returns, and
// lets its stream reuse its buffers, while a peer still writes into its
// output or reads its input).

// allPairsBarrier signals semaphore sem to every peer of chs, then waits
// for every peer's.
func allPairsBarrier(chs []plan.Channel, sem int) []plan.Op {
	var ops []plan.Op
	for ci := range chs {
		ops = append(ops, plan.Signal(ci, sem))
	}
	for ci := range chs {
		ops = append(ops, plan.Wait(ci, sem))
	}
	return ops
}

// directPlan is the shell of a direct plan of collective name with launch
// shape s.
func (c Config) directPlan(name string, s Shape) *plan.Plan {
	threads := s.Threads
	if threads == 0 {
		threads = c.Threads
	}
	return &plan.Plan{
		Name:       fmt.Sprintf("%s-direct-%dx%d-u%d", name, s.Blocks, threads, s.Unroll),
		Rank:       c.Rank,
		NRanks:     c.NRanks,
		Channels:   c.channels(),
		Threads:    threads,
		Unroll:     s.Unroll,
		Semaphores: 2 * s.Blocks,
	}
}

// AllGatherDirect builds the direct AllGather with launch shape s: rank r
// stores its input into segment r of its own and every peer's output.
func AllGatherDirect(c Config, s Shape) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	p := c.directPlan("all_gather", s)
	dsts := []plan.Ref{plan.L(plan.Output).At(c.Rank)}
	for ci := range p.Channels {
		dsts = append(dsts, plan.R(ci, plan.Output).At(c.Rank))
	}
	ops := allPairsBarrier(p.Channels, 0)
	ops = append(ops, plan.Transfer(plan.All, 0, dsts, plan.L(plan.Input)))
	ops = append(ops, allPairsBarrier(p.Channels, s.Blocks)...)
	p.Groups = []plan.Group{{Blocks: s.Blocks, Ops: ops}}
	return p, p.Validate()
}

// ReduceScatterDirect builds the direct ReduceScatter with launch shape s:
// rank r reduces segment r of its own and every peer's input into its
// output.
func ReduceScatterDirect(c Config, s Shape) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	p := c.directPlan("reduce_scatter", s)
	srcs := []plan.Ref{plan.L(plan.Input).At(c.Rank)}
	for ci := range p.Channels {
		srcs = append(srcs, plan.R(ci, plan.Input).At(c.Rank))
	}
	ops := allPairsBarrier(p.Channels, 0)
	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, srcs...)
	red.Combine = true
	ops = append(ops, red)
	ops = append(ops, allPairsBarrier(p.Channels, s.Blocks)...)
	p.Groups = []plan.Group{{Blocks: s.Blocks, Ops: ops}}
	return p, p.Validate()
}

// DirectPlans returns the direct plans of coll (AllGather or
// ReduceScatter), one per two-phase tier of the zero-copy AllReduce
// (c.AllReduceTiers(): the same launch shapes for the same bytes moved
// per rank; the one-phase LL tiers have no direct counterpart and the
// first direct plan serves their sizes too), selected by the bytes of the
// whole output (AllGather) or input (ReduceScatter): the AllReduce
// message they correspond to. ErrNoPlan for another collective.
func DirectPlans(c Config, coll Collective) ([]Choice, error) {
	build := AllGatherDirect
	switch coll {
	case AllGather:
	case ReduceScatter:
		build = ReduceScatterDirect
	default:
		return nil, fmt.Errorf("algorithms: %v: no direct plan: %w", coll, ErrNoPlan)
	}
	tiers := c.AllReduceTiers()
	if err := ValidateTiers(tiers); err != nil {
		return nil, err
	}
	var choices []Choice
	for _, t := range tiers {
		if t.Algo == Algo1PA {
			continue
		}
		shape := t.Shape
		if m := c.Budget.Max; m > 0 {
			shape.Blocks = max(1, min(shape.Blocks, m)) // the block budget (BlockBudget)
		}
		p, err := build(c, shape)
		if err != nil {
			return nil, err
		}
		choices = append(choices, Choice{Plan: p, MaxBytes: t.MaxBytes})
	}
	if len(choices) == 0 {
		return nil, fmt.Errorf("algorithms: %v: no two-phase AllReduce tier to shape a direct plan: %w", coll, ErrNoPlan)
	}
	return choices, nil
}
