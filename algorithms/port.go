package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Plans over port channels (plan/port.go): the bytes move through the
// channels' engines (copy engines on GPUs, host-staged copies on PCIe
// without peer access, the software engine of hal/host), not through SM
// threads. Thread blocks only push triggers and wait on semaphores.
//
// They keep the windowed structure of the HB plans (plans.go): a send
// group puts window w of each chunk into the peer's slot and signals
// "data"; a receive group waits for it and has the slot copied out by the
// same channel's engine, then signals "free" on that engine, which applies
// the signal only after the copy. Both groups end by flushing their
// channels, so that every copy is done when the launch ends and the next
// work on the stream reads finished output.
//
//   - AllGatherPort and AllToAllPort: no SM moves data (the own segment is
//     copied by channel 0's engine too). One block per group.
//   - ReduceScatterPort: puts through engines, the reduction on SMs.
//
// Past AllPairsMaxRanks ranks the reducing plans (ReduceScatterPort,
// AllReducePort, ReducePort) combine in a chain of transfers of at most
// plan.MaxOperands sources (combineChain), so they serve every operator
// but Avg (Plans marks them Staged); they serve up to PeerPlansMaxRanks.
//   - AllReducePort (2PA over port channels): reduce-scatter through
//     engines with the reduction of window w overlapping the puts of
//     window w+1, then all-gather of the reduced chunk through engines. For
//     2 ranks this is the two-phase ring (2PR) of MSCCL++; for more ranks
//     it is all-pairs, which on a switch (NVSwitch, a PCIe switch, the host
//     bridge) sends the same bytes in fewer steps than a ring.
//
// Scratch per plan: 2 halves × slots × Config.Port.Window. The reducing
// plans add a staging slot per put of the input (plan.Op.Stage): with
// PreMulSum the SMs store the input window times this rank's scalar there
// and the engine puts that, since an engine cannot scale (plan/premul.go);
// other operators put the input directly and leave the slots unused.

// PortFamily is the name suffix of port-channel plans.
const PortFamily = "port"

// portChannels are one port channel per peer.
func (c Config) portChannels() []plan.Channel {
	chs := c.channels()
	for i := range chs {
		chs[i].Port = true
	}
	return chs
}

func flushes(chs []int) []plan.Op {
	var ops []plan.Op
	for _, ci := range chs {
		ops = append(ops, plan.Flush(ci))
	}
	return ops
}

// portPlan finishes a port-channel plan with windowed groups of b blocks.
func (c Config) portPlan(name string, b, slots, sems int, groups ...plan.Group) (*plan.Plan, error) {
	s := c.Port
	if err := validShape("port", s); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return nil, fmt.Errorf("algorithms: %s over port channels needs at least 2 ranks", name)
	}
	p := &plan.Plan{Name: fmt.Sprintf("%s-%s-%dx%d-w%d", name, PortFamily, b, s.Threads, s.Window), Rank: c.Rank, NRanks: c.NRanks,
		Channels: c.portChannels(), Threads: s.Threads, Unroll: s.Unroll, Scratch: plan.Simple, ScratchSlots: slots, Semaphores: sems * b}
	p.Groups = groups
	return p, p.Validate()
}

func (c Config) portGroup(b, nchunks int, ops, after []plan.Op) plan.Group {
	return plan.Group{Blocks: b, Window: c.Port.Window, NChunks: nchunks, Ops: ops, After: after}
}

// AllGatherPort is AllGather through engines: rank r's input window goes
// by put into slot r of every peer and by an engine copy into segment r of
// its own output; each rank's engines copy slot i into segment peer(i).
func AllGatherPort(c Config) (*plan.Plan, error) {
	return c.gatherPort("all_gather", func(peer int) plan.Ref { return plan.L(plan.Input) })
}

// AllToAllPort is AllToAll through engines (AllGatherPort with one input
// segment per peer).
func AllToAllPort(c Config) (*plan.Plan, error) {
	return c.gatherPort("alltoall", func(peer int) plan.Ref { return plan.L(plan.Input).At(peer) })
}

// gatherPort builds AllGatherPort and AllToAllPort: src(p) is what goes to
// rank p (src(rank): what goes into the own segment).
func (c Config) gatherPort(name string, src func(peer int) plan.Ref) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	var puts, copies []plan.Op
	for ci, ch := range chs {
		puts = append(puts, plan.PortPut(ci, 0, 1, plan.RS(ci, slotOf(c.Rank, ch.Peer)), src(ch.Peer)))
		copies = append(copies, plan.PortCopy(ci, 0, 1, plan.L(plan.Output).At(ch.Peer), plan.LS(ci)))
	}
	if len(chs) > 0 {
		puts = append(puts, plan.PortCopy(0, 0, 1, plan.L(plan.Output).At(c.Rank), src(c.Rank)))
	}
	send := c.portGroup(1, 1, cat(skip(waits(all, sem(semFree, 1)), 2, 0), puts, signals(all, sem(semData, 1))),
		cat(waits(all, sem(semDone, 1)), flushes(all)))
	recv := c.portGroup(1, 1, cat(waits(all, sem(semData, 1)), copies, skip(signals(all, sem(semFree, 1)), 0, 2)),
		cat(signals(all, sem(semDone, 1)), flushes(all)))
	return c.portPlan(name, 1, len(chs), 3, send, recv)
}

