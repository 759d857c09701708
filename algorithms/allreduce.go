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
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Config shapes the plans of a communicator.
type Config struct {
	Rank, NRanks int
	// AllReduce lists the zero-copy AllReduce plans and the sizes each
	// serves (see Tier); nil: the tiers the fields below describe
	// (AllReduceTiers). A tuning file or WEFT_ALLREDUCE sets it.
	AllReduce []Tier
	// Mid and Large shape the 2PA plans for messages up to MidMaxBytes and
	// beyond; LLBlocks and Threads the 1PA plan.
	Mid, Large        Shape
	LLBlocks, Threads int
	// LL is the packet format of 1PA: plan.LL16 or plan.LL8.
	LL plan.Protocol
	// WideProto, where set, is the packet format of the WideLL-shaped
	// plans (the wide LL plans of every collective, the wide 1PA of the
	// scratch AllReduce, AllReduce2PALL, the split LL plans): plan.LL128
	// where the device carries its lines (hal.LL128Carrier), which puts
	// 120 data bytes in 128 where LL16 puts 8 in 16. Unset (plan.Simple):
	// LL.
	WideProto plan.Protocol
	// LLMaxBytes is the largest message 1PA serves (the 1PA/2PA threshold);
	// MidMaxBytes the largest that the Mid-shaped 2PA serves.
	LLMaxBytes, MidMaxBytes int64
	// CollLLMaxBytes is the largest segment (count × element size) the LL
	// plans of the other collectives serve; HB shapes their windowed plans
	// (Blocks per group, Window bytes per chunk per window) and P2P the
	// point-to-point plan.
	CollLLMaxBytes int64
	// CollWideMinBytes, when below CollLLMaxBytes and WideLL is set, is the
	// largest segment the narrow (LLBlocks) LL plans of AllGather,
	// ReduceScatter and AllToAll serve; a WideLL-shaped LL plan of each
	// takes the segments above it, up to CollLLMaxBytes. 0: no wide plans.
	CollWideMinBytes int64
	HB, P2P          Shape
	// RingMinBytes, where set (> 0), is the smallest message (AllReduce)
	// or input (ReduceScatter: n segments of RingMinBytes/n) that takes
	// the windowed ring plans
	// (RingAllReduceHB, RingReduceScatterHB) on memory-mapped links when
	// no family is forced; smaller ones keep the all-pairs plans. 0:
	// never (past AllPairsMaxRanks the bounded family serves anyway).
	RingMinBytes int64
	// PairHB, where set (Blocks > 0), is the HB shape of the windowed
	// plans with two groups per rank (AllGatherHB, ReduceScatterHB,
	// AllToAllHB); HB keeps the three-group AllReduceHB. WEFT_HB_SHAPE
	// sets both (weft's config clears PairHB).
	PairHB Shape
	// RingHB, where set (Blocks > 0), is the shape of the windowed rings
	// that RingMinBytes selects by size (ringFrom); unset, they take HB.
	// WEFT_RING_SHAPE sets it.
	RingHB Shape
	// P2PLLMaxBytes is the largest point-to-point operation (bytes of one
	// send or receive) that the LL point-to-point plan serves
	// (P2PLLPlan); larger ones take the windowed plan P2P shapes. 0: no
	// LL plan. P2PLL shapes the LL plan: blocks of each of its groups
	// (a send and a receive group per peer, a self-copy group) and
	// threads per block.
	P2PLLMaxBytes int64
	P2PLL         Shape
	// P2PLLWideMaxBytes, when above P2PLLMaxBytes, adds a second LL
	// point-to-point plan for the operations between the two bounds, with
	// P2PLL's shape: an LL plan spreads its bound over its blocks, so one
	// plan for both ranges would leave most blocks idle on small
	// operations. 0: none.
	P2PLLWideMaxBytes int64
	// P2PLLSmallMaxBytes, when positive and below P2PLLMaxBytes, adds an
	// LL point-to-point plan of one block per group (P2PLL's threads) for
	// the operations up to it, ahead of the P2PLL-shaped plan: a block of
	// that plan holds its share of the span, so a small operation lands in
	// its first block while every other block still takes its credit and
	// releases its half. 0: none.
	P2PLLSmallMaxBytes int64
	// P2PMidMaxBytes, when above the LL bounds, adds a windowed
	// point-to-point plan shaped P2PMid for the operations between the
	// largest LL bound and it; larger ones take the P2P-shaped plan. 0:
	// none. Mid-size operations want fewer blocks and several windows in
	// flight (the copy-out of one window overlapping the write of the
	// next), large ones more blocks and large windows (DefaultConfig).
	P2PMidMaxBytes int64
	P2PMid         Shape
	// WideLL shapes the wide LL plans (blocks × threads): the same LL
	// plans with more blocks, for messages of 64 KiB to a few MiB, where
	// the narrow LL plans' few blocks cannot keep the link busy and the
	// HB plans' semaphore handshakes dominate (rooted.go). Blocks 0: no
	// wide plans.
	WideLL Shape
	// RootedWideLL, where set, shapes the wide LL Broadcast and Reduce
	// (BroadcastLLWide, ReduceLLWide) in place of WideLL; the split LL
	// plans keep WideLL's shape.
	RootedWideLL Shape
	// ScratchLLMaxBytes is the largest message AllReduce through Launch
	// (the scratch plans, unregistered buffers: the NCCL API) serves with
	// LL: the 1PA tiers of AllReduceTiers, then the WideLL-shaped 1PA up
	// to this bound when it is larger than theirs; the windowed AllReduce
	// beyond.
	ScratchLLMaxBytes int64
	// ScratchLL2PAMaxBytes, where above the scratch path's 1PA bounds, is
	// the largest message the scratch AllReduce serves with the two-phase
	// LL plan (AllReduce2PALL, Config.WideLL's shape) on 3 ranks or more;
	// the windowed AllReduce beyond. 0: none.
	ScratchLL2PAMaxBytes int64
	// LL2Large, where set, shapes a second two-phase LL AllReduce that
	// the scratch AllReduce serves above ScratchLL2PAMaxBytes up to
	// ScratchLL2PALargeMaxBytes: the best shape at 1–4 MB is not the best
	// at 6–8 MB (on 4×H100, 8 MB: 160 × 512 1.13–1.17× NCCL where WideLL's
	// 128 × 512 gave 0.97; docs/bench/2026-11-27i-h100x4). The windowed
	// AllReduce beyond. Blocks 0 or a bound not above ScratchLL2PAMaxBytes:
	// none; the same shape as WideLL extends the first plan's bound.
	LL2Large                  Shape
	ScratchLL2PALargeMaxBytes int64
	// RootedLLMaxBytes is the largest message Broadcast and Reduce serve
	// with LL; RootedWideMinBytes the largest their narrow (LLBlocks) LL
	// plan serves, the WideLL plan taking the rest. RootedHB shapes their
	// windowed plans, which run one group per rank and so may have more
	// blocks than HB's.
	RootedLLMaxBytes, RootedWideMinBytes int64
	// ReduceLLMaxBytes, where set, is Reduce's LL bound in place of
	// RootedLLMaxBytes (LL128 lines moved it apart from Broadcast's:
	// WithLL128).
	ReduceLLMaxBytes int64
	// AllGatherLLMaxBytes, where set, is AllGather's LL bound (largest
	// input segment, bytes) in place of CollLLMaxBytes (LL128 lines moved
	// ReduceScatter's and AllToAll's above it: WithLL128).
	AllGatherLLMaxBytes int64
	RootedHB            Shape
	// RootedSplitMinBytes is the smallest Broadcast or Reduce that takes
	// the split plans from SplitMinRanks ranks (rooted.go); 0: never.
	RootedSplitMinBytes int64
	// BroadcastSplitLLMaxBytes and ReduceSplitLLMaxBytes, where above
	// RootedLLMaxBytes, are the largest Broadcast and Reduce that the split
	// LL plans serve from SplitMinRanks ranks (BroadcastSplitLL,
	// ReduceSplitLL; WideLL's shape), between the LL plans and the
	// windowed ones. 0: none.
	BroadcastSplitLLMaxBytes, ReduceSplitLLMaxBytes int64
	// Port shapes the port-channel plans (port.go): blocks of the groups
	// that reduce (the others have one), threads, window bytes.
	Port Shape
	// PortMinBytes is the smallest segment (count × element size) the
	// port-channel plans serve; 0 leaves them out of selection.
	PortMinBytes int64
	// PortOnly: the links are port-mapped but not memory-mapped (hal/pcie
	// without peer access, networks), so only port-channel plans can run.
	PortOnly bool
	// Nodes is the node of each rank (0, 1, …; nil: one node). With ≥ 2
	// nodes of equal size ≥ 2, PortOnly AllReduce takes the hierarchical
	// plan (AllReduce2PH) for the operators it serves.
	Nodes []int
	// HostWindows: the network's engines send from and receive into host
	// memory without a device copy (hal.HostWindowed; package channels
	// then places the scratch of plans whose peers are all on other
	// nodes in host memory mapped into the device). Port plans whose
	// peers are all on other nodes (Nodes) then stage their puts'
	// sources into scratch slots on SMs (plan.Plan.StageSends), so a
	// small put leaves with no device-to-host copy on the proxy's path.
	HostWindows bool
	// PortLLMaxBytes is the largest segment (count × element size) that
	// the LL port plans serve across nodes where HostWindows is set: every
	// collective in one frame per peer (portll.go; and a release back
	// where data moves one way), or, where nodes hold several ranks,
	// AllGather, AllReduce and ReduceScatter in frames to the counterparts
	// only (hier_ll.go). 0: none (the staged HB port plans serve every
	// size).
	PortLLMaxBytes int64
	// Switch: every link is switch-mapped (hal.CapSwitchMapped) and
	// memory-mapped, so the NVLS plans (nvls.go) can run.
	Switch bool
	// NVLS shapes the NVLS plans: thread blocks, threads per block, unroll
	// and window bytes per chunk.
	NVLS Shape
	// CEMinBytes is the smallest AllGather (output bytes: ranks × segment)
	// that the host-issued copy-engine executor (the root package's ce.go)
	// serves when Algo is "": it takes no SMs from kernels the collective
	// overlaps. 0: only under Algo "ce" (DefaultConfig's value). NewComm
	// takes the backend's hal.CopyEnginePreference (WEFT_CE_MIN_BYTES
	// overrides it), and sets 0 where the links are not all peer-mapped or
	// the device has no usable hal.StreamOps.
	CEMinBytes int64
	// CEMaxBytes is the largest AllGather that executor serves when Algo
	// is "" (0: no bound): the backend's hal.CopyEnginePreference
	// (WEFT_CE_MAX_BYTES overrides it), where its SM plans overtake it.
	CEMaxBytes int64
	// CEAllReduceMinBytes is the smallest AllReduce (message bytes) with
	// registered buffers (the root package's Comm.AllReduce) that the
	// host-issued copy-engine AllReduce (cear.go) serves when Algo is "":
	// copy engines move every byte over the links, straight into the
	// peers' outputs, and CEAllReduce.Blocks SMs reduce. 0: only under
	// Algo "ce" (and only there through the NCCL ABI). NewComm takes the
	// backend's hal.CopyEngineAllReducePreference (1 GiB on 2 NVLink GPUs;
	// WEFT_CE_ALLREDUCE_MIN_BYTES overrides it) and sets 0 where CEMinBytes
	// is.
	CEAllReduceMinBytes int64
	// CEReduceMinBytes is the smallest Reduce (message bytes) that the
	// root package's host-issued copy-engine Reduce (cereduce.go) serves
	// when Algo is "": the non-roots' copy engines push every byte into
	// landing slots on the root, a kernel of CEAllReduce.Blocks blocks
	// reduces there. 0: only under Algo "ce". NewComm takes the backend's
	// hal.CopyEngineReducePreference (WEFT_CE_REDUCE_MIN_BYTES overrides
	// it) and sets 0 where CEMinBytes is.
	CEReduceMinBytes int64
	// CEReduceDirectMinBytes is the smallest Reduce of that executor that,
	// on two ranks out of place, the other rank pushes straight into the
	// root's output instead of the landing slots (0: every size; from the
	// backend's hal.CopyEngineReducePreference, WEFT_CE_REDUCE_DIRECT_MIN_BYTES
	// overrides it).
	CEReduceDirectMinBytes int64
	// CEP2PMinBytes is the smallest point-to-point operation (bytes) that
	// the root package's copy-engine point-to-point path (p2pce.go) moves
	// straight into the receiver's buffer, exported at the call (0: never).
	// NewComm takes the backend's hal.CopyEngineP2PPreference
	// (WEFT_CE_P2P_MIN_BYTES overrides it) and sets 0 where CEMinBytes is.
	CEP2PMinBytes int64
	// CEAllReduceMaxBytes is the largest AllReduce that executor serves
	// when Algo is "" (0: no bound; WEFT_CE_ALLREDUCE_MAX_BYTES).
	CEAllReduceMaxBytes int64
	// WindowLLMaxBytes is the largest collective (AllReduce message bytes;
	// AllGather output, ReduceScatter input) through symmetric memory
	// windows (the root package's window.go) that keeps Launch's LL plan
	// where Launch has one; above it the zero-copy kernel tiers and direct
	// plans take the call. Launch's LL tiers reach 2 MiB on 2 GPUs, but
	// with the buffers mapped a 2 MB AllReduce takes 14.6 µs on the
	// zero-copy 2PA against 20.4 on LL, while at 512 KB LL wins (4.5
	// against 10.2; 2×H100, docs/bench/2026-11-29-h100x2, calls 3–4):
	// 1 MiB by default (WEFT_WINDOW_LL_MAX_BYTES). The root package's
	// Comm.AllReduce applies the same bound to its default tiers: where
	// they would run a 2PA and Launch has an LL plan, Launch's plan serves
	// up to it.
	WindowLLMaxBytes int64
	// CEAllReduce shapes that executor: Blocks × Threads of each window's
	// reduction kernel and Window, the bytes of a window per peer
	// (WEFT_CE_ALLREDUCE_SHAPE, BLOCKSxTHREADSwWINDOW).
	CEAllReduce Shape
	// Algo forces one plan family for the collectives of Plans: "ll",
	// "hb", "port", "nvls", or one with bounded peers: "ring", "tree",
	// "bruck" (WEFT_ALGO); "" selects by size, rank count and links.
	// A collective without a plan of the family keeps its own selection.
	Algo string
	// Budget bounds the thread blocks one launch of a plan holds
	// (BlockBudget: ncclConfig_t.maxCTAs and minCTAs, WEFT_MAX_CTAS);
	// Plans and AllReducePlans fit every plan to it. Zero: none.
	Budget BlockBudget
}

