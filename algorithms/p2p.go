package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Point-to-point plans. A group of sends and receives (LaunchP2P in the
// root package) runs in rounds: the k-th send to a peer and the k-th
// receive from it form round k. Each operation of a round is served by one
// of two plans, chosen by the operation's own size so that a sender and its
// receiver, whose sizes are equal, always choose the same plan:
//
//   - P2PLLPlan, for operations up to Config.P2PLLMaxBytes: the sender
//     writes LL16 packets into its slot of the receiver's scratch, the
//     receiver unpacks them. The packets' flags are the only
//     synchronisation on the critical path, so an operation costs one
//     one-way trip. Flags and scratch halves follow the group's own launch
//     counter (plan.Plan.StateBytes: a group counts the launches in which
//     it runs), so they match the peer's receive group whatever else either
//     rank sent in between, and a CUDA graph replay uses fresh flags. Data
//     flows one way, so the receiver releases each half when it has read
//     it (a signal, which nothing waits for in this launch), and the
//     sender takes that credit at the start of the launch that reuses the
//     half (an Ack wait with 2 credits): normally long there, it costs one
//     load per receiver block. The send and receive groups also split the
//     span of P2PLLMaxBytes among their blocks, not the count
//     (plan.Group.Span): a block owns the same packets whatever the count,
//     so launches k and k+2 of different sizes never have one block write
//     what another still reads, even with a per-block credit.
//   - P2PPlan, the windowed plan, for larger operations: Config.P2P
//     blocks per group, windows through scratch with data, free and done
//     semaphores.
//
// A round whose operations fall on both sides of the threshold takes two
// launches, the LL plan's first: every rank orders its launches LL₀, HB₀,
// LL₁, HB₁, …, and a launch waits only for peers' launches of the same
// plan and round or earlier ones, so no pattern deadlocks.

// p2pPlans returns the point-to-point plans, smallest operations first:
// the LL plan up to Config.P2PLLMaxBytes (unless that is 0 or Config.Algo
// is "hb"), then the windowed plan.
func p2pPlans(c Config) ([]Choice, error) {
	hb, err := P2PPlan(c)
	if err != nil {
		return nil, err
	}
	if c.P2PLLMaxBytes <= 0 || c.Algo == "hb" {
		return []Choice{{Plan: hb}}, nil
	}
	ll, err := P2PLLPlan(c)
	if err != nil {
		return nil, err
	}
	return []Choice{{Plan: ll, MaxBytes: c.P2PLLMaxBytes}, {Plan: hb}}, nil
}

// Semaphores of P2PLLPlan (per block: base + part).
const semP2PRelease = 0

// P2PLLPlan is the LL point-to-point plan of a rank, with the argument
// slots of P2PPlan (SendArg, RecvArg, SelfArg): for channel i a send group
// that puts its input as LL16 packets into this rank's slot of the peer's
// scratch, and a receive group that unpacks slot i into its output, then
// releases the half; a self-copy group. Every group has Config.P2PLL.Blocks
// blocks of Config.P2PLL.Threads threads. The data type is raw bytes
// (plan.Uint8); it serves operations up to Config.P2PLLMaxBytes (its
// scratch is 2 halves × (n−1) slots of that many bytes as packets). Errors:
// an invalid rank or shape.
func P2PLLPlan(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := c.P2PLL
	if s.Blocks < 1 || c.P2PLLMaxBytes <= 0 {
		return nil, fmt.Errorf("algorithms: LL point-to-point plan: %d blocks, up to %d bytes: want at least 1 block and a positive bound", s.Blocks, c.P2PLLMaxBytes)
	}
	chs := c.channels()
	b := s.Blocks
	p := c.newPlan(fmt.Sprintf("sendrecv-%s-%dx%d", plan.LL16, b, s.Threads), s.Threads)
	p.Scratch, p.ScratchSlots, p.MaxBytes, p.Semaphores = plan.LL16, len(chs), c.P2PLLMaxBytes, b
	for ci, ch := range chs {
		credit := plan.Wait(ci, sem(semP2PRelease, b))
		credit.Ack, credit.Credits = true, 2
		put := plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input))
		get := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.LS(ci))
		p.Groups = append(p.Groups,
			plan.Group{Blocks: b, Arg: SendArg(c.Rank, ch.Peer), Ops: []plan.Op{credit, put}, Span: c.P2PLLMaxBytes},
			plan.Group{Blocks: b, Arg: RecvArg(c.Rank, ch.Peer), Ops: []plan.Op{get, plan.Signal(ci, sem(semP2PRelease, b))}, Span: c.P2PLLMaxBytes})
	}
	p.Groups = append(p.Groups, plan.Group{Blocks: b, Arg: SelfArg(c.NRanks),
		Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input))}})
	if len(chs) == 0 {
		p.Scratch, p.ScratchSlots, p.Semaphores = plan.Simple, 0, 0
	}
	return p, p.Validate()
}
