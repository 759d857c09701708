package algorithms

import (
	"fmt"
	"slices"

	"github.com/weftccl/weft/hal/plan"
)

// Plans over port channels (plan/port.go): the bytes move through the
// channels' engines (copy engines on GPUs, host-staged copies on PCIe
// without peer access, the software engine of hal/host), not through SM
// threads. Thread blocks only push triggers and wait on semaphores.
//
// They keep the windowed structure of the HB plans (plans.go): a send
// group puts window w of each chunk into the peer's slot and signals
// "data"; a receive group waits for it and has the slot copied out by an
// engine (the ack channel's, below), then signals "free" on that engine,
// which applies the signal only after the copy. Both groups end by
// flushing their channels, so that every copy is done when the launch
// ends and the next work on the stream reads finished output.
//
// Their groups are rolling (plan.Group.Rolling): windows continue from
// launch to launch, alternating scratch halves, and a writer takes the
// "free" of the half a window reuses as a credit in that window
// (rollingCredits), whichever launch released it. A launch of one window
// therefore never waits for the previous launch's release: before, a
// writer waited at each launch's start for its readers' "done" of the
// one before, a round trip through both proxies on every small message
// (on two emulated nodes over sockets, 64 B all_gather 65–70 µs of which
// ~35 were that wait; docs/network.md).
//
//   - AllGatherPort and AllToAllPort: no SM moves data (the own segment is
//     copied by data channel 0's engine too). One block per group: 2
//     blocks, 0 moving data. Over a network the local copies run on the
//     groups' blocks instead (localCopy): 2 blocks, 2 moving data.
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
//     bridge) sends the same bytes in fewer steps than a ring. Three
//     engines per peer: the reduce-scatter puts, the all-gather puts (so a
//     reduced window does not queue behind the next window's reduce-scatter
//     put on one stream) and the acks with the all-gather copies
//     (allReducePortShape gives its blocks, threads and window).
//
// Ack channels: AllGatherPort, AllToAllPort, ReduceScatterPort and
// AllReducePort have another port channel to every peer (channels m … 2m−1
// beside the data channels 0 … m−1, m = NRanks − 1; AllReducePort's are
// 2m … 3m−1, after its all-gather channels) where a GPU plan's
// plan.MaxPeers channels hold them (channelSets: up to 9 ranks, the
// AllReduce's three sets up to 6; beyond, the sets fall back on the data
// channels, as before), whose engine runs
// the receiver's work: the slot-to-output copies and the "free"
// signals. An engine's signal follows every earlier request of that
// engine (hal.Engine), so a "free" sent on the data channel's engine
// would wait for this rank's own puts in flight to the same peer (a
// window's put takes ~90 µs at 32 MiB) before the peer may refill the
// slot; on the ack channel it waits only for the copy out of that slot.
// Each semaphore word still has one writing engine: the data channel's
// writes "data", the ack channel's "free". Waits name either
// channel (a wait reads the counter of the peer and semaphore).
//
// Windows: AllGatherPort, AllToAllPort and AllReducePort move
// Config.Port.Window × 4 / (NRanks − 1) bytes per window and chunk (at
// least Port.Window; 32 MiB on 2 GPUs):
// with two halves of slots, a window's put must outlast the round trip of
// "data" and "free" through the proxies for the link to stay busy
// (gatherWindow).
//
// Scratch per plan: 2 halves × slots × window. The reducing
// plans add a staging slot per put of the input (plan.Op.Stage): with
// PreMulSum the SMs store the input window times this rank's scalar there
// and the engine puts that, since an engine cannot scale (plan/premul.go);
// other operators put the input directly and leave the slots unused.

// PortFamily is the name suffix of port-channel plans.
const PortFamily = "port"