// Algorithm families Config.Algo names.
var Families = []string{"ll", "hb", PortFamily, NVLSFamily, RingFamily, TreeFamily, BruckFamily, CEFamily}

// CEFamily selects the host-issued copy-engine executors (the root
// package's ce.go and cear.go) for AllGather and AllReduce (of Sum, Prod,
// Max and Min) where the device offers hal.StreamOps; the plans of every
// other collective are those of the default selection.
const CEFamily = "ce"

// Shape is the launch shape of a bandwidth-bound plan: thread blocks,
// threads per block, and 16-byte vectors per thread per step (loads in
// flight per source; 0 is the backend's default). Push selects the
// store-only 2PA (AllReduce2PAPush) with windows of Window bytes. Pull,
// in the point-to-point shape (Config.P2P) only, makes the windowed
// point-to-point plan's receivers read each window from the sender's
// scratch instead of the sender writing it into theirs (P2PPlan). Depth,
// in the shapes of the one-hop windowed plans (Config.P2P and
// Config.RootedHB) only, is how many windows a writer may run ahead of
// its reader (plan.Plan.WindowDepth; 0: 2), and Pipeline the fewest
// windows a message of at least one window is cut into
// (plan.Group.Pipeline; 0: plan.PipelineWindows), and PipelineFrom the
// smallest chunk in bytes that Pipeline cuts where that is less than a
// window (plan.Group.PipelineFrom; 0: the window).
type Shape struct {
	Blocks, Threads, Unroll int
	Push                    bool
	Window                  int64
	Pull                    bool
	Depth                   int
	Pipeline                int
	PipelineFrom            int64
}

