package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Bruck AllGather and its dual ReduceScatter: ⌈log2 n⌉ rounds for any n,
// with peers rank ± 2^k (Bruck, Ho, Kipnis, Upfal and Weathersby,
// "Efficient algorithms for all-to-all communications in multiport
// message-passing systems", IEEE TPDS 1997; the same logarithmic step count
// as NCCL's PAT, "parallel aggregated trees", NCCL 2.23). Segments are
// named by their offset j from this rank: segment (rank + j) mod n.
//
// AllGather, round k (0 ≤ k < K = ⌈log2 n⌉): rank r sends offsets
// 0 … c_k−1, c_k = min(2^k, n − 2^k), to rank r − 2^k, which receives them
// as its offsets 2^k … 2^k + c_k − 1. After round k a rank holds offsets
// 0 … min(2^(k+1), n)−1; every segment reaches every rank exactly once
// (n − 1 segments received in all, the optimum). Offset i arrives in the
// round k with 2^k ≤ i < 2^(k+1) and is forwarded in every later round
// with i < c_k.
//
// ReduceScatter runs the same pattern backwards: for k = K−1 down to 0,
// rank r sends its partial sums of offsets 2^k … 2^k + c_k − 1 to rank
// r + 2^k, which adds them into its offsets 0 … c_k − 1; offset j is sent
// once (in round ⌊log2 j⌋), after every partial sum for it has arrived, and
// offset 0 is this rank's result.
//
// A rank's scratch has one slot per segment it receives (n − 1): in
// AllGather slot i−1 holds offset i; in ReduceScatter the receptions of
// round k take slots Σ_{k'<k} c_k' … + c_k − 1. LL forms process offsets
// in round order, reading packets as they land; a launch ends only after
// data of every rank's launch arrived, so no flow control across launches
// is needed. HB forms move window w of every segment per window: round by
// round, wait for the data of the round before (a data semaphore per
// peer), send, signal; release the slots with one "free" signal per
// receiving peer per window; done handshakes at the end.
//
// Channels: to r − 2^k and r + 2^k for every k, 2⌈log2 n⌉ at most (fewer
// where they coincide), 12 for 64 ranks, 16 for 256 (plan.MaxPeers). A
// transfer reads or writes at most K + 1 operands, so n ≤ 2^(MaxOperands−1).
//
// Cost: ⌈log2 n⌉·α + (n−1)·S/B for segments of S bytes: the ring's
// bandwidth term with a logarithmic latency term (Thakur, Rabenseifner and
// Gropp, "Optimization of collective communication operations in MPICH",
// IJHPCA 2005).

// bruck returns the rounds of the Bruck pattern for n ranks: c_k per round.
func bruck(n int) []int {
	var cs []int
	for d := 1; d < n; d *= 2 {
		cs = append(cs, min(d, n-d))
	}
	return cs
}

// bruckRanks is the largest n the Bruck plans serve.
const bruckRanks = 1 << (plan.MaxOperands - 1)

func (c Config) validateBruck() error {
	if err := c.validateBounded(); err != nil {
		return err
	}
	if c.NRanks > bruckRanks {
		return fmt.Errorf("algorithms: Bruck plans serve up to %d ranks, not %d", bruckRanks, c.NRanks)
	}
	return nil
}