// localCopy is a copy between two of this rank's buffers in a port plan
// (an own segment, a slot copied out into the output): on the engine of
// channel ch, so that no SM moves data, or, where the port channels go
// over a network (Config.Nodes set: peers on other nodes), on the group's
// SMs. A network engine's local copy is a copy on the device's own engine
// driven by the proxy — on 2×H100 12 µs of proxy time per copy
// (cuMemcpyAsync within a GPU alone costs 6 µs of host time), two of them
// on the critical path of every small AllGather, and a signal after one
// waits for it (docs/network.md) — where the group's block copies a small
// message in about a microsecond and a large window far faster than the
// network brings the next one.
func (c Config) localCopy(ch, chunk, nchunks int, dst, src plan.Ref) plan.Op {
	if c.Nodes != nil {
		return plan.Transfer(chunk, nchunks, []plan.Ref{dst}, src)
	}
	return plan.PortCopy(ch, chunk, nchunks, dst, src)
}

// portBlocks is the number of blocks of the port plans' groups that
// reduce (Port.Blocks, at least 1), or 1 with staged sends: every block
// pushes its own put and signal per window, and over a network each is a
// frame (a 6 µs write on loopback sockets), while one block reduces the
// slots far faster than a socket fills them. Over sockets between 2
// emulated nodes on 2×H100, 4 blocks made a 64 B Reduce 97 µs against 45
// for the one-block AllGather (docs/bench/2026-11-26g-h100x2/).
func (c Config) portBlocks() int {
	if c.stageSends() {
		return 1
	}
	return max(1, c.Port.Blocks)
}

// stageSends reports whether the port plans stage the sources of their
// puts into scratch slots (plan.Plan.StageSends) and carry every channel
// over the network (plan.Channel.Net), a peer of the rank's own node
// included: where the ranks span nodes (Nodes) and the network sends and
// receives host memory directly (HostWindows), so that every flat port
// plan's scratch and semaphores are host memory (package channels places
// them there when every channel goes over the network) and no copy engine
// of the device moves a byte a kernel waits for (docs/network.md,
// "Streams and the network path"). The hierarchical plans (hier.go) keep
// their memory channels inside the node and split their windows instead
// (plan.Plan.NetSlot). The rule is the job's, not the rank's, so that
// every rank builds the same plans (names, scratch sizes).
func (c Config) stageSends() bool {
	return c.HostWindows && len(c.Nodes) == c.NRanks && c.NRanks >= 2
}

// StagesSends reports whether the plans across nodes keep every window
// and semaphore a network peer writes in host memory and stage their
// sends on SMs (Nodes and HostWindows): the flat port plans carry every
// channel over the network, the hierarchical ones their port channels,
// with their memory channels inside the node. There no engine of the
// device (on a GPU, a CUDA stream) moves a byte or stores a semaphore
// that a running kernel waits for: the transport's receivers store with
// the CPU and its senders read host memory the kernel wrote, as in NCCL's
// network transports (docs/network.md, "Streams and the network path").
// Past PeerPlansMaxRanks ranks the point-to-point windows stage too
// (P2PWindowPlans).
func (c Config) StagesSends() bool { return c.stageSends() }

// stageSlots is how many scratch slots a port plan with k staged puts
// adds (k under stageSends, else none), and stage the Stage of put i
// given the plan's first staging slot first: 1 + first + i under
// stageSends, else 0 (no staging slot).
func (c Config) stageSlots(k int) int {
	if c.stageSends() {
		return k
	}
	return 0
}

func (c Config) stage(first, i int) int {
	if c.stageSends() {
		return 1 + first + i
	}
	return 0
}

// portChannels are one port channel per peer.
func (c Config) portChannels() []plan.Channel {
	chs := c.channels()
	for i := range chs {
		chs[i].Port, chs[i].Net = true, c.stageSends()
	}
	return chs
}

// ackChannels are portChannels twice: data channels 0 … m−1, then ack
// channels m … 2m−1 to the same peers (see Ack channels above); acks
// returns the indices of the ack channels (the data channels' when two
// sets do not fit, channelSets).
func (c Config) ackChannels() (chs []plan.Channel, acks []int) {
	chs, sets := c.channelSets(2)
	return chs, sets[1]
}

