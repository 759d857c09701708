package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// NVLS plans: collectives through the plan's switch buffer (plan switch.go),
// a multicast group of every rank over the switch-mapped capability
// (NVLink SHARP on NVSwitch systems; hal/host in software). The switch
// reduces what a rank reads through the multicast view and copies what a
// rank stores through it to every rank, so each byte crosses a rank's
// links once each way: an AllReduce moves S in and S out per rank instead
// of 2(n−1)/n·S each way, the reduction done in the switch, not on SMs.
// Memory channels carry the barriers between phases (signal and wait on
// every peer).
//
//   - AllReduceNVLS, per window of each of the n chunks: every rank copies
//     its input into its own switch copy (slot k holds chunk k); barrier;
//     rank r load-reduces slot r through the multicast view and stores the
//     result through it into every rank's slot r (switchReduceStore);
//     barrier; every rank copies its whole copy out. Scratch-free on the
//     user's side; the switch buffer is 2 × n × Window bytes.
//   - AllGatherNVLS, per window: every rank stores its input through the
//     multicast view into slot r of every copy (and into its own output
//     segment); barrier; every rank copies the peers' slots into their
//     segments. Windows alternate between the two halves of the switch
//     buffer, so one barrier per window suffices; a closing barrier lets
//     the next launch start in either half.
//
// The switch reduces only what plan.SwitchSupports says (the types and
// operators of PTX multimem.ld_reduce); Plans pairs the NVLS AllReduce with
// the memory-channel plans, and SelectFor falls back to them for the rest.
// NVLS plans are offered only when WEFT_ALGO=nvls (Config.Algo) forces
// them: their speed against the memory-channel plans has not been measured
// on NVSwitch hardware, so default selection keeps the measured plans.

// NVLSFamily is the name of the NVLS plan family (WEFT_ALGO=nvls).
const NVLSFamily = "nvls"

// AllReduceNVLS builds the NVLS AllReduce of a rank, shaped by Config.NVLS.
func AllReduceNVLS(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	s := c.NVLS
	if err := validShape("NVLS", s); err != nil {
		return nil, err
	}
	n, b, all := c.NRanks, s.Blocks, c.others()
	p := c.newPlan(fmt.Sprintf("all_reduce-nvls-%dx%d-w%d", b, s.Threads, s.Window), s.Threads)
	p.Unroll, p.Semaphores, p.SwitchSlots = s.Unroll, 2*b, n
	var in, out []plan.Op
	for k := 0; k < n; k++ {
		in = append(in, plan.Transfer(k, n, []plan.Ref{plan.SW(k)}, plan.L(plan.Input)))
		out = append(out, plan.Transfer(k, n, []plan.Ref{plan.L(plan.Output)}, plan.SW(k)))
	}
	red := plan.Transfer(c.Rank, n, []plan.Ref{plan.MC(c.Rank)}, plan.MC(c.Rank))
	red.Combine = true
	ops := cat(in, signals(all, sem(0, b)), waits(all, sem(0, b)), []plan.Op{red}, signals(all, sem(1, b)), waits(all, sem(1, b)), out)
	p.Groups = []plan.Group{{Blocks: b, Window: s.Window, NChunks: n, Ops: ops}}
	return p, p.Validate()
}

// AllGatherNVLS builds the NVLS AllGather of a rank, shaped by Config.NVLS.
func AllGatherNVLS(c Config) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	s := c.NVLS
	if err := validShape("NVLS", s); err != nil {
		return nil, err
	}
	b, all := s.Blocks, c.others()
	p := c.newPlan(fmt.Sprintf("all_gather-nvls-%dx%d-w%d", b, s.Threads, s.Window), s.Threads)
	p.Unroll, p.Semaphores, p.SwitchSlots = s.Unroll, 2*b, c.NRanks
	store := plan.Transfer(0, 1, []plan.Ref{plan.MC(c.Rank), plan.L(plan.Output).At(c.Rank)}, plan.L(plan.Input))
	var copies []plan.Op
	for _, ch := range c.channels() {
		copies = append(copies, plan.Transfer(0, 1, []plan.Ref{plan.L(plan.Output).At(ch.Peer)}, plan.SW(ch.Peer)))
	}
	ops := cat([]plan.Op{store}, signals(all, sem(0, b)), waits(all, sem(0, b)), copies)
	after := cat(signals(all, sem(1, b)), waits(all, sem(1, b)))
	p.Groups = []plan.Group{{Blocks: b, Window: s.Window, NChunks: 1, Ops: ops, After: after}}
	return p, p.Validate()
}