// bruckAllGather returns the channels, the transfers by round (round −1:
// this rank's own segment, first) and the peers' channel indices by round
// of the Bruck AllGather: send[k] to r − 2^k, recv[k] from r + 2^k.
func (c Config) bruckAllGather(x func(dsts []plan.Ref, src plan.Ref) plan.Op) (chans []plan.Channel, own []plan.Op, rounds [][]plan.Op, send, recv []int) {
	n, r := c.NRanks, c.Rank
	cs := bruck(n)
	s := peerSet{}
	for k := range cs {
		recv = append(recv, s.ch(mod(r+(1<<k), n)))
	}
	for k := range cs {
		send = append(send, s.ch(mod(r-(1<<k), n)))
	}
	out := func(i int) plan.Ref { return plan.L(plan.Output).At(mod(r+i, n)) }
	// Offset i goes to every round k with i < c_k, into slot 2^k + i − 1
	// of rank r − 2^k.
	dsts := func(i int) []plan.Ref {
		d := []plan.Ref{out(i)}
		for k, ck := range cs {
			if i < ck {
				d = append(d, plan.RS(send[k], (1<<k)+i-1))
			}
		}
		return d
	}
	own = []plan.Op{x(dsts(0), plan.L(plan.Input))}
	rounds = make([][]plan.Op, len(cs))
	for k, ck := range cs {
		for i := 1 << k; i < (1<<k)+ck; i++ {
			rounds[k] = append(rounds[k], x(dsts(i), plan.LS(i-1)))
		}
	}
	return s.chans, own, rounds, send, recv
}

// BruckAllGatherLL builds the Bruck AllGather with LL packets for one
// rank: ⌈log2 n⌉ rounds, n − 1 slots, segments up to
// boundedLLMaxBytes(n−1). Errors: an invalid rank or shape; more than 256
// ranks.
func BruckAllGatherLL(c Config) (*plan.Plan, error) {
	if err := c.validateBruck(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("all_gather-bruck", 0, 0)
	}
	chans, own, rounds, _, _ := c.bruckAllGather(func(dsts []plan.Ref, src plan.Ref) plan.Op { return plan.Transfer(plan.All, 0, dsts, src) })
	return c.boundedLL("all_gather-bruck", chans, c.NRanks-1, 0, c.boundedLLMaxBytes(c.NRanks-1), cat(own, cat(rounds...)))
}

// BruckAllGatherHB builds the windowed Bruck AllGather: per window, this
// rank's segment goes to every round's peer first; round k ≥ 1 waits for
// round k−1's data from r + 2^(k−1), forwards what it brought and signals
// r − 2^k; windows of boundedWindow(n−1) bytes, n − 1 slots, 3 semaphores
// per block. Errors: an invalid rank or shape; more than 256 ranks.
func BruckAllGatherHB(c Config) (*plan.Plan, error) {
	if err := c.validateBruck(); err != nil {
		return nil, err
	}
	n := c.NRanks
	if n == 1 {
		return c.copyPlan("all_gather-bruck", 0, 0)
	}
	chans, own, rounds, send, recv := c.bruckAllGather(func(dsts []plan.Ref, src plan.Ref) plan.Op { return xfer(dsts, src) })
	b := c.HB.Blocks
	data, free, done := sem(ringData, b), sem(ringFree, b), sem(ringDone, b)
	K := len(rounds)
	ops := cat(skip(waits(send, free), 2, 0), own, []plan.Op{plan.Signal(send[0], data)})
	for k := 1; k < K; k++ {
		ops = append(ops, plan.Wait(recv[k-1], data))
		ops = append(ops, rounds[k-1]...)
		ops = append(ops, plan.Signal(send[k], data))
	}
	ops = append(ops, plan.Wait(recv[K-1], data))
	ops = append(ops, rounds[K-1]...)
	ops = append(ops, skip(signals(recv, free), 0, 2)...)
	after := cat(signals(recv, done), waits(send, done))
	return c.boundedHB("all_gather-bruck", chans, c.boundedWindow(n-1), n-1, ringSems, plan.Group{NChunks: 1, Ops: ops, After: after})
}