// pipelined sets the pipeline of windowed groups gs from the shape
// (Shape.pipeline, Shape.PipelineFrom, clipped to each group's window).
func (s Shape) pipelined(gs ...*plan.Group) {
	for _, g := range gs {
		g.Pipeline, g.PipelineFrom = s.pipeline(), min(s.PipelineFrom, g.Window)
	}
}

// pipeline is the shape's Pipeline (plan.PipelineWindows when unset).
func (s Shape) pipeline() int {
	if s.Pipeline == 0 {
		return plan.PipelineWindows
	}
	return s.Pipeline
}

// flowName is what a plan's name says of the shape's window depth and
// pipeline where they are not the defaults ("-d8", "-p1", "-d8-p1",
// "-p4-f512K").
func (s Shape) flowName() string {
	n := ""
	if d := s.depth(); d != 2 {
		n += fmt.Sprintf("-d%d", d)
	}
	if s.Pipeline != 0 {
		n += fmt.Sprintf("-p%d", s.Pipeline)
	}
	if s.PipelineFrom > 0 {
		n += "-f" + FormatSize(s.PipelineFrom)
	}
	return n
}

// depth is the shape's window depth (Shape.Depth, 2 when unset).
func (s Shape) depth() int {
	if s.Depth == 0 {
		return 2
	}
	return s.Depth
}

// WithLL128 returns c with its wide LL plans on LL128 lines
// (Config.WideProto: 120 data bytes in 128 where LL16 carries 8 in 16)
// and, for GPUs (gpu), the LL bounds those lines moved. Only for devices
// that carry LL128 (hal.LL128Carrier: NVLink). Measured on 4×H100 and on
// two of its GPUs through the C ABI beside NCCL (docs/bench/
// 2026-11-27f-h100x4, calls 1–3 and 6, float, two alternations each in
// calls 1–3).
// LL16 → LL128 on the same bounds: 4 ranks AllReduce 512 KB / 1 MB
// 0.85–0.87 / 0.79–0.85× NCCL → 1.22–1.26 / 1.11–1.15, Broadcast 512 KB
// 0.69–0.74 → 0.98–1.06, Reduce 512 KB 0.77–0.84 → 1.09–1.17; 2 ranks
// AllReduce 1 / 2 MB 1.15–1.18 / 1.44–1.48 → 1.50–1.54 / 2.05, Broadcast
// and Reduce 1 MB 1.15–1.26 → 1.63–1.67; 3 ranks AllReduce 1 MB 0.76 →
// 1.17; AllGather / ReduceScatter / AllToAll of 1 MB on 4 ranks 1.31–1.33 /
// 1.18–1.21 / 1.41–1.44 → 1.73–1.76 / 1.63–1.67 / 1.91–1.93.
// The bounds beyond:
//   - 2 ranks: the wide one-phase LL AllReduce to 4 MiB (4 MB 1.23 →
//     1.37), Broadcast and Reduce LL to 4 MiB (2 MB 1.36–1.39 / 1.16–1.17
//     → 1.75–1.79 / 1.78–1.82, 4 MB 1.19 / 1.10 → 1.25 / 1.44), LL
//     segments of AllGather, ReduceScatter and AllToAll to 1 MiB (2 MB
//     1.23–1.26 / 1.07 / 1.10–1.12 → 1.43–1.48 / 1.41 / 1.31–1.32); twice
//     those lost (AllReduce 8 MB 1.02, AllToAll 4 MB 0.99);
//   - from 3 ranks (measured on 4; on 3 once, call 6: AllReduce 2 MB 0.90
//     → 1.34, Broadcast 4 MB 0.94 → 1.32, Reduce 1–2 MB 0.78–0.89 →
//     1.38–1.51): the two-phase LL AllReduce to 2 MiB (2 MB 0.84–0.86 →
//     1.02–1.12; 4 MiB tied the windowed plan), the Reduce LL to 2 MiB
//     (1 / 2 MB 0.63–0.66 / 0.69–0.70 → 1.11–1.17 / 1.02–1.04; Broadcast
//     keeps 512 KiB, its split LL plan is faster there, and the split LL
//     Reduce from 512 KiB lost: 1 MB 0.72–0.74), the split LL Reduce and
//     Broadcast to 8 MiB (Reduce 4 / 8 MB 0.61–0.66 / 0.57 → 0.78–0.83 /
//     0.68; Broadcast 4 / 8 MB 0.88–0.93 / 0.80–0.83 → 1.07–1.11 /
//     0.87–1.00). Their slots hold one chunk each (plan.Plan.SlotChunks):
//     17 MiB of scratch a root at 8 MiB, whatever the ranks;
//   - from 3 ranks to AllPairsMaxRanks (measured on 3 and 4, 2026-11-27g
//     call 4, float, NCCL twice beside): LL segments of ReduceScatter and
//     AllToAll to 2 MiB and of AllGather to 1 MiB (AllGatherLLMaxBytes).
//     4 ranks: ReduceScatter 2 / 4 / 8 MB 1.00 / 1.39 / 1.16 → 1.58 /
//     1.92 / 1.35, AllToAll 2 / 4 / 8 MB 1.15 / 0.92 / 0.89 → 1.79 /
//     1.24 / 1.05, AllGather 2 MB 1.16 → 1.51 (at 8 MB, 2 MiB segments,
//     it lost: 1.22 → 1.09); 3 ranks: AllGather, ReduceScatter and
//     AllToAll of 1 MB 1.35 / 0.98 / 1.20 → 1.69–2.05, ReduceScatter and
//     AllToAll of 3 MB 1.24 / 1.47 → 1.89 / 1.89. Rings past
//     AllPairsMaxRanks keep their bounds (boundedLLMaxBytes).
func (c Config) WithLL128(gpu bool) Config {
	c.WideProto = plan.LL128
	if !gpu {
		return c
	}
	switch {
	case c.NRanks == 2:
		c.ScratchLLMaxBytes = 4 << 20
		c.RootedLLMaxBytes = 4 << 20
		c.CollLLMaxBytes = 1 << 20
	case c.NRanks >= 3:
		c.ScratchLL2PAMaxBytes = 2 << 20
		if c.NRanks <= 4 && c.WideLL.Blocks > 0 {
			// On 3 and 4 ranks, LL128 plans of four times the blocks at
			// half the threads (128 × 512 on an H100, from 32 × 1024), and
			// the two-phase LL AllReduce to 8 and 4 MiB: 4×H100 through the
			// C ABI (docs/bench/2026-11-27h-h100x4, call 2, float, NCCL
			// beside twice). 4 ranks, AllReduce 256 KB – 4 MB 1.56 / 1.22 /
			// 1.06 / 1.01 / 1.05 → 1.83 / 1.56 / 1.44 / 1.63 / 1.42 (8 MB
			// 0.97 against the ring's 0.98), AllGather 512 KB – 4 MB 1.46–
			// 1.91 → 2.09–2.54, ReduceScatter 1.54–2.04 → 1.70–2.36,
			// AllToAll 1.21–1.94 → 1.63–2.27, the split LL Broadcast of 1 /
			// 2 / 4 MB 0.99 / 1.22 / 1.09 → 1.14 / 1.48 / 1.37 and Reduce
			// of 4 MB 0.76 → 0.88; 3 ranks AllReduce 512 KB – 8 MB 1.37 /
			// 1.19 / 1.39 / 1.27 / 1.12 → 1.74 / 1.45 / 1.86 / 1.86 / 1.34.
			// 96 × 512 within ±0.05 of it; 64 × 512 and 132 × 256 lost from
			// 4 MB, 96 × 1024 and 128 × 1024 at 1 MB. The wide LL
			// Broadcast and Reduce (64 KiB to their LL bounds) keep the
			// old shape (RootedWideLL): with 128 × 512 they lost at 128–
			// 256 KB (4 ranks Reduce 1.10 / 1.09 → 1.02 / 0.98, 3 ranks
			// Broadcast 1.69 / 1.59 → 1.43 / 1.44). Not measured past 4
			// ranks, whose per-peer LL groups would hold more blocks.
			c.RootedWideLL = c.WideLL
			c.WideLL = Shape{Blocks: 4 * c.WideLL.Blocks, Threads: max(32, c.WideLL.Threads/2)}
			c.ScratchLL2PAMaxBytes = 4 << 20
			if c.NRanks == 3 {
				c.ScratchLL2PAMaxBytes = 8 << 20
			} else {
				// On 4 ranks a second two-phase LL plan of five times the
				// rooted shape's blocks at half its threads (160 × 512 on
				// an H100) to 8 MiB: 4×H100 through the C ABI
				// (docs/bench/2026-11-27i-h100x4, calls 3–6, float, three
				// runs each), 6 MB 1.26× NCCL (96 × 1024 1.05–1.15, 128 ×
				// 768 1.01–1.06), 8 MB 1.13–1.17 (96 × 1024 1.06–1.11,
				// 192 × 512 1.13–1.20, 128 × 512 0.97, the windowed and
				// ring plans 0.99); 64, 128 and 132 × 1024 0.96–0.99. Not
				// to 16 MiB: 96 × 1024 gave 1.04 there against the ring's
				// 1.06 (2026-11-27h, call 2).
				c.LL2Large = Shape{Blocks: 5 * c.RootedWideLL.Blocks, Threads: c.WideLL.Threads}
				c.ScratchLL2PALargeMaxBytes = 8 << 20
			}
		}
		c.ReduceLLMaxBytes = 2 << 20
		c.ReduceSplitLLMaxBytes = 8 << 20
		c.BroadcastSplitLLMaxBytes = 8 << 20
		if c.NRanks <= AllPairsMaxRanks {
			c.CollLLMaxBytes = 2 << 20
			c.AllGatherLLMaxBytes = 1 << 20
		}
	}
	return c
}