// nvlsPlans are the plans of Plans under WEFT_ALGO=nvls: the NVLS plan of
// the collective, followed, when it reduces through the switch, by the
// collective's other plans for the types and operators the switch cannot
// reduce. Collectives without an NVLS plan, and one rank, keep their plans.
func nvlsPlans(c Config, coll Collective, root int) ([]Choice, error) {
	c.Algo = ""
	var build func(Config) (*plan.Plan, error)
	switch coll {
	case AllReduce:
		build = AllReduceNVLS
	case AllGather:
		build = AllGatherNVLS
	}
	if build == nil || c.NRanks == 1 {
		return Plans(c, coll, root)
	}
	if !c.Switch || c.PortOnly {
		return nil, fmt.Errorf("algorithms: WEFT_ALGO=nvls: the NVLS %v needs links that are switch-mapped and memory-mapped, and these are not: %w", coll, ErrNoPlan)
	}
	p, err := build(c)
	if err != nil {
		return nil, err
	}
	out := []Choice{{Plan: p}}
	if p.SwitchReduces() {
		rest, err := Plans(c, coll, root)
		if err != nil {
			return nil, err
		}
		out = append(out, rest...)
	}
	return out, nil
}

// Serves reports whether the choice's plan runs type t with operator op:
// a plan that reduces through the switch serves what plan.SwitchSupports
// allows, a staged plan (Choice.Staged) every operator but Avg, except
// the Avg of integer types where the plan divides at its final step
// (plan.Plan.PostDiv: the plans with bounded peers), PreMulSum
// only a plan that scales each rank's input at its source
// (plan.Plan.ServesPreMulSum: not the zero-copy AllReduce2PA, which reads
// the peers' inputs); every other plan serves everything.
func (ch Choice) Serves(t plan.DataType, op plan.RedOp) bool {
	if ch.Staged && op == plan.Avg && (t.Float() || !ch.Plan.PostDiv) {
		return false
	}
	if op == plan.PreMulSum && ch.Plan.ServesPreMulSum() != nil {
		return false
	}
	return !ch.Plan.SwitchReduces() || plan.SwitchSupports(t, op)
}

// Runs reports whether the choice's plan can compute op on type t:
// directly (Serves), or, for the Avg of a floating type, as PreMulSum with
// the scalar 1/nranks on every rank (plan.AvgScalar), which is how NCCL
// computes a floating Avg too (its ncclAvg is a PreMulSum for floating
// types, a sum divided at the end for integers: src/enqueue.cc,
// hostToDevRedOp). A plan that reduces in stages (Staged) serves a
// floating Avg only that way.
func (ch Choice) Runs(t plan.DataType, op plan.RedOp) bool {
	return ch.Serves(t, op) || op == plan.Avg && t.Float() && ch.Serves(t, plan.PreMulSum)
}

// SelectFor returns the index of the first choice that runs bytes of type
// t with operator op (Choice.Runs): Select among the choices that can run
// the call. With none, it returns the last choice.
func SelectFor(choices []Choice, bytes int64, t plan.DataType, op plan.RedOp) int {
	return SelectForExcept(choices, bytes, t, op, nil)
}

// SelectForExcept is SelectFor without the choices i for which skip(i)
// holds (nil: none; weft.Comm skips the plans its backend refused as not
// resident): the first of the others that runs the call and whose bound
// holds bytes, else the last of them that runs it, else the last choice.
func SelectForExcept(choices []Choice, bytes int64, t plan.DataType, op plan.RedOp, skip func(i int) bool) int {
	runs := func(i int) bool { return choices[i].Runs(t, op) && (skip == nil || !skip(i)) }
	last := len(choices) - 1
	for i := len(choices) - 1; i >= 0; i-- {
		if runs(i) {
			last = i
			break
		}
	}
	for i, ch := range choices {
		if runs(i) && (ch.MaxBytes == 0 || bytes <= ch.MaxBytes) {
			return i
		}
	}
	return last
}
