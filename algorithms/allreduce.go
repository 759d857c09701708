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
	// Mid and Large shape the 2PA plans for messages up to MidMaxBytes and
	// beyond; LLBlocks and Threads the 1PA plan.
	Mid, Large        Shape
	LLBlocks, Threads int
	// LL is the packet format of 1PA: plan.LL16 or plan.LL8.
	LL plan.Protocol
	// LLMaxBytes is the largest message 1PA serves (the 1PA/2PA threshold);
	// MidMaxBytes the largest that the Mid-shaped 2PA serves.
	LLMaxBytes, MidMaxBytes int64
}

// Shape is the launch shape of a bandwidth-bound plan: thread blocks,
// threads per block, and 16-byte vectors per thread per step (loads in
// flight per source; 0 is the backend's default).
type Shape struct {
	Blocks, Threads, Unroll int
}

// DefaultConfig returns the configuration for a device with sms
// multiprocessors (GPUs) or cores (hal/host). Thresholds and shapes come
// from the sweeps on 4×H200 in docs/bench/notes.md: up to 16 MB, more loads
// in flight per thread win (64 × 1024 threads, unroll 4: 265 GB/s at 8 MB
// against 227 with unroll 2); beyond, fewer per thread and more blocks win
// (128 × 512, unroll 2: 324 GB/s at 512 MB against 316).
func DefaultConfig(rank, nranks, sms int, gpu bool) Config {
	c := Config{Rank: rank, NRanks: nranks, LL: plan.LL16, LLMaxBytes: 128 << 10, MidMaxBytes: 16 << 20}
	if gpu {
		c.LLBlocks, c.Threads = 8, 1024
		c.Mid = Shape{Blocks: min(sms/2, 64), Threads: 1024, Unroll: 4}
		c.Large = Shape{Blocks: min(sms, 128), Threads: 512, Unroll: 2}
	} else {
		c.LLBlocks, c.Threads = 2, 32
		c.Mid = Shape{Blocks: max(1, min(sms, 4)), Threads: 32}
		c.Large = c.Mid
	}
	return c
}

func (c Config) validate() error {
	if c.NRanks < 1 || c.NRanks > plan.MaxOperands-1 || c.Rank < 0 || c.Rank >= c.NRanks {
		return fmt.Errorf("algorithms: rank %d of %d (supported: 1 to %d ranks)", c.Rank, c.NRanks, plan.MaxOperands-1)
	}
	if c.Mid.Blocks < 1 || c.Large.Blocks < 1 || c.LLBlocks < 1 {
		return fmt.Errorf("algorithms: %d, %d and %d LL thread blocks: want at least 1 each", c.Mid.Blocks, c.Large.Blocks, c.LLBlocks)
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

// AllReduce2PA builds the two-phase all-pairs zero-copy AllReduce with
// launch shape s.
func AllReduce2PA(c Config, s Shape) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs := c.channels()
	b := s.Blocks
	threads := s.Threads
	if threads == 0 {
		threads = c.Threads
	}
	p := &plan.Plan{
		Name:       fmt.Sprintf("allreduce-2pa-hb-%dx%d-u%d", b, threads, s.Unroll),
		Rank:       c.Rank,
		NRanks:     c.NRanks,
		Channels:   chs,
		Threads:    threads,
		Unroll:     s.Unroll,
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
	mid, err := AllReduce2PA(c, c.Mid)
	if err != nil {
		return nil, err
	}
	if c.Large == c.Mid || c.MidMaxBytes <= c.LLMaxBytes {
		return []Choice{{Plan: p1, MaxBytes: c.LLMaxBytes}, {Plan: mid}}, nil
	}
	large, err := AllReduce2PA(c, c.Large)
	if err != nil {
		return nil, err
	}
	return []Choice{{Plan: p1, MaxBytes: c.LLMaxBytes}, {Plan: mid, MaxBytes: c.MidMaxBytes}, {Plan: large}}, nil
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