// DefaultConfig returns the configuration for a device with sms
// multiprocessors (GPUs) or cores (hal/host). Thresholds and shapes come
// from the sweeps on 4×H200 in docs/bench/notes.md: up to 16 MB, more loads
// in flight per thread win (64 × 1024 threads, unroll 4: 265 GB/s at 8 MB
// against 227 with unroll 2); beyond, fewer per thread and more blocks win
// (128 × 512, unroll 2: 324 GB/s at 512 MB against 316).
func DefaultConfig(rank, nranks, sms int, gpu bool) Config {
	c := Config{Rank: rank, NRanks: nranks, LL: plan.LL16, LLMaxBytes: 128 << 10, MidMaxBytes: 16 << 20, PortLLMaxBytes: PortLLMaxBytes}
	// The copy-engine AllReduce: 32 blocks of 512 threads reduce each
	// window of 64 MiB per peer (2×H100 2026-11-28, bfloat16 1 GB through
	// the C ABI: 3,340 µs against 3,507 with 32 MiB and 3,956 with 16 MiB;
	// 8 blocks 3,626, 64 blocks 3,426; docs/bench/2026-11-28-h100x2).
	c.CEAllReduce = Shape{Blocks: 32, Threads: 512, Window: 64 << 20}
	c.WindowLLMaxBytes = 1 << 20
	// v2 (2×H200, docs/bench/notes-collectives.md): LL still beat NCCL at
	// 64 KiB segments while the 16-block HB plan lost at 256 KiB; HB and
	// point-to-point plans with 16 and 8 blocks peaked at 230–245 and
	// 184 GB/s, so both get more blocks.
	c.CollLLMaxBytes = 256 << 10
	// Point-to-point groups (two per peer and one more) must all be
	// resident at once: a waiting block holds its SM.
	// p2p v3 (issue 20): up to 64 blocks per group, so that a round with
	// one send and one receive on 2 GPUs runs 44 blocks per direction on
	// 132 SMs instead of 16 (thread copy on H200: 328 GB/s with 16
	// blocks, 359 with 64, 368 with 132; gpu-host-facts.md).
	p2pBlocks := max(1, min(64, sms/(2*nranks-1)))
	if gpu {
		c.LLBlocks, c.Threads = 8, 1024
		c.Mid = Shape{Blocks: min(sms/2, 64), Threads: 1024, Unroll: 4}
		c.Large = Shape{Blocks: min(sms, 128), Threads: 512, Unroll: 2}
		if nranks == 2 {
			// Four 16-byte vectors in flight per thread (2×H100, issue 20,
			// docs/bench/2026-11-26l-h100x2 calls 9 and 11, through the C ABI
			// beside NCCL): 1 GB AllReduce 3,079–3,081 µs against 3,132–3,138
			// in float, 3,003–3,054 against 3,106–3,154 in bfloat16 (NCCL/weft
			// 1.055 for both, where two gave 1.02–1.04 in the same call);
			// 16–256 MB within ±1%. Measured on 2 ranks only, so only there.
			c.Large.Unroll = 4
		}
		// Windows (issue 20, 2×H200 2026-11-26, docs/bench/2026-11-26c-h200x2):
		// at 128–512 MB a window's handshake, not the blocks, held the
		// windowed plans under NCCL. Sendrecv at 512 MB: 263 GB/s with
		// 2 MiB windows, 328 with 4, 336 with 8, 361 with 16 (NCCL 354);
		// Broadcast 330 → 367 (NCCL 361) and Reduce 344 → 366 (NCCL
		// 359) with 16 MiB windows over 128 × 512 threads; AllToAll
		// 274 → 309 (NCCL 289–296) with 8 MiB. Windows grow while a
		// plan's scratch (two halves of one window per peer slot) stays
		// within scratchBudget, never below the earlier 2 and 4 MiB.
		c.HB = Shape{Blocks: max(1, min(32, sms/3)), Threads: 1024, Unroll: 4, Window: peerWindow(nranks, 4<<20, 8<<20)}
		if nranks > 2 {
			// The plans with two groups (a send and a receive group per
			// rank) hold half the SMs each, as 64 × 512 threads: 4×H100
			// through the C ABI (docs/bench/2026-11-27d-h100x2, calls 4
			// and 6, two alternations), AllGather 2–512 MB 1.03–1.08×
			// NCCL → 1.05–1.25×, AllToAll 0.69–1.02 → 0.73–1.19,
			// ReduceScatter 2 MB 0.86 → 0.95–0.97 and 512 MB 0.88–0.90 →
			// 0.95–0.96 (8–32 MB within 0.04 either way). The three-group
			// AllReduceHB lost with it (128–512 MB 0.87–0.90 → 0.79–0.82)
			// and keeps HB. On 2 ranks the 2×H100 tuning stands.
			c.PairHB = Shape{Blocks: max(1, min(64, sms/2)), Threads: 512, Unroll: 4, Window: c.HB.Window}
			if nranks >= 4 {
				// ... with 4 MiB windows from 4 ranks (4×H100, docs/bench/
				// 2026-11-27e-h100x4, call 3, float, two alternations):
				// AllToAll 32 / 128 / 512 MB 0.86–0.89 / 0.92–0.97 /
				// 0.95–1.00× NCCL against 0.71–0.74 / 0.83–0.86 / 0.92–0.95
				// with 8 MiB, AllGather 32 MB 1.13–1.15 against 1.04–1.05
				// (8, 128, 512 MB unchanged); 2 MiB took AllGather 512 MB
				// to 0.98.
				c.PairHB.Window = 4 << 20
				// AllToAll cuts a segment of a window or more into at
				// least 4 windows (AllToAllHB reads PairHB.Pipeline):
				// with 2 MiB windows AllToAll of 32 MB took 0.98–1.01×
				// NCCL against 0.86–0.89 with 4 MiB, where AllGather
				// lost (512 MB 0.98 against 1.09; call 3).
				c.PairHB.Pipeline = plan.PipelineWindows
			}
		}
		if nranks >= 4 {
			// From 8 MiB the windowed rings beat the all-pairs plans of
			// AllReduce (scratch path) and ReduceScatter on 4×H100 through
			// the C ABI (docs/bench/2026-11-27d-h100x2, call 8, float, two
			// alternations): AllReduce 8 / 32 / 128 / 512 MB 0.95 / 0.96–0.97
			// / 0.89–0.92 / 0.89 NCCL against 0.84–0.85 / 0.72–0.77 / 0.87 /
			// 0.89–0.90, ReduceScatter 1.12 / 1.09–1.10 / 1.03–1.04 / 0.99
			// against 0.99–1.00 / 0.71–0.72 / 0.85 / 0.95–0.96; below 2 MB
			// the rings lose (AllReduce 2 MB 0.68–0.69 against 0.85).
			// Measured on 4 ranks; 5–8 take it untested (NCCL's rings
			// serve them too).
			c.RingMinBytes = 8 << 20
			// ... on 64 blocks of 512 threads and 16 MiB windows: 4×H100
			// through the C ABI (docs/bench/2026-11-27e-h100x4, calls 2
			// and 3, float, two alternations each), AllReduce 8 / 32 /
			// 128 / 512 MB 1.004–1.005 / 1.109–1.135 / 1.056–1.057 /
			// 1.008–1.009× NCCL against 0.947–0.954 / 0.976–0.982 /
			// 0.916–0.930 / 0.886–0.905 with the HB shape (32 × 1024,
			// 8 MiB), ReduceScatter 1.17–1.19 / 1.21–1.22 / 1.13–1.14 /
			// 1.11 against 1.12–1.14 / 1.11 / 1.04 / 1.00; 64 × 512 with
			// 8 MiB windows as good up to 128 MB, 0.996–0.997 at 512 MB;
			// 32 × 1024 with 16 MiB 0.92–0.98, 48 × 1024 0.90–1.01.
			// Scratch: 2 halves × 4 slots × 16 MiB.
			c.RingHB = Shape{Blocks: max(1, min(64, sms/2)), Threads: 512, Unroll: 4, Window: 16 << 20}
		}
		if nranks == 3 {
			// Three ranks take the rings from 8 MiB too, with 8 MiB
			// windows: 4×H100 with three GPUs through the C ABI
			// (docs/bench/2026-11-27g-h100x4, call 6, float, NCCL twice
			// beside), AllReduce 24 / 96 / 384 MB 0.86 / 0.97 / 0.97 →
			// 1.18 / 1.07 / 1.03, ReduceScatter 0.94 / 1.03 / 1.10 → 1.28 /
			// 1.19 / 1.15; with 16 MiB windows AllReduce lost from 96 MB
			// (0.94 / 0.90), from 4 MiB it lost at 96–384 MB (0.92 / 0.89).
			// Scratch: 2 halves × 2 slots × 8 MiB.
			c.RingMinBytes = 8 << 20
			c.RingHB = Shape{Blocks: max(1, min(64, sms/2)), Threads: 512, Unroll: 4, Window: 8 << 20}
		}
		// Wide LL and rooted HB (2×H100 2026-11-25, issue 20): 8 LL
		// blocks leave Broadcast and Reduce at 0.72–0.82× NCCL at 128 KB,
		// and 512 KB falls into HB plans whose one window pays the whole
		// semaphore handshake (AllReduce through the API: 22 µs against
		// NCCL's 9.9). LL packets double the bytes on the wire, so the
		// LL bound shrinks with the peers each rank writes to: 2 MiB of
		// AllReduce data per peer (1PA writes every peer), 1 MiB for
		// Broadcast and Reduce (whose HB plan needs no reduction round
		// and already beats NCCL at 2 MB), as powers of two. Thread-copy
		// on H200: 328 GB/s with 16 blocks, 359 with 64, 368 with 132
		// (gpu-host-facts.md), so the wide LL plans take 32 blocks and
		// the rooted HB plans, one group per rank, 64.
		c.WideLL = Shape{Blocks: max(1, min(32, sms/4)), Threads: 1024}
		c.ScratchLLMaxBytes = floorPow2((2 << 20) / int64(max(1, nranks-1)))
		if nranks >= 4 {
			// The two-phase LL AllReduce above the wide 1PA (AllReduce2PALL)
			// up to 1 MiB: 4×H100 through the C ABI (docs/bench/
			// 2026-11-27e-h100x4, call 3, float, two alternations), 1 MB
			// 0.865–0.870× NCCL against 0.685–0.686 windowed; at 2 and
			// 4 MB LL's packets lose (0.71–0.73 and 0.62–0.64 against the
			// windowed plan's 0.85 and 0.95).
			c.ScratchLL2PAMaxBytes = 1 << 20
		}
		c.RootedLLMaxBytes = floorPow2((1 << 20) / int64(max(1, nranks-1)))
		if nranks >= 4 {
			// Twice that from 4 ranks (512 KiB on 4): 4×H100 through the
			// C ABI (docs/bench/2026-11-27e-h100x4, call 4, float, two
			// alternations), Reduce of 512 KB 0.79× NCCL against 0.63–0.64
			// windowed, Broadcast 0.68–0.70 against 0.66–0.68; with 1 MiB
			// the LL plans lost at 1 MB (0.56–0.60 against 0.63–0.72).
			c.RootedLLMaxBytes = floorPow2((2 << 20) / int64(nranks-1))
		}
		c.RootedWideMinBytes = 64 << 10
		// The same for AllGather, ReduceScatter and AllToAll (2×H100
		// 2026-11-26, docs/bench/2026-11-26d-h100x2): 8 LL blocks beat
		// NCCL 1.36–1.67× up to 64 KiB segments but fell to 0.94–1.09×
		// at 256 KiB (512 KB messages on 2 ranks), where Broadcast's
		// 32-block LL reached 1.38×.
		c.CollWideMinBytes = 64 << 10
		// ... and the wide LL plan serves up to 512 KiB segments on 2 ranks
		// (1 MB AllGather: the windowed plan's one window took 0.90–0.97×
		// of NCCL, the wide LL Broadcast of 512 KB 1.38×); 256 KiB beyond,
		// as before (LL packets double what each rank writes to every peer).
		c.CollLLMaxBytes = max(c.CollLLMaxBytes, floorPow2((512<<10)/int64(max(1, nranks-1))))
		c.RootedHB = Shape{Blocks: max(1, min(128, sms)), Threads: 512, Unroll: 4, Window: peerWindow(nranks, 4<<20, 16<<20)}
		if nranks >= 3 && nranks <= 5 {
			// On 3 to 5 ranks (where the split plans serve from 4 MiB, or
			// the split LL plans' bounds): windows of 4 MiB, 4 in flight,
			// no more scratch than 8 MiB × 2 or 16 MiB × 2 (beyond, the
			// budget gives 4 MiB windows already). 4×H100 through the C
			// ABI (docs/bench/2026-11-27g-h100x4, calls 2–6, float, NCCL
			// twice beside): 4 ranks Broadcast 16 MB 0.77 → 0.89–0.96,
			// Reduce 16 MB 0.50–0.57 → 0.69–0.75, 256 MB – 1 GB within
			// ±0.03 of 8 MiB × 2 (Broadcast 0.81–0.84, Reduce 0.80–0.82);
			// 3 ranks Broadcast 24 / 96 / 384 MB 0.81 / 0.89 / 0.86 →
			// 0.94 / 0.90 / 0.88, Reduce 0.57 / 0.77 / 0.86 → 0.73 / 0.82 /
			// 0.87. 2 MiB windows won at 16 MB as well but lost from
			// 256 MB (4 ranks, Reduce 0.62–0.65).
			c.RootedHB.Window, c.RootedHB.Depth = 4<<20, 4
		}
		c.RootedSplitMinBytes = 4 << 20 // rooted.go, SplitMinRanks
		// The split LL Broadcast above the LL bound up to 2 MiB from 3
		// ranks (4×H100 through the C ABI, docs/bench/2026-11-27e-h100x4,
		// call 8, float): 4 ranks 1 / 2 MB 0.84–0.86 / 0.98–1.02× NCCL
		// against the all-pairs windowed plan's 0.71–0.72 / 0.75–0.76, 3
		// ranks 1.09 / 1.12 against 0.85 / 0.98; at 4 MB it lost (0.65
		// against 0.89–0.91). The split LL Reduce lost at every size
		// (4 ranks 1–4 MB 0.47–0.66 against 0.63–0.70): off.
		c.BroadcastSplitLLMaxBytes = 2 << 20
		c.P2P = Shape{Blocks: p2pBlocks, Threads: 1024, Unroll: 4, Window: peerWindow(nranks, 2<<20, 16<<20)}
		// LL point-to-point up to 128 KiB per operation: one 8-byte unit
		// per thread with 16 blocks of 1024 threads, one one-way trip
		// instead of the windowed plan's data and done handshakes.
		c.P2PLLMaxBytes = 128 << 10
		// 2×H200 2026-11-26 (docs/bench/2026-11-26-h100x2/p2p-ll.md):
		// with a 512 KiB LL plan beside it, Gather and Scatter of 512 KB
		// took 5.5 µs against 9.7 windowed (NCCL 7.4), sendrecv of 512 KB
		// 9.5 against 10.5 (NCCL 12.5).
		c.P2PLLWideMaxBytes = 512 << 10
		c.P2PLL = Shape{Blocks: max(1, min(16, sms/(2*nranks-1))), Threads: 1024}
		// One block per group up to 8 KiB (2×H100 2026-11-26, docs/bench/
		// 2026-11-26h-h100x2: the 16-block plan fitted to one block per
		// group took gather and scatter of 8 B–8 KB from 1.05–1.13× NCCL
		// to 1.22–1.30×, sendrecv from 0.96–1.06× to 1.04–1.14×; at 32 KB
		// it was no better). One pass of 1024 threads carries 8 KiB as
		// LL16 packets.
		c.P2PLLSmallMaxBytes = 8 << 10
		// Mid-size operations (2×H100 2026-11-26, docs/bench/2026-11-26i-h100x2,
		// gather/scatter beside NCCL): with the large plan's 44 blocks and
		// one 16 MiB window, an 8 MB operation is written whole and then
		// copied out (gather of 16 MB 0.90× NCCL). 32 blocks with 2 MiB
		// windows, 8 in flight (Shape.Depth: the writer never waits for a
		// release within such an operation) and no forced split below two
		// windows (Pipeline 1): 0.98×, and 0.99–1.13× at 1–8 MB operations
		// where 44 blocks took 0.95–1.08×; from 32 MB the large plan is as
		// good or better. 512 threads per block, not 1024: 1–4% more at
		// 2–32 MB (calls 12–13; 24, 40 and 48 blocks and 256 threads
		// less). Measured on 2 ranks only, so only there.
		if nranks == 2 {
			c.P2PMid = Shape{Blocks: min(32, p2pBlocks), Threads: 512, Unroll: 4, Window: 2 << 20, Depth: 8, Pipeline: 1}
			c.P2PMidMaxBytes = 16 << 20
		}
		// Port plans: few blocks (they push triggers; only reductions use
		// SMs), windows large enough that a copy engine's per-copy cost and
		// the proxy's latency stay small beside the transfer (8 MiB moves
		// in about 22 µs at 370 GB/s).
		c.Port = Shape{Blocks: 4, Threads: 512, Unroll: 4, Window: 8 << 20}
		// NVLS plans: a first choice, not measured (no NVSwitch multicast
		// on the shared hosts): 16 blocks, as NCCL's 16 NVLS channels on
		// H100; 1 MiB windows keep the switch buffer at 2 × n MiB.
		c.NVLS = Shape{Blocks: max(1, min(16, sms/4)), Threads: 1024, Unroll: 4, Window: 1 << 20}
	} else {
		c.LLBlocks, c.Threads = 2, 32
		c.Mid = Shape{Blocks: max(1, min(sms, 4)), Threads: 32}
		c.Large = c.Mid
		// Small windows, so that tests of moderate sizes cross many.
		c.HB = Shape{Blocks: max(1, min(sms, 2)), Threads: 32, Window: 16 << 10}
		// Wide LL on 3 blocks (a partition unlike the narrow plan's) for
		// 16–128 KiB rooted and 128–192 KiB AllReduce messages, so that
		// tests cover narrow LL, wide LL and HB at moderate sizes.
		c.WideLL = Shape{Blocks: 3, Threads: 32}
		c.ScratchLLMaxBytes = 192 << 10
		// The two-phase LL AllReduce from 3 ranks, so that tests cover
		// narrow 1PA, wide 1PA, two-phase LL and HB at moderate sizes.
		c.ScratchLL2PAMaxBytes = 384 << 10
		c.RootedLLMaxBytes, c.RootedWideMinBytes = 128<<10, 16<<10
		c.CollWideMinBytes = 16 << 10
		c.RootedHB = Shape{Blocks: max(1, min(sms, 3)), Threads: 32, Window: 16 << 10}
		// Split plans from 160 KiB, so that tests of moderate sizes cover
		// both windowed forms past two ranks; rings from 2 MiB on 4 ranks
		// and more (ReduceScatter: 512 KiB segments), likewise.
		c.RootedSplitMinBytes = 160 << 10
		// The split LL plans from 128 to 144 KiB, so that tests cover
		// every rooted form at moderate sizes from 3 ranks.
		c.BroadcastSplitLLMaxBytes, c.ReduceSplitLLMaxBytes = 144<<10, 144<<10
		if nranks >= 4 {
			c.RingMinBytes = 2 << 20
		}
		c.P2P = Shape{Blocks: 1, Threads: 32, Window: 16 << 10}
		// LL point-to-point up to 16 KiB, so that tests of moderate sizes
		// mix LL and windowed operations in one group.
		c.P2PLLMaxBytes = 16 << 10
		c.P2PLLWideMaxBytes = 64 << 10
		c.P2PLL = Shape{Blocks: 2, Threads: 32}
		// The one-block plan up to 4 KiB, so that tests mix three LL plans.
		c.P2PLLSmallMaxBytes = 4 << 10
		// A mid-size windowed plan (2 blocks, 4 KiB windows 4 deep) up to
		// 128 KiB, so that tests mix two windowed plans too.
		c.P2PMid = Shape{Blocks: 2, Threads: 32, Window: 4 << 10, Depth: 4, Pipeline: 1}
		c.P2PMidMaxBytes = 128 << 10
		c.Port = Shape{Blocks: max(1, min(sms, 2)), Threads: 32, Window: 16 << 10}
		c.NVLS = Shape{Blocks: max(1, min(sms, 2)), Threads: 32, Window: 16 << 10}
	}
	return c
}