// channelSets returns the channels of k sets of portChannels, set i at
// indices i·m … i·m+m−1, and sets[i], the indices that serve wanted set
// i. A GPU plan holds at most plan.MaxPeers channels, so only d =
// min(k, MaxPeers / m) sets are distinct: the last wanted set (the acks)
// gets set d−1, the others their own while they fit, then set 0 (the data
// channels). With d = 1 the plan is the one-engine-per-peer plan of
// before (2 ranks: every set fits up to k = 16).
func (c Config) channelSets(k int) (chs []plan.Channel, sets [][]int) {
	one := c.portChannels()
	d := max(1, min(k, plan.MaxPeers/max(1, len(one))))
	for i := 0; i < d; i++ {
		chs = append(chs, one...)
	}
	for i := 0; i < k; i++ {
		set := 0
		switch {
		case i == k-1:
			set = d - 1
		case i < d-1:
			set = i
		}
		var idx []int
		for j := range one {
			idx = append(idx, set*len(one)+j)
		}
		sets = append(sets, idx)
	}
	return chs, sets
}

// allReducePortShape is the shape of AllReducePort: Port's blocks, twice
// its threads (at most 1024) and gatherWindow's window. Its reduce group
// combines on as many blocks as each group pushes triggers from, so more
// blocks buy SM bandwidth with more proxy work per window (a put, copy or
// signal per block and step). On 2×H200 (2026-11-26, 1 GB, float): 4
// blocks of 512 threads with 8 MiB windows 95 GB/s busbw; with 32 MiB
// windows, three engines per peer and 1024 threads, 4 blocks 248 GB/s,
// 8 blocks 240 GB/s (and 16 blocks, on two engines per peer, 51 GB/s).
func (c Config) allReducePortShape() Shape {
	s := c.Port
	s.Blocks = c.portBlocks()
	s.Threads = min(2*s.Threads, 1024)
	s.Window = c.gatherWindow()
	return s
}

// gatherWindow is the window of AllGatherPort and AllToAllPort: 4 ×
// Port.Window spread over the peers, at least Port.Window, a multiple of
// plan.AlignBytes. On 2 GPUs it is 32 MiB: a put of it takes ~90 µs at
// 370 GB/s, longer than the ~60 µs round trip of "data" and "free"
// through the proxies measured on 2×H100 (docs/portchannel.md), so two
// halves keep the link busy; 8 MiB windows left it idle half the time.
func (c Config) gatherWindow() int64 {
	w := 4 * c.Port.Window / int64(max(1, c.NRanks-1))
	w = w / plan.AlignBytes * plan.AlignBytes
	return max(w, c.Port.Window)
}

// rolling makes g a rolling group (plan.Group.Rolling) that counts its
// windows by its wait on channel ch, semaphore s.
func rolling(g plan.Group, ch, s int) plan.Group {
	g.Rolling, g.RollChan, g.RollSem = true, ch, s
	return g
}

// rollingCredits are a rolling writer's waits, in every window, for its
// readers' "free" of the half the window reuses: credit waits two
// releases behind (plan.Op.Credits), so the first two windows of the
// plan's life pass at once (plans of depth d: Config.oneWayCredits).
func rollingCredits(chs []int, s int) []plan.Op { return creditWaits(chs, s, 2) }

// dropFlushes removes the closing flushes of a group of a plan with
// staged sends (plan.Plan.StageSends) whose engines touch no buffer of
// the caller: every port transfer is a put of a staging slot, and the
// copies out of the slots run on SMs (localCopy). A flush makes the
// launch wait until its engine requests are complete at the source, so
// that the caller may reuse its buffers once the launch is done; here
// the engines read only this rank's scratch, whose reuse the readers'
// "free" credits already order, so the launch need not wait for the
// proxy to write its last frames (over sockets, one 6 µs write per
// side of every launch; docs/network.md). A group whose engine reads or
// writes a caller's buffer (AllReducePort's all-gather puts of the
// output) keeps its flushes.
func dropFlushes(g *plan.Group) {
	touches := func(o plan.Op) bool { return o.Kind == plan.OpTransfer && o.Port && o.Stage == 0 }
	if slices.ContainsFunc(g.Ops, touches) || slices.ContainsFunc(g.After, touches) {
		return
	}
	g.After = slices.DeleteFunc(slices.Clone(g.After), func(o plan.Op) bool { return o.Kind == plan.OpFlush })
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
	return c.portPlanOn(c.portChannels(), 0, name, b, slots, sems, groups...)
}