// ReduceScatterPort: the send group puts segment p of the input into peer
// p's slot through the engines; the receive group (Port.Blocks blocks)
// combines the own segment with the slots on SMs.
func ReduceScatterPort(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	b := c.Port.Blocks
	var puts []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input).At(c.Rank)}
	m := len(chs)
	for ci, ch := range chs {
		put := plan.PortPut(ci, 0, 1, plan.RS(ci, slotOf(c.Rank, ch.Peer)), plan.L(plan.Input).At(ch.Peer))
		put.Stage = 1 + m + ci
		puts = append(puts, put)
		srcs = append(srcs, plan.LS(ci))
	}
	red := combineChain(xfer, plan.L(plan.Output), srcs)
	send := c.portGroup(b, 1, cat(skip(waits(all, sem(semFree, b)), 2, 0), puts, signals(all, sem(semData, b))),
		cat(waits(all, sem(semDone, b)), flushes(all)))
	recv := c.portGroup(b, 1, cat(waits(all, sem(semData, b)), red, skip(signals(all, sem(semFree, b)), 0, 2)),
		signals(all, sem(semDone, b)))
	return c.portPlan("reduce_scatter", b, 2*m, 3, send, recv)
}

// AllReducePort is the two-phase AllReduce over port channels. In each
// window: the send group puts chunk p of the input into peer p's first
// slot set; the reduce group (SMs) combines chunk r of the input with those
// slots into chunk r of the output, then puts that chunk into this rank's
// slot of every peer's second set; the gather group has its engines copy
// the second set into the output chunks of the peers. Scratch: 2 × 3(n−1)
// window-sized slots (the third set stages PreMulSum's scaled puts).
func AllReducePort(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	n, b := c.NRanks, c.Port.Blocks
	m := len(chs)
	var puts, gputs, copies []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci, ch := range chs {
		put := plan.PortPut(ci, ch.Peer, n, plan.RS(ci, slotOf(c.Rank, ch.Peer)), plan.L(plan.Input))
		put.Stage = 1 + 2*m + ci
		puts = append(puts, put)
		srcs = append(srcs, plan.LS(ci))
		gputs = append(gputs, plan.PortPut(ci, c.Rank, n, plan.RS(ci, m+slotOf(c.Rank, ch.Peer)), plan.L(plan.Output)))
		copies = append(copies, plan.PortCopy(ci, ch.Peer, n, plan.L(plan.Output), plan.LS(m+ci)))
	}
	red := combineChain(func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(c.Rank, n, dsts, srcs...) }, plan.L(plan.Output), srcs)
	send := c.portGroup(b, n, cat(skip(waits(all, sem(semFree, b)), 2, 0), puts, signals(all, sem(semData, b))),
		cat(waits(all, sem(semDone, b)), flushes(all)))
	reduce := c.portGroup(b, n, cat(waits(all, sem(semData, b)), skip(waits(all, sem(semFree2, b)), 2, 0), red,
		skip(signals(all, sem(semFree, b)), 0, 2), gputs, signals(all, sem(semData2, b))),
		cat(signals(all, sem(semDone, b)), waits(all, sem(semDone2, b)), flushes(all)))
	gather := c.portGroup(b, n, cat(waits(all, sem(semData2, b)), copies, skip(signals(all, sem(semFree2, b)), 0, 2)),
		cat(signals(all, sem(semDone2, b)), flushes(all)))
	return c.portPlan("all_reduce", b, 3*m, 6, send, reduce, gather)
}

// PortPlan returns the port-channel plan of a collective, or nil when the
// communicator has one rank or the collective is rooted (Broadcast,
// Reduce: PortPlanRoot takes their root). SendRecv's is P2PPort.
func PortPlan(c Config, coll Collective) (*plan.Plan, error) {
	if c.NRanks < 2 {
		return nil, nil
	}
	switch coll {
	case AllGather:
		return AllGatherPort(c)
	case AllToAll:
		return AllToAllPort(c)
	case ReduceScatter:
		return ReduceScatterPort(c)
	case AllReduce:
		return AllReducePort(c)
	case SendRecv:
		return P2PPort(c)
	}
	return nil, nil
}