// scratchBudget bounds the scratch of one windowed plan on GPUs for
// peerWindow: two halves of one window for each of the n−1 peer slots.
const scratchBudget = 64 << 20

// peerWindow is the window of a windowed plan on nranks ranks: the largest
// power of two up to hi whose scratch, 2·(nranks−1) windows, fits
// scratchBudget, and at least lo (2 ranks: hi; 8 ranks: 4 MiB).
func peerWindow(nranks int, lo, hi int64) int64 {
	return max(lo, min(hi, floorPow2(scratchBudget/int64(2*max(1, nranks-1)))))
}

// floorPow2 is the largest power of two ≤ v (v ≥ 1), or 0 for v < 1.
func floorPow2(v int64) int64 {
	p := int64(0)
	for b := int64(1); b > 0 && b <= v; b <<= 1 {
		p = b
	}
	return p
}

func (c Config) validate() error {
	if c.NRanks < 1 || c.Rank < 0 || c.Rank >= c.NRanks {
		return fmt.Errorf("algorithms: rank %d of %d", c.Rank, c.NRanks)
	}
	if c.NRanks > PeerPlansMaxRanks {
		return fmt.Errorf("algorithms: %d ranks: a plan with a channel to every peer serves at most %d (plan.MaxPeers channels of a GPU plan, 2 argument slots per peer): %w",
			c.NRanks, PeerPlansMaxRanks, ErrTooManyRanks)
	}
	if len(c.AllReduce) == 0 && (c.Mid.Blocks < 1 || c.Large.Blocks < 1 || c.LLBlocks < 1) {
		return fmt.Errorf("algorithms: %d, %d and %d LL thread blocks: want at least 1 each", c.Mid.Blocks, c.Large.Blocks, c.LLBlocks)
	}
	return nil
}