// portPlanOn is portPlan over channels chs, with window depth depth
// (plan.Plan.WindowDepth; 0: two halves).
func (c Config) portPlanOn(chs []plan.Channel, depth int, name string, b, slots, sems int, groups ...plan.Group) (*plan.Plan, error) {
	s := c.Port
	if err := validShape("port", s); err != nil {
		return nil, err
	}
	if c.NRanks == 1 {
		return nil, fmt.Errorf("algorithms: %s over port channels needs at least 2 ranks", name)
	}
	w := int64(0)
	for _, g := range groups {
		w = max(w, g.Window)
	}
	p := &plan.Plan{Name: fmt.Sprintf("%s-%s-%dx%d-w%d", name, PortFamily, b, s.Threads, w), Rank: c.Rank, NRanks: c.NRanks,
		Channels: chs, Threads: s.Threads, Unroll: s.Unroll, Scratch: plan.Simple, ScratchSlots: slots, Semaphores: sems * b,
		StageSends: c.stageSends(), Groups: groups, WindowDepth: depth}
	if depth > 2 {
		p.Name += fmt.Sprintf("-d%d", depth)
	}
	if p.StageSends {
		p.Name += "-hs"
		for gi := range p.Groups {
			dropFlushes(&p.Groups[gi])
		}
	}
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
	pchs, acks := c.ackChannels()
	var puts, copies []plan.Op
	m := len(chs)
	for ci, ch := range chs {
		put := plan.PortPut(ci, 0, 1, plan.RS(ci, slotOf(c.Rank, ch.Peer)), src(ch.Peer))
		put.Stage = c.stage(m, ci)
		puts = append(puts, put)
		copies = append(copies, c.localCopy(acks[ci], 0, 1, plan.L(plan.Output).At(ch.Peer), plan.LS(ci)))
	}
	if len(chs) > 0 {
		// The own segment: on data channel 0, whose closing flush covers
		// it; its copy lane runs it beside the puts (hal/nvlink).
		puts = append(puts, c.localCopy(0, 0, 1, plan.L(plan.Output).At(c.Rank), src(c.Rank)))
	}
	w := c.gatherWindow()
	send := rolling(c.portGroup(1, 1, cat(rollingCredits(all, sem(semFree, 1)), puts, signals(all, sem(semData, 1))), flushes(all)), all[0], sem(semFree, 1))
	recv := rolling(c.portGroup(1, 1, cat(waits(acks, sem(semData, 1)), copies, releases(acks, sem(semFree, 1))), flushes(acks)), acks[0], sem(semData, 1))
	send.Window, recv.Window = w, w
	return c.portPlanOn(pchs, 0, name, 1, m+c.stageSlots(m), 2, send, recv)
}

// ReduceScatterPort: the send group puts segment p of the input into peer
// p's slot through the engines; the receive group (Port.Blocks blocks)
// combines the own segment with the slots on SMs.
func ReduceScatterPort(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	chs, all := c.channels(), c.others()
	b := c.portBlocks()
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
	pchs, acks := c.ackChannels()
	send := rolling(c.portGroup(b, 1, cat(rollingCredits(all, sem(semFree, b)), puts, signals(all, sem(semData, b))), flushes(all)), all[0], sem(semFree, b))
	recv := rolling(c.portGroup(b, 1, cat(waits(all, sem(semData, b)), red, releases(acks, sem(semFree, b))), flushes(acks)), all[0], sem(semData, b))
	return c.portPlanOn(pchs, 0, "reduce_scatter", b, 2*m, 2, send, recv)
}

// PortOneShotMaxBytes is the largest AllReduce (count × element size)
// that AllReduceOneShotPort serves where the flat port plans stage their
// sends and the hierarchical ones do not apply (every rank alone on its
// node, or nodes of unequal size):
// one hop instead of AllReducePort's two, for (n−1)× the bytes of the
// input sent per rank against 2(n−1)/n×. Over sockets between 2 emulated
// nodes a 64 B AllReducePort took 213 µs against 43 µs for the one-hop
// AllGather (2×H100, docs/bench/2026-11-26g-h100x2/).
const PortOneShotMaxBytes = 256 << 10

