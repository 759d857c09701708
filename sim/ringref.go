package sim

import (
	"fmt"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

type planT = plan.Plan

// RingPlans builds the reference ring of a rank as plan IR: channel 0 to
// the next rank, channel 1 to the previous, one windowed group of
// c.HB.Blocks blocks (c.HB.Window bytes per chunk per window). In every
// window each step waits for the previous rank's data, then reduces (or
// copies) the received chunk and forwards it to the next rank's slot in
// one transfer, then signals. AllReduce: n chunks, n−1 reduce-scatter
// steps then n−1 all-gather steps; AllGather and ReduceScatter: n−1 steps
// over segments. Slots are per step (2(n−1) for AllReduce), so only a
// window two windows back needs a "free" wait (Ack, as every windowed
// plan of algorithms).
//
// This is the simulator's own ring, so that the model runs at 16–16,384
// ranks before algorithms.BoundedPlans exists; it is not validated (plan
// IR bounds transfers to 9 operands and 9 segments, which a ring's
// segmented AllGather output exceeds) and is not meant to run on GPUs.
func RingPlans(c algorithms.Config, coll algorithms.Collective) ([]algorithms.Choice, error) {
	n, r := c.NRanks, c.Rank
	if n < 2 {
		return nil, fmt.Errorf("sim: a ring needs ≥ 2 ranks: %w", ErrInvalid)
	}
	next, prev := (r+1)%n, (r+n-1)%n
	mod := func(x int) int { return ((x % n) + n) % n }
	chs := []plan.Channel{{Peer: next}, {Peer: prev}}
	const (
		semData = 0
		semFree = 1
		semDone = 2
	)
	data := func() plan.Op { return plan.Signal(0, semData) }
	recv := func() plan.Op { return plan.Wait(1, semData) }
	var ops []plan.Op
	free := plan.Wait(0, semFree)
	free.Ack, free.SkipFirst = true, 2
	ops = append(ops, free)
	var nch, slots int
	x := func(c, nc int, dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(c, nc, dsts, srcs...) }
	switch coll {
	case algorithms.AllReduce:
		nch, slots = n, 2*(n-1)
		ops = append(ops, x(r, n, []plan.Ref{plan.RS(0, 0)}, plan.L(plan.Input)), data())
		for s := 0; s < n-1; s++ {
			ch := mod(r - s - 1)
			dsts := []plan.Ref{plan.RS(0, s+1)}
			if s == n-2 {
				dsts = append([]plan.Ref{plan.L(plan.Output)}, dsts...)
			}
			ops = append(ops, recv(), x(ch, n, dsts, plan.L(plan.Input), plan.LS(s)), data())
		}
		for s := 0; s < n-1; s++ {
			ch := mod(r - s)
			dsts := []plan.Ref{plan.L(plan.Output)}
			if s < n-2 {
				dsts = append(dsts, plan.RS(0, n+s))
			}
			ops = append(ops, recv(), x(ch, n, dsts, plan.LS(n-1+s)))
			if s < n-2 {
				ops = append(ops, data())
			}
		}
	case algorithms.AllGather:
		nch, slots = 1, n-1
		ops = append(ops, x(0, 1, []plan.Ref{plan.L(plan.Output).At(r), plan.RS(0, 0)}, plan.L(plan.Input)), data())
		for s := 0; s < n-1; s++ {
			dsts := []plan.Ref{plan.L(plan.Output).At(mod(r - s - 1))}
			if s < n-2 {
				dsts = append(dsts, plan.RS(0, s+1))
			}
			ops = append(ops, recv(), x(0, 1, dsts, plan.LS(s)))
			if s < n-2 {
				ops = append(ops, data())
			}
		}
	case algorithms.ReduceScatter:
		nch, slots = 1, n-1
		ops = append(ops, x(0, 1, []plan.Ref{plan.RS(0, 0)}, plan.L(plan.Input).At(mod(r-1))), data())
		for s := 0; s < n-1; s++ {
			if s < n-2 {
				ops = append(ops, recv(), x(0, 1, []plan.Ref{plan.RS(0, s+1)}, plan.L(plan.Input).At(mod(r-s-2)), plan.LS(s)), data())
			} else {
				ops = append(ops, recv(), x(0, 1, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input).At(r), plan.LS(s)))
			}
		}
	default:
		return nil, fmt.Errorf("sim: ring-ref has no %v plan: %w", coll, ErrInvalid)
	}
	rel := plan.Signal(1, semFree)
	rel.SkipLast = 2
	ops = append(ops, rel)
	s := c.HB
	g := plan.Group{Blocks: s.Blocks, Window: s.Window, NChunks: nch, Ops: ops,
		After: []plan.Op{plan.Signal(0, semDone), plan.Signal(1, semDone), plan.Wait(0, semDone), plan.Wait(1, semDone)}}
	p := &plan.Plan{Name: fmt.Sprintf("%s-ring-%dx%d-w%d", coll, s.Blocks, s.Threads, s.Window), Rank: r, NRanks: n,
		Channels: chs, Threads: s.Threads, Unroll: s.Unroll, Scratch: plan.Simple, ScratchSlots: slots, Semaphores: 3 * s.Blocks,
		Groups: []plan.Group{g}}
	if n == 2 {
		p.Channels = chs[:1] // next and previous are the same rank
		for i := range g.Ops {
			if g.Ops[i].Kind != plan.OpTransfer && g.Ops[i].Chan == 1 {
				g.Ops[i].Chan = 0
			}
		}
		g.After = []plan.Op{plan.Signal(0, semDone), plan.Wait(0, semDone)}
		p.Groups[0] = g
	}
	return []algorithms.Choice{{Plan: p}}, nil
}