// validateAllPairs is validate for the all-pairs plans that combine (or
// write) the contributions of all n ranks in one transfer: n ≤
// AllPairsMaxRanks (plan.MaxOperands operands per transfer). Larger
// communicators take the plans with bounded peers (BoundedPlans).
func (c Config) validateAllPairs() error {
	if err := c.validate(); err != nil {
		return err
	}
	if c.NRanks > AllPairsMaxRanks {
		return fmt.Errorf("algorithms: %d ranks: the all-pairs plans combine every rank in one transfer and serve at most %d (plan.MaxOperands−1); larger communicators take the ring, tree and Bruck plans: %w",
			c.NRanks, AllPairsMaxRanks, ErrTooManyRanks)
	}
	return nil
}

// AllPairsMaxRanks is the largest communicator the all-pairs plans that
// combine every rank's contribution in one transfer serve (1PA, 2PA, the
// LL and HB AllGather, ReduceScatter, AllReduce, Broadcast and Reduce):
// plan.MaxOperands − 1. Selection (Plans) takes BoundedPlans beyond it.
const AllPairsMaxRanks = plan.MaxOperands - 1

// PeerPlansMaxRanks is the largest communicator served by the plans with
// one channel per peer whose transfers each name one peer (AllToAll, the
// point-to-point plans, the flat port-channel plans, which combine in
// chained transfers past AllPairsMaxRanks): a GPU plan holds plan.MaxPeers
// channels, and a point-to-point plan's send and receive groups per peer
// take 2(n−1)+1 ≤ plan.MaxGroupArgs argument slots.
const PeerPlansMaxRanks = plan.MaxPeers + 1