// AllReduceOneShotPort is the one-hop AllReduce over port channels (the
// port-channel counterpart of the 1PA plans), for plans with staged sends
// (Plan.StageSends): one group of Port.Blocks blocks whose every window
// stages the input into a slot per peer and has it put into this rank's
// slot of every peer, then waits for every peer's window and combines the
// input with the slots on SMs into the output, and releases them. One
// group, so that the input is staged before the output (the same buffer
// in place) is written; the engines read only the staging slots.
func AllReduceOneShotPort(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if !c.stageSends() {
		return nil, fmt.Errorf("algorithms: the one-hop AllReduce over port channels stages its sends (nodes and host windows): %w", ErrNoPlan)
	}
	chs, all := c.channels(), c.others()
	b := c.portBlocks()
	m := len(chs)
	var puts []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci, ch := range chs {
		put := plan.PortPut(ci, 0, 1, plan.RS(ci, slotOf(c.Rank, ch.Peer)), plan.L(plan.Input))
		put.Stage = 1 + m + ci
		puts = append(puts, put)
		srcs = append(srcs, plan.LS(ci))
	}
	red := combineChain(xfer, plan.L(plan.Output), srcs)
	pchs, acks := c.ackChannels()
	g := c.portGroup(b, 1, cat(rollingCredits(all, sem(semFree, b)), puts, signals(all, sem(semData, b)),
		waits(all, sem(semData, b)), red, releases(acks, sem(semFree, b))), flushes(all))
	return c.portPlanOn(pchs, 0, "all_reduce-1pa", b, 2*m, 2, rolling(g, all[0], sem(semFree, b)))
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
	c.Port = c.allReducePortShape()
	chs, all := c.channels(), c.others()
	n, b := c.NRanks, c.Port.Blocks
	m := len(chs)
	// Three engines per peer where they fit (channelSets): the
	// reduce-scatter puts (all), the all-gather puts (gch), so that a
	// reduced window does not queue behind the next window's
	// reduce-scatter put on one stream, and the acks with the all-gather
	// copies.
	pchs, sets := c.channelSets(3)
	gch, acks := sets[1], sets[2]
	var puts, gputs, copies []plan.Op
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci, ch := range chs {
		put := plan.PortPut(ci, ch.Peer, n, plan.RS(ci, slotOf(c.Rank, ch.Peer)), plan.L(plan.Input))
		put.Stage = 1 + 2*m + ci
		puts = append(puts, put)
		srcs = append(srcs, plan.LS(ci))
		gputs = append(gputs, plan.PortPut(gch[ci], c.Rank, n, plan.RS(gch[ci], m+slotOf(c.Rank, ch.Peer)), plan.L(plan.Output)))
		copies = append(copies, c.localCopy(acks[ci], ch.Peer, n, plan.L(plan.Output), plan.LS(m+ci)))
	}
	red := combineChain(func(dsts []plan.Ref, srcs ...plan.Ref) plan.Op { return plan.Transfer(c.Rank, n, dsts, srcs...) }, plan.L(plan.Output), srcs)
	w := c.Port.Window
	send := rolling(c.portGroup(b, n, cat(rollingCredits(all, sem(semFree, b)), puts, signals(all, sem(semData, b))), flushes(all)), all[0], sem(semFree, b))
	reduce := rolling(c.portGroup(b, n, cat(waits(all, sem(semData, b)), rollingCredits(all, sem(semFree2, b)), red,
		releases(acks, sem(semFree, b)), gputs, signals(gch, sem(semData2, b))), flushes(gch)), all[0], sem(semData, b))
	gather := rolling(c.portGroup(b, n, cat(waits(acks, sem(semData2, b)), copies, releases(acks, sem(semFree2, b))), flushes(acks)), acks[0], sem(semData2, b))
	send.Window, reduce.Window, gather.Window = w, w, w
	// Semaphores data, free, data2, free2 (semDone's index stays unused).
	return c.portPlanOn(pchs, 0, "all_reduce", b, 3*m, semFree2+1, send, reduce, gather)
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