// bruckReduceScatter returns the channels, the transfers by round (sending
// the offsets of round k to r + 2^k), the final reduction into the output,
// and the peers by round: send[k] is r + 2^k, recv[k] r − 2^k.
func (c Config) bruckReduceScatter(x func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op) (chans []plan.Channel, rounds [][]plan.Op, final plan.Op, send, recv []int) {
	n, r := c.NRanks, c.Rank
	cs := bruck(n)
	s := peerSet{}
	for k := range cs {
		recv = append(recv, s.ch(mod(r-(1<<k), n)))
	}
	for k := range cs {
		send = append(send, s.ch(mod(r+(1<<k), n)))
	}
	base := make([]int, len(cs))
	for k := 1; k < len(cs); k++ {
		base[k] = base[k-1] + cs[k-1]
	}
	// Offset j: this rank's input segment r + j and the partial sums for
	// it received in every round k' with j < c_k'.
	srcs := func(j int) []plan.Ref {
		rs := []plan.Ref{plan.L(plan.Input).At(mod(r+j, n))}
		for k, ck := range cs {
			if j < ck {
				rs = append(rs, plan.LS(base[k]+j))
			}
		}
		return rs
	}
	rounds = make([][]plan.Op, len(cs))
	for k, ck := range cs {
		for j := 1 << k; j < (1<<k)+ck; j++ {
			rounds[k] = append(rounds[k], x([]plan.Ref{plan.RS(send[k], base[k]+j-(1<<k))}, srcs(j)...))
		}
	}
	return s.chans, rounds, postDiv(x([]plan.Ref{plan.L(plan.Output)}, srcs(0)...)), send, recv
}

// BruckReduceScatterLL builds the Bruck ReduceScatter with LL packets for
// one rank: rounds K−1 … 0, n − 1 slots, segments up to
// boundedLLMaxBytes(n−1). Integer Avg divides in the final reduction
// (PostDiv). Errors: an invalid rank or shape; more than 256 ranks.
func BruckReduceScatterLL(c Config) (*plan.Plan, error) {
	if err := c.validateBruck(); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return c.copyPlan("reduce_scatter-bruck", 0, 0)
	}
	chans, rounds, final, _, _ := c.bruckReduceScatter(func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op {
		return plan.Transfer(plan.All, 0, dsts, srcs...)
	})
	var ops []plan.Op
	for k := len(rounds) - 1; k >= 0; k-- {
		ops = append(ops, rounds[k]...)
	}
	return divided(c.boundedLL("reduce_scatter-bruck", chans, c.NRanks-1, 0, c.boundedLLMaxBytes(c.NRanks-1), append(ops, final)))
}

// BruckReduceScatterHB builds the windowed Bruck ReduceScatter: per
// window, round k (from K−1 down) waits for round k+1's partial sums from
// r − 2^(k+1), sends its own to r + 2^k and signals it; the last wait is
// for round 0's, then the reduction into the output. Windows of
// boundedWindow(n−1) bytes, n − 1 slots. Integer Avg divides in the final
// reduction (PostDiv). Errors: an invalid rank or shape; more than 256
// ranks.
func BruckReduceScatterHB(c Config) (*plan.Plan, error) {
	if err := c.validateBruck(); err != nil {
		return nil, err
	}
	n := c.NRanks
	if n == 1 {
		return c.copyPlan("reduce_scatter-bruck", 0, 0)
	}
	chans, rounds, final, send, recv := c.bruckReduceScatter(xfer)
	b := c.HB.Blocks
	data, free, done := sem(ringData, b), sem(ringFree, b), sem(ringDone, b)
	K := len(rounds)
	ops := skip(waits(send, free), 2, 0)
	for k := K - 1; k >= 0; k-- {
		if k < K-1 {
			ops = append(ops, plan.Wait(recv[k+1], data))
		}
		ops = append(ops, rounds[k]...)
		ops = append(ops, plan.Signal(send[k], data))
	}
	ops = append(ops, plan.Wait(recv[0], data), final)
	ops = append(ops, skip(signals(recv, free), 0, 2)...)
	after := cat(signals(recv, done), waits(send, done))
	return divided(c.boundedHB("reduce_scatter-bruck", chans, c.boundedWindow(n-1), n-1, ringSems, plan.Group{NChunks: 1, Ops: ops, After: after}))
}