// ErrTooManyRanks is wrapped by plan builders given more ranks than their
// structure serves (AllPairsMaxRanks, PeerPlansMaxRanks); selection
// (Plans) avoids them.
var ErrTooManyRanks = errors.New("too many ranks for this plan")

// validShape checks the shape of a windowed plan.
func validShape(name string, s Shape) error {
	if s.Blocks < 1 || s.Threads < 32 || s.Window <= 0 || s.Window%plan.AlignBytes != 0 {
		return fmt.Errorf("algorithms: %s shape %d blocks × %d threads, window %d bytes: want blocks ≥ 1, threads ≥ 32 and a window that is a positive multiple of %d",
			name, s.Blocks, s.Threads, s.Window, plan.AlignBytes)
	}
	if s.Depth != 0 && (s.Depth < 2 || s.Depth > plan.MaxWindowDepth) {
		return fmt.Errorf("algorithms: %s shape: window depth %d: want 2 to %d", name, s.Depth, plan.MaxWindowDepth)
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

// AllReduce1PA builds the one-phase all-pairs LL AllReduce for one rank
// with c.LL packets, c.LLBlocks blocks of c.Threads threads, serving
// messages up to c.LLMaxBytes.
func AllReduce1PA(c Config) (*plan.Plan, error) {
	return allReduce1PA(c, Tier{Algo: Algo1PA, LL: c.LL, Shape: Shape{Blocks: c.LLBlocks, Threads: c.Threads}, MaxBytes: c.LLMaxBytes})
}

func allReduce1PA(c Config, t Tier) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	chs := c.channels()
	p := &plan.Plan{
		Name:         "allreduce-" + t.Name(),
		Rank:         c.Rank,
		NRanks:       c.NRanks,
		Channels:     chs,
		Threads:      t.Threads,
		Scratch:      t.LL,
		ScratchSlots: len(chs),
		MaxBytes:     t.MaxBytes,
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
	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, reduceSrcs...)
	red.Combine = true
	ops = append(ops, red)
	p.Groups = []plan.Group{{Blocks: t.Blocks, Ops: ops}}
	if len(chs) == 0 {
		p.Scratch, p.ScratchSlots = plan.Simple, 0
	}
	return p, p.Validate()
}

// AllReduce2PALL builds the two-phase all-pairs AllReduce through LL
// scratch (unregistered buffers) with launch shape s, for messages up to
// maxBytes: rank r writes chunk p of its input (count cut into n chunks)
// as packets into its slot of peer p (reduce-scatter), combines chunk r of
// its input with the n−1 chunks that land in its slots into chunk r of its
// output and, as packets, into its slot of every peer (all-gather), and
// unpacks the peers' chunks into its output. One group, no semaphores:
// every step starts on the first packets of the one before. A rank writes
// 2(n−1)/n × S bytes of payload where the 1PA writes (n−1) × S, for two
// one-way trips instead of one, so it pays from 4 ranks and mid sizes.
// Each peer's slot holds both of its phases at disjoint offsets (chunk r
// from the reduce-scatter, chunk p from the all-gather), so the scratch is
// the 1PA's: 2 halves × (n−1) slots of maxBytes of packets. The halves
// need no flow control (a rank's launch k+1 ends only after every peer
// has sent its all-gather of launch k+1, so none writes a half before its
// reader finished launch k). In place is safe: each block reads its part
// of input chunk p before it writes the same part of output chunk p.
// Every operator, Avg and PreMulSum included, as the 1PA (the combine
// sees all n contributions at once). Errors: an invalid rank or shape.
func AllReduce2PALL(c Config, s Shape, maxBytes int64) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	if s.Threads == 0 {
		s.Threads = c.Threads
	}
	n, chs := c.NRanks, c.channels()
	k := len(chs)
	in, out := plan.L(plan.Input), plan.L(plan.Output)
	var ops, gathers []plan.Op
	srcs, dsts := []plan.Ref{in}, []plan.Ref{out}
	for _, ci := range c.rotated() {
		// Slot s of a peer receives the peer's chunk (the first phase),
		// slot k+s this rank's reduced one (the second): each slot holds
		// one chunk (plan.Plan.SlotChunks), 2/n of the message in all.
		ch := chs[ci]
		ops = append(ops, plan.Transfer(ch.Peer, n, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, in))
	}
	for ci, ch := range chs {
		srcs, dsts = append(srcs, plan.LS(ci)), append(dsts, plan.RS(ci, k+slotOf(c.Rank, ch.Peer)))
		gathers = append(gathers, plan.Transfer(ch.Peer, n, []plan.Ref{out}, plan.LS(k+ci)))
	}
	red := plan.Transfer(c.Rank, n, dsts, srcs...)
	red.Combine = true
	ops = append(append(ops, red), gathers...)
	return c.llPlanSlots("all_reduce-2pa", s, maxBytes, true, ops, 0, 2*k, n)
}

