// Package algorithms writes weft's collectives as plans (package
// hal/plan) over memory channels, and selects among them by size.
//
// Algorithms are named as in the MSCCL++ paper (Shah et al., "MSCCL++:
// Rethinking GPU Communication Abstractions for Cutting-edge AI
// Applications", 2025):
//
//   - AllReduce 1PA (one-phase all-pairs, LL): every rank writes its whole
//     input as LL packets into a scratch slot of every peer, then reduces its
//     own input with the packets it received. One step, no semaphore: the
//     packets' flags are the synchronisation. Each rank sends (n−1)·S and
//     the packets double it, so it serves small messages, where latency
//     rules.
//   - AllReduce 2PA (two-phase all-pairs, HB, zero-copy): a barrier, then
//     rank r reduces chunk r of the n inputs, reading the peers' registered
//     input buffers directly (reduce-scatter), and writes the result into
//     chunk r of every rank's output (all-gather), then a barrier. No
//     scratch: memory stays constant whatever the size. Each rank moves
//     2(n−1)/n·S through its links, the bus-bandwidth optimum.
//
// Plans are built once per communicator and serve every size they are
// selected for; [Select] picks one by message size.
package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Config shapes the plans of a communicator.
type Config struct {
	Rank, NRanks int
	// Blocks is the number of thread blocks of bandwidth-bound plans (2PA);
	// LLBlocks of latency-bound ones (1PA). Threads is per block; Unroll the
	// 16-byte vectors per thread per step of 2PA (0: the backend's default).
	Blocks, LLBlocks, Threads, Unroll int
	// LL is the packet format of 1PA: plan.LL16 or plan.LL8.
	LL plan.Protocol
	// LLMaxBytes is the largest message 1PA serves (the 1PA/2PA threshold).
	LLMaxBytes int64
}

// DefaultConfig returns the configuration for a device with sms
// multiprocessors (GPUs) or cores (hal/host). The 1PA/2PA threshold and
// block counts come from measurements on 4×H200 (docs/bench/notes.md).
func DefaultConfig(rank, nranks, sms int, gpu bool) Config {
	c := Config{Rank: rank, NRanks: nranks, LL: plan.LL16, LLMaxBytes: 128 << 10}
	if gpu {
		c.Blocks, c.LLBlocks, c.Threads = min(sms/2, 64), 8, 1024
	} else {
		c.Blocks, c.LLBlocks, c.Threads = max(1, min(sms, 4)), 2, 32
	}
	return c
}

func (c Config) validate() error {
	if c.NRanks < 1 || c.NRanks > plan.MaxOperands-1 || c.Rank < 0 || c.Rank >= c.NRanks {
		return fmt.Errorf("algorithms: rank %d of %d (supported: 1 to %d ranks)", c.Rank, c.NRanks, plan.MaxOperands-1)
	}
	if c.Blocks < 1 || c.LLBlocks < 1 {
		return fmt.Errorf("algorithms: %d blocks, %d LL blocks", c.Blocks, c.LLBlocks)
	}
	return nil
}

// channels returns one channel per peer in rank order, skipping this rank.
func (c Config) channels() []plan.Channel {
	var chs []plan.Channel
	for p := 0; p < c.NRanks; p++ {
		if p != c.Rank {
			chs = append(chs, plan.Channel{Peer: p})
		}
	}
	return chs
}

// slotOf is the scratch slot in which rank `to` receives from rank `from`:
// the index of the channel to `from` in `to`'s channel list (so that a
// receiver's slot i holds the packets of its channel i's peer).
func slotOf(from, to int) int {
	if from < to {
		return from
	}
	return from - 1
}

// AllReduce1PA builds the one-phase all-pairs LL AllReduce for one rank.
func AllReduce1PA(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs := c.channels()
	p := &plan.Plan{
		Name:         fmt.Sprintf("allreduce-1pa-%s", c.LL),
		Rank:         c.Rank,
		NRanks:       c.NRanks,
		Channels:     chs,
		Threads:      c.Threads,
		Scratch:      c.LL,
		ScratchSlots: len(chs),
		MaxBytes:     c.LLMaxBytes,
	}
	var puts []plan.Ref
	reduceSrcs := []plan.Ref{plan.L(plan.Input)}
	for ci, ch := range chs {
		puts = append(puts, plan.RS(ci, slotOf(c.Rank, ch.Peer)))
		reduceSrcs = append(reduceSrcs, plan.LS(ci))
	}
	var ops []plan.Op
	if len(chs) > 0 {
		ops = append(ops, plan.Transfer(plan.All, 0, puts, plan.L(plan.Input)))
	}
	ops = append(ops, plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, reduceSrcs...))
	p.Groups = []plan.Group{{Blocks: c.LLBlocks, Ops: ops}}
	if len(chs) == 0 {
		p.Scratch, p.ScratchSlots = plan.Simple, 0
	}
	return p, p.Validate()
}

// AllReduce2PA builds the two-phase all-pairs zero-copy AllReduce.
func AllReduce2PA(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs := c.channels()
	b := c.Blocks
	p := &plan.Plan{
		Name:       "allreduce-2pa-hb",
		Rank:       c.Rank,
		NRanks:     c.NRanks,
		Channels:   chs,
		Threads:    c.Threads,
		Unroll:     c.Unroll,
		Semaphores: 2 * b,
	}
	barrier := func(sem int) []plan.Op {
		var ops []plan.Op
		for ci := range chs {
			ops = append(ops, plan.Signal(ci, sem))
		}
		for ci := range chs {
			ops = append(ops, plan.Wait(ci, sem))
		}
		return ops
	}
	dsts := []plan.Ref{plan.L(plan.Output)}
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci := range chs {
		dsts = append(dsts, plan.R(ci, plan.Output))
		srcs = append(srcs, plan.R(ci, plan.Input))
	}
	var ops []plan.Op
	ops = append(ops, barrier(0)...)
	ops = append(ops, plan.Transfer(c.Rank, c.NRanks, dsts, srcs...))
	ops = append(ops, barrier(b)...)
	p.Groups = []plan.Group{{Blocks: b, Ops: ops}}
	return p, p.Validate()
}

// Choice is one plan of a collective with the message sizes it serves.
type Choice struct {
	Plan     *plan.Plan
	MaxBytes int64 // 0: unbounded
}

// AllReducePlans returns the AllReduce plans of a rank, smallest messages
// first.
func AllReducePlans(c Config) ([]Choice, error) {
	p1, err := AllReduce1PA(c)
	if err != nil {
		return nil, err
	}
	p2, err := AllReduce2PA(c)
	if err != nil {
		return nil, err
	}
	return []Choice{{Plan: p1, MaxBytes: c.LLMaxBytes}, {Plan: p2}}, nil
}

// Select returns the index of the first choice that serves bytes.
func Select(choices []Choice, bytes int64) int {
	for i, ch := range choices {
		if ch.MaxBytes == 0 || bytes <= ch.MaxBytes {
			return i
		}
	}
	return len(choices) - 1
}