// AllReduce2PA builds the two-phase all-pairs zero-copy AllReduce with
// launch shape s.
func AllReduce2PA(c Config, s Shape) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	chs := c.channels()
	b := s.Blocks
	threads := s.Threads
	if threads == 0 {
		threads = c.Threads
	}
	p := &plan.Plan{
		Name:       "allreduce-" + Tier{Algo: Algo2PA, Shape: Shape{Blocks: b, Threads: threads, Unroll: s.Unroll}}.Name(),
		Rank:       c.Rank,
		NRanks:     c.NRanks,
		Channels:   chs,
		Threads:    threads,
		Unroll:     s.Unroll,
		Semaphores: 2 * b,
	}
	dsts := []plan.Ref{plan.L(plan.Output)}
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci := range chs {
		dsts = append(dsts, plan.R(ci, plan.Output))
		srcs = append(srcs, plan.R(ci, plan.Input))
	}
	ops := allPairsBarrier(chs, 0)
	red := plan.Transfer(c.Rank, c.NRanks, dsts, srcs...)
	red.Combine = true
	ops = append(ops, red)
	ops = append(ops, allPairsBarrier(chs, b)...)
	p.Groups = []plan.Group{{Blocks: b, Ops: ops}}
	return p, p.Validate()
}

// AllReduce2PAPush builds the store-only two-phase all-pairs AllReduce: no
// NVLink reads. Each chunk is moved in windows of s.Window bytes; in window
// w, rank r pushes window w of its input chunk p into its slot of peer p's
// scratch (reduce-scatter by stores), signals, waits for every peer's push,
// reduces window w of chunk r from its input and the n−1 slots, writes the
// result into chunk r of every rank's output (all-gather by stores), and
// tells each peer its slot is free again. Scratch is two halves of n−1
// window-sized slots, alternating by window, so pushing window w+1 overlaps
// reducing window w; a push into a half waits for the "free" signal of the
// window two before. A closing barrier orders the last all-gather stores
// before the kernel ends. In place is safe: peer q's result lands in chunk
// q of this rank's buffer only after this rank has pushed that window.
//
// Memory: 2·(n−1)·Window bytes of scratch per rank, independent of the
// message size.
func AllReduce2PAPush(c Config, s Shape) (*plan.Plan, error) {
	if err := c.validateAllPairs(); err != nil {
		return nil, err
	}
	if s.Window <= 0 || s.Window%plan.AlignBytes != 0 {
		return nil, fmt.Errorf("algorithms: 2PA push window %d bytes: want a positive multiple of %d", s.Window, plan.AlignBytes)
	}
	chs := c.channels()
	b := s.Blocks
	threads := s.Threads
	if threads == 0 {
		threads = c.Threads
	}
	// Semaphores per block: data, slot free, done.
	semData, semFree, semDone := 0, b, 2*b
	p := &plan.Plan{
		Name:         "allreduce-" + Tier{Algo: Algo2PAPush, Shape: Shape{Blocks: b, Threads: threads, Unroll: s.Unroll, Window: s.Window}}.Name(),
		Rank:         c.Rank,
		NRanks:       c.NRanks,
		Channels:     chs,
		Threads:      threads,
		Unroll:       s.Unroll,
		Semaphores:   3 * b,
		Scratch:      plan.Simple,
		ScratchSlots: len(chs),
	}
	var ops []plan.Op
	for ci := range chs {
		w := plan.Wait(ci, semFree) // the slot half this window uses is free again
		w.SkipFirst = 2
		ops = append(ops, w)
	}
	for _, ci := range c.rotated() {
		ops = append(ops, plan.Transfer(chs[ci].Peer, c.NRanks, []plan.Ref{plan.RS(ci, slotOf(c.Rank, chs[ci].Peer))}, plan.L(plan.Input)))
	}
	for ci := range chs {
		ops = append(ops, plan.Signal(ci, semData))
	}
	for ci := range chs {
		ops = append(ops, plan.Wait(ci, semData))
	}
	dsts := []plan.Ref{plan.L(plan.Output)}
	srcs := []plan.Ref{plan.L(plan.Input)}
	for ci := range chs {
		dsts = append(dsts, plan.R(ci, plan.Output))
		srcs = append(srcs, plan.LS(ci))
	}
	red := plan.Transfer(c.Rank, c.NRanks, dsts, srcs...)
	red.Combine = true
	ops = append(ops, red)
	for ci := range chs {
		f := plan.Signal(ci, semFree)
		f.SkipLast = 2
		ops = append(ops, f)
	}
	var after []plan.Op
	for ci := range chs {
		after = append(after, plan.Signal(ci, semDone))
	}
	for ci := range chs {
		after = append(after, plan.Wait(ci, semDone))
	}
	p.Groups = []plan.Group{{Blocks: b, Ops: ops, Window: s.Window, NChunks: c.NRanks, After: after}}
	return p, p.Validate()
}

// Choice is one plan of a collective with the message sizes it serves.
type Choice struct {
	Plan     *plan.Plan
	MaxBytes int64 // 0: unbounded
	// Staged: the plan reduces in stages (the hierarchical and ring plans,
	// the split Reduce, the plans with bounded peers), so no one transfer
	// combines every contribution: it serves the Avg of an integer type
	// only where it divides at its end (plan.Plan.PostDiv), and a floating
	// Avg as PreMulSum with 1/n (Choice.Runs). PreMulSum it serves: each
	// rank's input is scaled where it is read (plan/premul.go).
	Staged bool
}

// AllReducePlans returns the AllReduce plans of a rank, one per tier of
// c.AllReduceTiers(), smallest messages first, fitted to c.Budget
// (BlockBudget). Errors name a malformed tier list.
func AllReducePlans(c Config) ([]Choice, error) {
	if c.Budget.Set() {
		choices, _, err := FitBlocks(c, AllReduce, 0, true)
		return choices, err
	}
	tiers := c.AllReduceTiers()
	if err := ValidateTiers(tiers); err != nil {
		return nil, err
	}
	var choices []Choice
	for _, t := range tiers {
		var p *plan.Plan
		var err error
		switch t.Algo {
		case Algo1PA:
			p, err = allReduce1PA(c, t)
		case Algo2PAPush:
			p, err = AllReduce2PAPush(c, t.Shape)
		default:
			p, err = AllReduce2PA(c, t.Shape)
		}
		if err != nil {
			return nil, err
		}
		choices = append(choices, Choice{Plan: p, MaxBytes: t.MaxBytes})
	}
	return choices, nil
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
