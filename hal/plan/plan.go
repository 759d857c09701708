// Package plan is weft's plan IR: the contract between algorithms, which
// build plans, and HAL backends, which execute them.
//
// A plan is, for one rank, a list of thread-block groups; each group is a
// straight-line list of operations that every block of the group runs on
// its own part of each operation's element range. Operations are channel
// primitives (signal, wait, flush) and transfers: read one or more sources,
// reduce them element-wise, write the result to one or more destinations.
// Sources and destinations are the local or a peer's input, output or
// scratch buffer; scratch may hold LL packets (see [Protocol]). A transfer
// with one local source and a remote destination is a put, a remote source
// and a local destination a get, several sources a reduce (read-reduce when
// some are remote), a packet destination putPackets, a packet source
// unpackPackets or reduce-from-packets.
//
// A point-to-point group may exchange a posted receive buffer with its
// peer at the start of a launch and then store straight into it
// (zero-copy; posted.go).
//
// A plan may also have a switch buffer, bound to a multicast group of all
// its ranks: transfers read the reduction of every rank's copy through its
// multicast view and store to every copy at once (switch.go).
//
// Plans do not depend on the message size. Every element range is derived
// at run time from the element count by [ChunkRange] and [PartRange], so one
// compiled plan serves every size it is selected for. GPU backends generate
// device source from a plan ([EmitCUDA]) and compile it once per data type
// and operator; hal/host interprets it in Go. Both use the same range,
// scratch-layout, semaphore and control-block definitions from this package.
package plan

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// All as an Op's Chunk means the whole element range.
const All = -1

// Local as a Ref's Chan means this rank's own buffer.
const Local = -1

// AlignBytes is the granularity of chunk and block-part boundaries: every
// boundary is a multiple of 16 bytes from the start of the buffer, so that
// 16-byte vector accesses and both LL packet formats never straddle parts.
const AlignBytes = 16

// HeaderBytes precede the packets of every scratch slot that holds LL
// packets: one packet carrying the sender's element count, checked by the
// receiver so that a count mismatch across ranks is reported, not computed.
const HeaderBytes = 16

// BufferKind names one of the buffers a plan addresses.
type BufferKind uint8

const (
	Input BufferKind = iota
	Output
	Scratch
	// Switch is the plan's switch buffer (switch.go): this rank's copy
	// (Chan Local) or the multicast view of every rank's copy (Chan
	// Multicast).
	Switch
)

func (b BufferKind) String() string {
	switch b {
	case Input:
		return "in"
	case Output:
		return "out"
	case Scratch:
		return "scratch"
	case Switch:
		return "switch"
	case Posted:
		return "posted"
	}
	return fmt.Sprintf("buffer(%d)", uint8(b))
}

// Ref is one operand of a transfer: a buffer of this rank (Chan == Local) or
// of the peer of channel Chan, or the multicast view of the switch buffer
// (Chan == Multicast), at the element range of the operation. For Scratch
// and Switch, Slot selects the slot; slots are laid out as in SlotStride and
// ScratchOffset. By convention, slot i of a rank's scratch receives from the
// peer of its channel i (when i < len(Channels)): executors name that
// channel and peer when a packet wait in the slot times out.
//
// Seg displaces an input or output operand by Seg × count elements (count
// is the launch's, or the group's, element count): the segment of a buffer
// that holds several ranks' data, as the output of AllGather or the input
// of ReduceScatter and AllToAll. It is 0 for scratch and switch operands.
type Ref struct {
	Buf  BufferKind
	Chan int
	Slot int
	Seg  int
}

// L is a local reference to buf.
func L(buf BufferKind) Ref { return Ref{Buf: buf, Chan: Local} }

// R is a reference to the buffer of the peer of channel ch.
func R(ch int, buf BufferKind) Ref { return Ref{Buf: buf, Chan: ch} }

// LS is local scratch slot s.
func LS(s int) Ref { return Ref{Buf: Scratch, Chan: Local, Slot: s} }

// RS is slot s of the scratch of the peer of channel ch.
func RS(ch, s int) Ref { return Ref{Buf: Scratch, Chan: ch, Slot: s} }

// At returns r displaced to segment seg (see Ref.Seg).
func (r Ref) At(seg int) Ref { r.Seg = seg; return r }

func (r Ref) String() string {
	where := "local"
	switch {
	case r.Chan == Multicast:
		where = "multicast"
	case r.Chan != Local:
		where = fmt.Sprintf("ch%d", r.Chan)
	}
	if r.Buf == Scratch || r.Buf == Switch {
		return fmt.Sprintf("%s.%s[%d]", where, r.Buf, r.Slot)
	}
	if r.Seg != 0 {
		return fmt.Sprintf("%s.%s@%d", where, r.Buf, r.Seg)
	}
	return where + "." + r.Buf.String()
}

// Remote reports whether r names a peer's buffer (through a channel; the
// multicast view is not remote in this sense: see IsMulticast).
func (r Ref) Remote() bool { return r.Chan >= 0 }

// OpKind is the kind of an operation.
type OpKind uint8

const (
	// OpSignal adds one to the peer's semaphore Sem+part for this rank,
	// after every earlier write of this block is visible to the peer
	// (release, system scope); it also stores the call's element count
	// beside the semaphore for the receiver to check. Relaxed drops the
	// ordering guarantee.
	OpSignal OpKind = iota + 1
	// OpWait waits until this rank's semaphore Sem+part for the channel's
	// peer has been signalled once more than at the previous wait (acquire).
	// The first wait of a block on a channel in a launch also checks the
	// count the peer stored (later ones skip that dependent load: a
	// mismatch is caught before any data moves). Deadline-bound.
	OpWait
	// OpFlush returns when earlier puts of the channel are complete at the
	// source. For memory channels stores are complete when issued.
	OpFlush
	// OpTransfer: for every element x of the op's range (split among the
	// group's blocks), v = Srcs[0][x] ⊕ Srcs[1][x] ⊕ …, then Dsts[i][x] = v.
	OpTransfer
)

// Op is one operation of a thread-block group.
type Op struct {
	Kind OpKind
	Chan int // OpSignal, OpWait, OpFlush
	// SkipFirst and SkipLast leave the op out of the first and last windows
	// of a windowed group (flow control: "slot free" waits start at window
	// 2, the matching signals stop 2 windows before the end).
	SkipFirst, SkipLast int
	Sem                 int  // OpSignal, OpWait: base semaphore index; block p uses Sem+p
	Relaxed             bool // OpSignal, OpWait
	// Ack marks a wait that only orders (a receiver telling a sender that
	// it has read): it never checks the peer's count. A peer block with
	// nothing to receive in a launch may signal the next launch's ack
	// before this wait runs, overwriting the count word; LL plans check
	// counts in their packet headers instead.
	//
	// On a signal, Ack marks a release: the signal says this rank has
	// read what the peer wrote (a slot "free"), and announces nothing
	// this rank put. On a port channel the engine applies it after the
	// channel's earlier copies (a slot the engine copied out is read
	// before it is released) but need not wait for the channel's earlier
	// puts to land (TriggerAck, hal.AckSignaler: hal/ucx then skips the
	// endpoint flush, a round trip, that a signal after puts costs). On
	// a memory channel it changes nothing.
	Ack bool
	// Credits makes an Ack wait a credit wait that runs that many releases
	// behind, over every block of the peer's group: its k-th run in block
	// p (k = 1, 2, … over the plan's launches; the expected value of
	// Sem+p counts them) passes once the peer has signalled each of
	// Sem+q, for every block q of a group of this group's size, at least
	// k − Credits times; the first Credits runs do not wait at all. A
	// writer that reuses one of two scratch halves (LL plans alternate
	// halves by launch) waits at the start of launch k, with Credits 2,
	// for the readers' release of launch k − 2, which used the same half:
	// the credit is consumed by the next launch that needs it instead of
	// ending this one. Every reader block counts, not only block p,
	// because a block's share of a message depends on the count, which
	// may differ between launches. The expected values advance on the
	// device, so CUDA graph replays stay in step. 0: an ordinary wait.
	Credits int
	// Deferred marks a signal in Group.Before that releases what the
	// group's previous run read: it runs at the start of each run but the
	// group's first (the block's launch number ≥ 1), instead of at the end
	// of the run it releases. A kernel ends only once its stores are
	// complete, so a release stored over a link as a run's last act holds
	// the run's end for the store's round trip; stored at the start of the
	// next run it travels while the block waits for that run's data. The
	// writer's credit wait is unchanged: with Credits 2 its run k passes
	// once the reader has started run k − 1, so (in stream order) finished
	// run k − 2, which used the same scratch half. On memory channels
	// only. On a credit wait, Deferred says that the releases it counts
	// are deferred signals: the peer's last run sends none, so after this
	// rank's last run its expected value is one ahead of what the peer
	// will ever signal (Plan.ReleaseLag).
	Deferred bool
	// Chunk and NChunks select the element range: chunk Chunk of NChunks
	// (ChunkRange), or the whole count when Chunk == All.
	Chunk, NChunks int
	Srcs, Dsts     []Ref // OpTransfer
	// Combine marks the transfer whose sources are the ranks'
	// contributions to a reduction, one each: with Avg every source of a
	// floating type is multiplied by 1/NRanks before the sum, and an
	// integer Avg sum is divided by NRanks. Plans serve Avg only if they
	// combine all contributions in such one transfer. PreMulSum does not
	// use Combine: each rank scales its own input where it is read
	// (premul.go).
	Combine bool
	// PostDiv marks the transfer that produces a rank's final reduced
	// value in a plan that reduces in stages (partial sums of several ranks
	// cross links, so no one transfer sees every contribution): with Avg
	// of an integer type, the sum of its sources is divided by NRanks,
	// truncated toward zero, before it is stored (NCCL's SumPostDiv: sum
	// in the type's width, divide once at the last step). The plan's later
	// steps only copy the divided value. Other operators and types ignore
	// it (the Avg of floating types runs such plans as PreMulSum with
	// AvgScalar on every rank). Not on port transfers or with Combine.
	// Only the ranks that produce a final value carry it (a tree's root, a
	// Reduce's root); Plan.PostDiv declares it for the plan, on every rank.
	PostDiv bool
	// Port makes a transfer a request to the engine of port channel Chan: a
	// put (remote destination) or a copy between local buffers, moved by
	// the engine instead of the block's threads (see port.go).
	Port bool
	// Stage, on a port transfer of this rank's input in a windowed group,
	// is 1 + a slot of local scratch that no peer writes: with PreMulSum
	// the block's threads first store the input window multiplied by the
	// scalar into that slot, and the engine moves the slot instead (an
	// engine moves bytes; it cannot scale); in a plan with StageSends they
	// store it unscaled for every operator. In an LL plan (Plan.Scratch
	// LL16 or LL8), a port put of local input to a peer's scratch slot
	// always has one: the threads write the input as LL packets (and part
	// 0 the slot's header) into that slot, and the engine puts the packet
	// bytes into the same place of the peer's slot, whose reader polls
	// their flags as it does a memory channel's (port.go, "LL puts").
	// Otherwise it is ignored. 0: no staging slot (PreMulSum then cannot
	// run the plan: premul.go).
	Stage int
}

// Signal returns a signal on channel ch, semaphore base sem.
func Signal(ch, sem int) Op { return Op{Kind: OpSignal, Chan: ch, Sem: sem} }

// Wait returns a wait on channel ch, semaphore base sem.
func Wait(ch, sem int) Op { return Op{Kind: OpWait, Chan: ch, Sem: sem} }

// Flush returns a flush of channel ch.
func Flush(ch int) Op { return Op{Kind: OpFlush, Chan: ch} }

// Transfer returns a transfer of chunk c of n (c == All: the whole range).
func Transfer(c, n int, dsts []Ref, srcs ...Ref) Op {
	return Op{Kind: OpTransfer, Chunk: c, NChunks: n, Dsts: dsts, Srcs: srcs}
}

// FirstWaits reports, for each op of ops, whether it is the first wait on
// its channel that runs in every window and is not an Ack: the waits that
// check the peer's count (in a windowed group, in the first window only).
func FirstWaits(ops []Op) []bool {
	seen := map[int]bool{}
	first := make([]bool, len(ops))
	for i, o := range ops {
		if o.Kind == OpWait && o.SkipFirst == 0 && !o.Ack && !seen[o.Chan] {
			seen[o.Chan] = true
			first[i] = true
		}
	}
	return first
}

// OpName is o.Name() for this plan: with plain (HB) scratch, a transfer
// through scratch is a put, copy or reduce, not a packet operation.
func (p *Plan) OpName(o Op) string {
	n := o.Name()
	if p.Scratch == Simple {
		switch n {
		case "putPackets":
			return "put"
		case "unpackPackets":
			return "copy"
		case "reducePackets":
			return "reduce"
		}
	}
	return n
}

// OpString is o.String() with the plan's op name.
func (p *Plan) OpString(o Op) string {
	s := o.String()
	if n := o.Name(); n != p.OpName(o) {
		s = p.OpName(o) + strings.TrimPrefix(s, n)
	}
	return s
}

// Name is the MSCCL++-style name of the op: put, get, copy, reduce,
// readReduce, putPackets, unpackPackets, reducePackets, switchReduce,
// switchStore, switchReduceStore, signal, wait, flush.
// Transfers through scratch are named as packet operations; Plan.OpName
// names them by the plan's scratch protocol.
func (o Op) Name() string {
	switch o.Kind {
	case OpSignal:
		if o.Relaxed {
			return "relaxedSignal"
		}
		return "signal"
	case OpWait:
		if o.Relaxed {
			return "relaxedWait"
		}
		return "wait"
	case OpFlush:
		return "flush"
	case OpTransfer:
	default:
		return "invalid"
	}
	var mcSrc, mcDst bool
	for _, r := range o.Srcs {
		mcSrc = mcSrc || r.IsMulticast()
	}
	for _, r := range o.Dsts {
		mcDst = mcDst || r.IsMulticast()
	}
	switch {
	case mcSrc && mcDst:
		return "switchReduceStore"
	case mcSrc:
		return "switchReduce"
	case mcDst:
		return "switchStore"
	}
	var remoteSrc, packetSrc, remoteDst, packetDst bool
	for _, r := range o.Srcs {
		remoteSrc = remoteSrc || r.Remote()
		packetSrc = packetSrc || r.Buf == Scratch
	}
	for _, r := range o.Dsts {
		remoteDst = remoteDst || r.Remote()
		packetDst = packetDst || r.Buf == Scratch
	}
	switch {
	case len(o.Srcs) > 1 && packetSrc:
		return "reducePackets"
	case len(o.Srcs) > 1 && remoteSrc:
		return "readReduce"
	case len(o.Srcs) > 1:
		return "reduce"
	case packetDst && remoteDst:
		return "putPackets"
	case packetSrc:
		return "unpackPackets"
	case remoteDst:
		return "put"
	case remoteSrc:
		return "get"
	}
	return "copy"
}

func (o Op) String() string {
	switch o.Kind {
	case OpSignal, OpWait:
		if o.Kind == OpSignal && o.Ack {
			return fmt.Sprintf("%s(ch%d, sem %d, release)", o.Name(), o.Chan, o.Sem)
		}
		if o.Credits > 0 {
			return fmt.Sprintf("%s(ch%d, sem %d, %d credits)", o.Name(), o.Chan, o.Sem, o.Credits)
		}
		if o.Deferred {
			return fmt.Sprintf("%s(ch%d, sem %d, of the previous run)", o.Name(), o.Chan, o.Sem)
		}
		return fmt.Sprintf("%s(ch%d, sem %d)", o.Name(), o.Chan, o.Sem)
	case OpFlush:
		return fmt.Sprintf("flush(ch%d)", o.Chan)
	}
	rng := "all"
	if o.Chunk != All {
		rng = fmt.Sprintf("chunk %d/%d", o.Chunk, o.NChunks)
	}
	var d, s []string
	for _, r := range o.Dsts {
		d = append(d, r.String())
	}
	for _, r := range o.Srcs {
		s = append(s, r.String())
	}
	port := ""
	if o.Port {
		port = fmt.Sprintf(" (engine of ch%d)", o.Chan)
	}
	return fmt.Sprintf("%s[%s] %s <- %s%s", o.Name(), rng, strings.Join(d, ","), strings.Join(s, ","), port)
}

// Group is a set of identical thread blocks running the same ops.
//
// A windowed group (Window > 0) runs Ops once per window: every transfer's
// chunk (all of them chunks of NChunks) is cut into windows of Window bytes,
// and window w of a launch moves the w-th window of each chunk. Scratch
// operands then address the window, not the whole chunk (WindowScratchOffset),
// so scratch stays Window-sized whatever the message size. Ops with SkipFirst
// or SkipLast run in only some windows. After runs once, after the last
// window (or after Ops in a group without windows).
//
// Arg selects the group's count and buffers: 0, the launch's (Args.Count,
// Input, Output); k ≥ 1, Args.Groups[k−1], which may also leave the group
// out of a launch (point-to-point plans give every peer and direction a
// group of its own and run those a call needs).
type Group struct {
	Blocks  int // thread blocks in the group, ≥ 1
	Arg     int
	Ops     []Op
	Window  int64 // bytes per chunk per window (the largest; Windows); 0: no windows
	NChunks int   // chunks of a windowed group's transfers
	// Pipeline, in a windowed group, cuts a chunk of at least Window bytes
	// into at least this many equal windows (Windows), so that a receiver
	// copies one window out while the sender writes the next; a smaller
	// chunk stays one window. 0 or 1: only as many windows as Window
	// requires. For groups whose data crosses one hop (point-to-point,
	// Broadcast, Reduce), not for rings, where every window pays its
	// handshake at every step.
	Pipeline int
	// PipelineFrom, when positive (at most Window), is the smallest chunk
	// (bytes) that Pipeline cuts; 0: Window. Two-hop plans (the split
	// Broadcast and Reduce) set it below Window: their second hop can
	// start only once a window has crossed the first, so a chunk smaller
	// than Window sent as one window runs the hops one after the other.
	PipelineFrom int64
	// Before runs once per launch, before the first window (or before Ops
	// in a group without windows), after a posted-buffer exchange. It
	// holds credit waits only (Op.Credits, Ack): a writer that reuses its
	// peers' slots from one launch to the next waits there for the
	// readers' release of the previous launch ("done", signalled in the
	// readers' After), so the release is consumed by the launch that needs
	// it instead of ending the one before (port plans, algorithms/port.go).
	// A group left out of a launch (Arg) runs neither Before nor After,
	// so the counts stay in step with the readers' After.
	Before []Op
	After  []Op
	// Span, in a group without windows, fixes each block's part of every
	// transfer whatever the count: the parts split Span bytes (the plan's
	// MaxBytes), not the count (SpanRange). A block then owns the same
	// scratch packets in every launch, so a writer block never overwrites
	// packets another reader block has not read yet, even when
	// consecutive launches have different counts and the writer waited
	// only for its matching reader block. Its transfers move the
	// whole range (Chunk All). 0: parts split the count (PartRange).
	Span int64
	// Post, when not nil, makes the group exchange a posted receive
	// buffer with its peer at the start of each launch (zero-copy
	// point-to-point, posted.go); nil: no exchange.
	Post *Post
	// Rolling, in a windowed group, continues its windows from launch to
	// launch: window w of a launch is window B+w of the plan's life and
	// uses scratch position (B+w) mod D (D: the plan's Depth, two halves
	// unless WindowDepth says more, a power of two), where B is the number
	// of windows the group ran in earlier launches, read at the launch's
	// start from the expected value of the group's wait on channel
	// RollChan, semaphore RollSem (+ the block's part), which Ops run once
	// in every window (Validate checks). A writer then takes each
	// position's release as a credit (Op.Credits D) in the window that
	// reuses it, and its reader releases every window: the slots of
	// consecutive launches alternate, so no launch waits for the previous
	// one's last release (a round trip through both proxies on every small message of a port
	// plan; NCCL's connections likewise keep their step counters from one
	// operation to the next). A writer and its reader agree on B because
	// they run the same windows (the same count) in every launch.
	Rolling           bool
	RollChan, RollSem int
}

// validateRolling checks a Rolling group: windowed, and among its Ops one
// wait on (RollChan, RollSem) that runs in every window; "" when it holds
// or the group is not Rolling.
func (g *Group) validateRolling() string {
	if !g.Rolling {
		return ""
	}
	if g.Window == 0 {
		return "a rolling group has windows"
	}
	for _, o := range g.Ops {
		if o.Kind == OpWait && o.Chan == g.RollChan && o.Sem == g.RollSem && o.SkipFirst == 0 && o.SkipLast == 0 {
			return ""
		}
	}
	return fmt.Sprintf("a rolling group counts its windows by a wait on channel %d, semaphore %d that runs in every window; its ops have none", g.RollChan, g.RollSem)
}

// MaxPipeline bounds Group.Pipeline. PipelineWindows is the pipeline of
// the point-to-point, Broadcast and Reduce plans (algorithms): a chunk sent
// as one window pays its copy-out after the whole transfer (2×H200, Gather
// of 16 MB from the peer in one 16 MiB window: 62.6 µs, NCCL 55.8).
const (
	MaxPipeline     = 16
	PipelineWindows = 4
)

// Windows is the number of windows of a windowed group for count elements
// of esize bytes: enough windows of Window bytes to cover the largest
// chunk, at least one; and, for a chunk of at least Window bytes (or
// PipelineFrom where set), at least Pipeline. 1 for a group without
// windows.
//
// Why only from one Window (2×H200, docs/bench/2026-11-26c-h200x2, 16 MiB
// windows): cutting chunks from Window/8 up into four windows took Gather
// of 32 MB (16 MiB from the peer, four 4 MiB windows) from 0.89 to 0.96×
// NCCL, but Gather of 8 MB (two 2 MiB windows) fell from 0.91 to 0.86×
// and Reduce of 8 MB (four 2 MiB windows) from 1.03 to 0.95×: below a
// window the handshakes cost more than the overlap saves.
func (g *Group) Windows(count int64, esize int) int64 {
	if g.Window <= 0 {
		return 1
	}
	_, per := ChunkRange(count, esize, 0, g.NChunks)
	we := g.Window / int64(esize)
	n := max(1, ceilDiv(per, we))
	from := we
	if g.PipelineFrom > 0 {
		from = g.PipelineFrom / int64(esize)
	}
	if per >= from {
		n = max(n, int64(g.Pipeline))
	}
	return n
}

// WindowElems is the length in elements of every window of a windowed group
// for count elements of esize bytes: the largest chunk cut into Windows
// equal windows (aligned, at most Window bytes), so that every window,
// the last included, spreads over all of the group's blocks. A chunk
// smaller than Window is one window of its own length, not a sliver of
// the nominal window that a few blocks would carry (2×H200: 2 MB
// sendrecv through a 16 MiB window took 5 of 44 blocks, 0.8× NCCL). Every
// rank of a call computes the same length from the same count.
func (g *Group) WindowElems(count int64, esize int) int64 {
	_, per := ChunkRange(count, esize, 0, g.NChunks)
	align := AlignElems(esize)
	return max(align, roundUp(ceilDiv(per, g.Windows(count, esize)), align))
}

// WindowPart is block part's share of window w of chunk range [off,
// off+length) of a count-element call: the window (WindowElems) is split
// among nparts blocks, then the share is clipped to the range. Splitting
// the whole window, not the clipped one, gives every block the same scratch
// region in every window of the call, the last and partial one included,
// which the slot-free flow control relies on (each block waits only for its
// own region to be released).
func (g *Group) WindowPart(count, off, length int64, esize int, w int64, part, nparts int) (start, o, l int64) {
	return WindowShare(g.WindowElems(count, esize), off, length, esize, w, part, nparts)
}

// WindowShare is WindowPart with the window length we (WindowElems)
// computed by the caller once per call, as the kernels compute it once per
// group before their window loop.
func WindowShare(we, off, length int64, esize int, w int64, part, nparts int) (start, o, l int64) {
	start = off + w*we
	po, pl := split(we, AlignElems(esize), part, nparts)
	o = min(start+po, off+length)
	return start, o, max(0, min(start+po+pl, off+length)-o)
}

// Runs reports whether op o runs in window w of nwin.
func (o Op) Runs(w, nwin int64) bool {
	return w >= int64(o.SkipFirst) && w < nwin-int64(o.SkipLast)
}

// Channel is one channel of the plan: a connection to a peer rank, over the
// memory-mapped capability (a MemoryChannel) or, with Port, over the
// port-mapped one (a PortChannel; see port.go).
type Channel struct {
	Peer int
	Port bool
	// Net, on a port channel, carries it over the communicator's network
	// even to a peer on this rank's node (package channels routes a
	// port channel through the network when its peer is on another node,
	// or when Net is set). Plans across nodes whose windows are host
	// memory set it on every channel, so that no copy engine of the
	// device moves a byte a kernel waits for (docs/network.md, "Streams
	// and the network path").
	Net bool
}

// Plan is the program one rank runs for one collective call.
type Plan struct {
	Name     string // "allreduce-1pa-ll16"
	Rank     int
	NRanks   int
	Channels []Channel
	Groups   []Group
	// Threads is the number of threads per block on GPU backends.
	Threads int
	// Unroll is how many 16-byte vectors each thread moves per step in
	// plain transfers on GPU backends (loads in flight per source); 0
	// means 4.
	Unroll int
	// Semaphores is the number of semaphore indices per peer the plan uses.
	Semaphores int
	// Scratch is the format of data in scratch slots; ScratchSlots how many
	// slots a rank's scratch has (see SlotStride).
	Scratch      Protocol
	ScratchSlots int
	// SwitchSlots is the number of slots of the plan's switch buffer (per
	// half, for a windowed plan); 0: no switch buffer (switch.go).
	SwitchSlots int
	// MaxBytes is the largest message (count × element size) the plan
	// accepts; 0 means unbounded. Plans whose scratch grows with the count
	// bound it so that scratch stays within the memory budget.
	MaxBytes int64
	// PostDiv declares, on every rank (the same value on all), that each
	// rank's final reduced value is produced by a transfer marked
	// Op.PostDiv on the rank that produces it: the plan reduces in stages
	// and still serves the Avg of integer types (divided once, there).
	PostDiv bool
	// StageSends makes every port transfer with a staging slot (Op.Stage)
	// go through it whatever the operator: the block's threads copy the
	// input window into the slot and the engine moves the slot. Plans
	// whose scratch is host memory that the engines send from directly
	// (a network's host windows, algorithms.Config.HostWindows) set it,
	// so that a small put leaves with no device-to-host copy on the
	// proxy's path.
	StageSends bool
	// WindowDepth, in a windowed plan, is how many windows each scratch
	// slot holds: window w of a group uses position w mod WindowDepth
	// (WindowScratchOffset), so a writer may run up to WindowDepth windows
	// ahead of its reader (its waits for the reader's release skip the
	// first WindowDepth windows, the reader's releases the last
	// WindowDepth). 0 means 2, the two halves every windowed plan had
	// before: enough where each window carries hundreds of KiB per block,
	// too few where a message is cut into many small windows and each
	// writer waits for the release of the window two back, a round trip
	// over the link per window. NCCL's SIMPLE protocol keeps NCCL_STEPS = 8
	// steps in flight per connection (src/include/device.h). 2 to
	// MaxWindowDepth; more than 2 only in plans without a switch buffer
	// (it alternates two halves), and a power of two in plans with
	// Rolling groups (their tags carry the position: RollBits). In an LL plan (no
	// windows) it is the number of scratch parts launches take in turn
	// (launch k: part k mod WindowDepth; layout.go), so a writer whose
	// credit waits run WindowDepth releases behind (Op.Credits) may run
	// that many launches ahead of its reader: the LL port plans of the
	// collectives that move data one way over a network, whose releases
	// take a round trip through both proxies (algorithms/portll.go).
	WindowDepth int
	// SlotChunks, where above 0, says that each scratch slot of this LL
	// plan holds one of SlotChunks chunks of the message: a scratch
	// operand's element counts from the start of its transfer's chunk
	// (Op.Chunk of Op.NChunks, which must be SlotChunks), and a slot is
	// sized for one chunk (SlotBytes). 0: a slot is indexed by the
	// element's offset in the whole message, so a plan whose slots each
	// receive one chunk of n holds n times the scratch it needs (the
	// two-phase LL AllReduce, the split LL plans).
	SlotChunks int
	// NetSlot, when above 0, splits the plan's windows in two by who
	// writes them: slots NetSlot … ScratchSlots−1 of this rank, and the
	// semaphores of its port channels (those its peers' engines signal),
	// lie in a second pair of regions (Bindings.NetScratch,
	// NetSemaphores: the semaphores laid out as the first region's, the
	// scratch holding only the network slots, each part at the scratch's
	// stride: NetScratchBytes, regionSlot) where a network's receivers
	// store with the CPU when its windows are host memory; slots below
	// NetSlot, and the memory channels' semaphores,
	// stay in device memory that the node's peers map. A put on a port
	// channel writes a slot at or above NetSlot of its peer, a memory
	// channel's write one below it (Validate). The hierarchical plans
	// across nodes set it (algorithms/hier.go): their port channels reach
	// other nodes, their memory channels the node's own peers.
	NetSlot int
}

// validateNetSlot checks an operand of a plan whose windows are split
// (Plan.NetSlot): a peer's slot written through a port channel lies in
// its network windows, one written through a memory channel in its
// device windows (each side addresses the other's slots in the region
// its writers reach).
func (p *Plan) validateNetSlot(r Ref) string {
	if p.NetSlot == 0 || r.Buf != Scratch || !r.Remote() {
		return ""
	}
	port := p.Channels[r.Chan].Port
	switch {
	case port && r.Slot < p.NetSlot:
		return fmt.Sprintf("operand %s: a port channel writes a network slot (%d or above)", r, p.NetSlot)
	case !port && r.Slot >= p.NetSlot:
		return fmt.Sprintf("operand %s: a memory channel writes a device slot (below %d)", r, p.NetSlot)
	}
	return ""
}

// NetChannels is the mask of channels whose inbound semaphores lie in the
// network region (Plan.NetSlot: the port channels of a split plan; bit i
// for channel i), 0 for other plans.
func (p *Plan) NetChannels() uint64 {
	var m uint64
	if p.NetSlot > 0 {
		for i, c := range p.Channels {
			if c.Port {
				m |= 1 << i
			}
		}
	}
	return m
}

// NetScratchSlot reports whether local slot s lies in the network region
// (Plan.NetSlot).
func (p *Plan) NetScratchSlot(s int) bool { return p.NetSlot > 0 && s >= p.NetSlot }

// validateSlotChunks checks Plan.SlotChunks: only in an LL plan without
// windows or spans, and every transfer that touches scratch is one of
// its SlotChunks chunks (no port transfer: its packet span counts from
// the message's start).
func (p *Plan) validateSlotChunks() string {
	k := p.SlotChunks
	switch {
	case k == 0:
		return ""
	case k < 0:
		return fmt.Sprintf("%d slot chunks", k)
	case p.Scratch == Simple:
		return "slot chunks in a plan without LL packets"
	}
	// A slot holds one chunk per launch: two chunks written into (or read
	// from) one slot would land on the same elements.
	type slot struct{ ch, s int }
	chunk := map[slot]int{}
	for gi, g := range p.Groups {
		if g.Window > 0 || g.Span > 0 {
			return fmt.Sprintf("group %d: slot chunks with windows or a span", gi)
		}
		bad := ""
		g.eachOp(func(o *Op) {
			if bad != "" || o.Kind != OpTransfer {
				return
			}
			for _, r := range append(append([]Ref{}, o.Srcs...), o.Dsts...) {
				if r.Buf != Scratch || bad != "" {
					continue
				}
				switch c, ok := chunk[slot{r.Chan, r.Slot}]; {
				case o.Port:
					bad = fmt.Sprintf("group %d: a port transfer in a plan with slot chunks", gi)
				case o.NChunks != k || o.Chunk < 0 || o.Chunk >= k:
					bad = fmt.Sprintf("group %d: a transfer of scratch over chunk %d of %d, want one of the plan's %d slot chunks", gi, o.Chunk, o.NChunks, k)
				case ok && c != o.Chunk:
					bad = fmt.Sprintf("group %d: slot %d of %s holds chunks %d and %d (slot chunks: one chunk per slot)", gi, r.Slot, chanName(r.Chan), c, o.Chunk)
				}
				chunk[slot{r.Chan, r.Slot}] = o.Chunk
			}
		})
		if bad != "" {
			return bad
		}
	}
	return ""
}

// SlotChannel is the channel whose peer writes local scratch slot s, by
// the plan builders' convention (slot i receives from channel i's peer,
// and where a plan has a second slot per peer, ScratchSlots = 2 ×
// channels, slot n+i from channel i too: the two-phase LL AllReduce's
// second phase), so that a packet or header wait that fails names the
// peer; −1 when s is none of those.
func (p *Plan) SlotChannel(s int) int {
	n := len(p.Channels)
	switch {
	case s >= 0 && s < n:
		return s
	case n > 0 && p.ScratchSlots == 2*n && s >= n && s < 2*n:
		return s - n
	}
	return -1
}

// chanName names a Ref's channel: "channel N", or "this rank" (Local).
func chanName(ch int) string {
	if ch == Local {
		return "this rank"
	}
	return fmt.Sprintf("channel %d", ch)
}

// MaxWindowDepth bounds Plan.WindowDepth.
const MaxWindowDepth = 16

// Depth is the number of windows a windowed plan's scratch slot holds
// (Plan.WindowDepth, 2 when unset).
func (p *Plan) Depth() int64 {
	if p.WindowDepth == 0 {
		return 2
	}
	return int64(p.WindowDepth)
}

// RollBits is log2 of Depth: a rolling group's tags (Group.Rolling) are
// count << RollBits | the window's scratch position.
func (p *Plan) RollBits() int { return bits.TrailingZeros64(uint64(p.Depth())) }

// Staged reports whether port transfer o moves its staging slot instead of
// its source (Op.Stage) under operator op: with PreMulSum for this rank's
// input, and always in a plan with StageSends.
func (p *Plan) Staged(o Op, op RedOp) bool {
	return o.Stage != 0 && (p.StageSends || ScalesSource(op, o.Srcs[0]))
}

// Blocks returns the total number of thread blocks.
func (p *Plan) Blocks() int {
	n := 0
	for _, g := range p.Groups {
		n += g.Blocks
	}
	return n
}

// String dumps the plan, one op per line.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s rank %d/%d, %d channels, %d blocks × %d threads, scratch %d×%s",
		p.Name, p.Rank, p.NRanks, len(p.Channels), p.Blocks(), p.Threads, p.ScratchSlots, p.Scratch)
	if p.SwitchSlots > 0 {
		fmt.Fprintf(&b, ", switch %d slots", p.SwitchSlots)
	}
	b.WriteString("\n")
	for gi, g := range p.Groups {
		fmt.Fprintf(&b, " group %d (%d blocks)", gi, g.Blocks)
		if g.Window > 0 {
			fmt.Fprintf(&b, ", per window of %d bytes of each of %d chunks", g.Window, g.NChunks)
		}
		b.WriteString("\n")
		for _, o := range g.Before {
			fmt.Fprintf(&b, "  before: %s\n", p.OpString(o))
		}
		for _, o := range g.Ops {
			fmt.Fprintf(&b, "  %s", p.OpString(o))
			if o.SkipFirst > 0 || o.SkipLast > 0 {
				fmt.Fprintf(&b, " (skip first %d, last %d windows)", o.SkipFirst, o.SkipLast)
			}
			b.WriteString("\n")
		}
		for _, o := range g.After {
			fmt.Fprintf(&b, "  after: %s\n", p.OpString(o))
		}
	}
	return b.String()
}

// ErrInvalidPlan is wrapped by Validate's errors.
var ErrInvalidPlan = errors.New("invalid plan")

// Validate checks the plan's internal consistency.
func (p *Plan) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("plan %s: %s: %w", p.Name, fmt.Sprintf(f, a...), ErrInvalidPlan)
	}
	if p.NRanks < 1 || p.Rank < 0 || p.Rank >= p.NRanks {
		return bad("rank %d of %d", p.Rank, p.NRanks)
	}
	if p.Unroll < 0 || p.Unroll > 16 {
		return bad("unroll %d (want 0 to 16)", p.Unroll)
	}
	if p.Threads <= 0 || p.Threads > 1024 || p.Threads%32 != 0 {
		return bad("threads per block %d (want a multiple of 32 up to 1024)", p.Threads)
	}
	for i, c := range p.Channels {
		if c.Peer < 0 || c.Peer >= p.NRanks || c.Peer == p.Rank {
			return bad("channel %d has peer %d", i, c.Peer)
		}
		if c.Net && !c.Port {
			return bad("channel %d to rank %d: Net is a port channel's (a network carries requests, not loads and stores)", i, c.Peer)
		}
		if p.NetSlot > 0 && c.Port && !c.Net {
			return bad("channel %d to rank %d: a port channel of a plan with split windows (network slots from %d) goes over the network (Net)", i, c.Peer, p.NetSlot)
		}
	}
	if p.NetSlot < 0 || p.NetSlot > p.ScratchSlots || (p.NetSlot > 0 && p.NetSlot == p.ScratchSlots) {
		return bad("network slots from %d of %d scratch slots (want 0, or below the slot count)", p.NetSlot, p.ScratchSlots)
	}
	if p.NetSlot > 0 && len(p.Channels) > 64 {
		return bad("split windows (network slots from %d) with %d channels: at most 64", p.NetSlot, len(p.Channels))
	}
	if p.Scratch > LL128 {
		return bad("scratch protocol %d", p.Scratch)
	}
	if p.Scratch == LL128 {
		for gi, g := range p.Groups {
			if g.Window > 0 || g.Span > 0 {
				return bad("group %d: LL128 lines are cut from whole chunks (no windows or spans)", gi)
			}
		}
	}
	if p.SwitchSlots < 0 || p.SwitchSlots > MaxOperands {
		return bad("%d switch slots (want 0 to %d)", p.SwitchSlots, MaxOperands)
	}
	if p.SwitchSlots > 0 && !p.Windowed() && p.MaxBytes <= 0 {
		return bad("a switch buffer needs windowed groups or a bounded message size (MaxBytes)")
	}
	if len(p.Groups) == 0 {
		return bad("no thread-block groups")
	}
	if p.WindowDepth != 0 {
		if p.WindowDepth < 2 || p.WindowDepth > MaxWindowDepth || !(p.Windowed() || p.Scratch != Simple) {
			return bad("window depth %d (want 2 to %d, in a windowed or LL plan)", p.WindowDepth, MaxWindowDepth)
		}
		if p.WindowDepth > 2 && p.SwitchSlots > 0 {
			return bad("window depth %d with a switch buffer (its windows alternate two halves)", p.WindowDepth)
		}
		for gi, g := range p.Groups {
			if g.Rolling && p.WindowDepth&(p.WindowDepth-1) != 0 {
				return bad("group %d: window depth %d in a rolling group (a power of two: its tags carry the window's position in their low bits)", gi, p.WindowDepth)
			}
		}
	}
	if err := p.validateSlotChunks(); err != "" {
		return bad("%s", err)
	}
	chanOK := func(ch int) bool { return ch >= 0 && ch < len(p.Channels) }
	for gi, g := range p.Groups {
		if g.Blocks < 1 {
			return bad("group %d has %d blocks", gi, g.Blocks)
		}
		if g.Arg < 0 || g.Arg > MaxGroupArgs {
			return bad("group %d: argument slot %d (want 0 to %d)", gi, g.Arg, MaxGroupArgs)
		}
		if g.Window < 0 || (g.Window > 0 && (g.Window%AlignBytes != 0 || g.NChunks < 1)) {
			return bad("group %d: window %d bytes over %d chunks (want a multiple of %d bytes and chunks ≥ 1)", gi, g.Window, g.NChunks, AlignBytes)
		}
		if g.Pipeline < 0 || g.Pipeline > MaxPipeline || (g.Pipeline > 1 && g.Window == 0) {
			return bad("group %d: pipeline of %d windows (want 0 to %d, and windows)", gi, g.Pipeline, MaxPipeline)
		}
		if g.PipelineFrom < 0 || g.PipelineFrom > g.Window || (g.PipelineFrom > 0 && g.Pipeline < 2) {
			return bad("group %d: pipeline from %d bytes (want 0, or at most the window of %d bytes with a pipeline of 2 or more)", gi, g.PipelineFrom, g.Window)
		}
		if g.Span < 0 || (g.Span > 0 && g.Window > 0) {
			return bad("group %d: span %d bytes (want 0, or a positive span in a group without windows)", gi, g.Span)
		}
		if g.Span > 0 {
			for oi, o := range append(append([]Op{}, g.Ops...), g.After...) {
				if o.Kind == OpTransfer && o.Chunk != All {
					return bad("group %d op %d: a group with a span moves whole ranges (chunk all)", gi, oi)
				}
			}
		}
		if g.Window > 0 && p.Scratch != Simple {
			return bad("group %d: windowed groups use plain (HB) scratch", gi)
		}
		if msg := p.validatePost(&g); msg != "" {
			return bad("group %d: %s", gi, msg)
		}
		if msg := g.validateRolling(); msg != "" {
			return bad("group %d: %s", gi, msg)
		}
		for oi, o := range g.Before {
			credit := o.Kind == OpWait && o.Ack && o.Credits > 0
			release := o.Kind == OpSignal && o.Deferred
			if !credit && !release || o.SkipFirst != 0 || o.SkipLast != 0 {
				return bad("group %d before-op %d (%s): Before holds credit waits (Ack, Credits > 0) and deferred signals only", gi, oi, p.OpString(o))
			}
			if !chanOK(o.Chan) {
				return bad("group %d before-op %d: channel %d", gi, oi, o.Chan)
			}
			if o.Deferred && p.Channels[o.Chan].Port {
				return bad("group %d before-op %d (%s): deferred releases on port channel %d (memory channels only)", gi, oi, p.OpString(o), o.Chan)
			}
			if o.Sem < 0 || o.Sem+g.Blocks > p.Semaphores {
				return bad("group %d before-op %d (%s): semaphores %d..%d beyond %d", gi, oi, p.OpString(o), o.Sem, o.Sem+g.Blocks-1, p.Semaphores)
			}
		}
		all := append(append([]Op{}, g.Ops...), g.After...)
		for oi, o := range all {
			if o.SkipFirst < 0 || o.SkipLast < 0 || ((o.SkipFirst > 0 || o.SkipLast > 0) && (g.Window == 0 || oi >= len(g.Ops))) {
				return bad("group %d op %d: SkipFirst/SkipLast apply to the ops of a windowed group only", gi, oi)
			}
			if g.Window > 0 && oi < len(g.Ops) && o.Kind == OpTransfer && (o.Chunk == All || o.NChunks != g.NChunks) {
				return bad("group %d op %d: the transfers of a windowed group move chunks of %d", gi, oi, g.NChunks)
			}
			if p.Windowed() && (g.Window == 0 || oi >= len(g.Ops)) && o.Kind == OpTransfer && touchesSwitch(o) {
				return bad("group %d op %d: in a windowed plan, the switch buffer is addressed by the ops of windowed groups only", gi, oi)
			}
		}
		for oi, o := range all {
			where := fmt.Sprintf("group %d op %d (%s)", gi, oi, o.Name())
			if o.Credits != 0 && (o.Credits < 0 || o.Credits > MaxCredits || o.Kind != OpWait || !o.Ack) {
				return bad("%s: %d credits (want 0 to %d, and only on an Ack wait)", where, o.Credits, MaxCredits)
			}
			if o.Deferred && o.Kind == OpSignal {
				return bad("%s: a deferred signal runs at the start of a run (Group.Before), not among its ops", where)
			}
			if o.Deferred && (o.Kind != OpWait || o.Credits == 0 || !chanOK(o.Chan) || p.Channels[o.Chan].Port) {
				return bad("%s: Deferred on a wait marks a credit wait (Credits > 0) on a memory channel", where)
			}
			switch o.Kind {
			case OpSignal, OpWait:
				if !chanOK(o.Chan) {
					return bad("%s: channel %d", where, o.Chan)
				}
				if o.Sem < 0 || o.Sem+g.Blocks > p.Semaphores {
					return bad("%s: semaphores %d..%d beyond %d", where, o.Sem, o.Sem+g.Blocks-1, p.Semaphores)
				}
			case OpFlush:
				if !chanOK(o.Chan) {
					return bad("%s: channel %d", where, o.Chan)
				}
			case OpTransfer:
				inWindow := g.Window > 0 && oi < len(g.Ops)
				if o.Stage != 0 && (!o.Port || len(o.Srcs) != 1 || !(inWindow || p.Scratch != Simple) || o.Srcs[0] != L(Input).At(o.Srcs[0].Seg) || o.Stage-1 >= p.ScratchSlots || o.Stage < 0) {
					return bad("%s: a staging slot (Stage %d) belongs to a port transfer of local input in a windowed group or an LL plan, and names a slot of the %d", where, o.Stage, p.ScratchSlots)
				}
				if msg := p.validatePort(o); msg != "" {
					return bad("%s: %s", where, msg)
				}
				if o.PostDiv && o.Combine {
					return bad("%s: PostDiv and Combine: a Combine transfer divides (or scales) already", where)
				}
				if msg := p.validateSwitch(o); msg != "" {
					return bad("%s: %s", where, msg)
				}
				if o.Chunk != All && (o.NChunks < 1 || o.Chunk < 0 || o.Chunk >= o.NChunks) {
					return bad("%s: chunk %d of %d", where, o.Chunk, o.NChunks)
				}
				if len(o.Srcs) == 0 || len(o.Dsts) == 0 {
					return bad("%s: needs sources and destinations", where)
				}
				if len(o.Srcs) > MaxOperands || len(o.Dsts) > MaxOperands {
					return bad("%s: more than %d operands", where, MaxOperands)
				}
				for _, r := range append(append([]Ref{}, o.Srcs...), o.Dsts...) {
					if r.Chan != Local && r.Chan != Multicast && !chanOK(r.Chan) {
						return bad("%s: operand %s names no channel", where, r)
					}
					if r.Buf > Switch {
						return bad("%s: operand buffer %d", where, r.Buf)
					}
					if r.Buf == Scratch && (r.Slot < 0 || r.Slot >= p.ScratchSlots) {
						return bad("%s: scratch slot %d of %d", where, r.Slot, p.ScratchSlots)
					}
					if r.Seg < 0 || ((r.Buf == Scratch || r.Buf == Switch) && r.Seg != 0) || r.Seg > MaxSegments {
						return bad("%s: operand %s: segment %d (scratch and switch have none; at most %d)", where, r, r.Seg, MaxSegments)
					}
					if msg := p.validateNetSlot(r); msg != "" {
						return bad("%s: %s", where, msg)
					}
				}
				if p.Scratch != Simple {
					for _, r := range o.Srcs {
						if r.Buf == Scratch && r.Remote() {
							return bad("%s: LL packets are read from local scratch only", where)
						}
					}
				}
			default:
				return bad("%s: unknown kind %d", where, o.Kind)
			}
		}
	}
	return nil
}

// ReleaseLag returns, for each peer rank and semaphore index (peer ×
// Semaphores + index), 1 where a credit wait of this plan counts deferred
// releases (Op.Deferred): after this rank's last run its expected value
// there is one more than the peer's runs will ever signal. Close subtracts
// it before waiting for what peers still owe (channels.Resources.Owed).
// nil when no wait counts deferred releases.
func (p *Plan) ReleaseLag() []uint64 {
	var lag []uint64
	for _, g := range p.Groups {
		for _, ops := range [][]Op{g.Before, g.Ops, g.After} {
			for _, o := range ops {
				if o.Kind != OpWait || o.Credits == 0 || !o.Deferred || o.Chan < 0 || o.Chan >= len(p.Channels) {
					continue
				}
				if lag == nil {
					lag = make([]uint64, p.NRanks*p.Semaphores)
				}
				peer := p.Channels[o.Chan].Peer
				for q := 0; q < g.Blocks && o.Sem+q < p.Semaphores; q++ {
					lag[peer*p.Semaphores+o.Sem+q] = 1
				}
			}
		}
	}
	return lag
}

// MaxCredits bounds Op.Credits: a sender may run at most this many
// launches ahead of a receiver's release (one per scratch half or slot it
// can fill before it must reuse one).
const MaxCredits = 8

// MaxSegments bounds Ref.Seg. The largest segmented buffer holds one
// segment per rank, so this bounds the ranks a segmented plan can address
// (AllGather's output, ReduceScatter's input), not the peers a rank has:
// the bounded-peer plans of package algorithms (rings, trees, Bruck) give
// a rank of 64 or more ranks a few channels but address every rank's
// segment. Segment offsets are Seg × count elements, computed in 64 bits.
const MaxSegments = 1 << 16

// MaxGroupArgs is the number of per-group argument slots (Args.Groups): a
// send and a receive group per peer, and one for a rank's send to itself.
const MaxGroupArgs = 2*MaxPeers + 1

// MaxOperands bounds the sources and destinations of one transfer
// (8 ranks: own buffer plus 7 peers, plus one).
const MaxOperands = 9

// ceilDiv and roundUp work on non-negative int64.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
func roundUp(a, b int64) int64 { return ceilDiv(a, b) * b }

// AlignElems is the number of elements in AlignBytes for element size esize.
func AlignElems(esize int) int64 { return int64(AlignBytes / esize) }

// ChunkRange returns the element offset and length of chunk c of n of a
// count-element buffer. Chunks are equal, rounded up to AlignBytes, so the
// last ones may be short or empty. c == All gives (0, count).
func ChunkRange(count int64, esize, c, n int) (off, length int64) {
	if c == All {
		return 0, count
	}
	return split(count, AlignElems(esize), c, n)
}

// SpanRange is block part's share of a count-element range in a group
// with a span (Group.Span) of span bytes: the span is split among nparts
// blocks as PartRange splits a count, then the share is clipped to the
// count; the last part also takes any elements beyond the span.
func SpanRange(count int64, esize int, span int64, part, nparts int) (off, n int64) {
	per := roundUp(ceilDiv(ceilDiv(span, int64(esize)), int64(nparts)), AlignElems(esize))
	off = min(int64(part)*per, count)
	end := min(off+per, count)
	if part == nparts-1 {
		end = count
	}
	return off, max(0, end-off)
}

// PartRange splits the range [off, off+length) among nparts blocks the same
// way and returns part's share.
func PartRange(off, length int64, esize, part, nparts int) (int64, int64) {
	o, l := split(length, AlignElems(esize), part, nparts)
	return off + o, l
}

// ChunkRange is the package's ChunkRange with this plan's boundary
// granularity (Protocol.PartAlignBytes of its scratch: 240 bytes for
// LL128, AlignBytes otherwise), as the kernels cut chunks.
func (p *Plan) ChunkRange(count int64, esize, c, n int) (off, length int64) {
	if c == All {
		return 0, count
	}
	return split(count, p.Scratch.PartAlignBytes()/int64(esize), c, n)
}

// PartRange is the package's PartRange with this plan's granularity.
func (p *Plan) PartRange(off, length int64, esize, part, nparts int) (int64, int64) {
	o, l := split(length, p.Scratch.PartAlignBytes()/int64(esize), part, nparts)
	return off + o, l
}

func split(count, align int64, i, n int) (int64, int64) {
	per := roundUp(ceilDiv(count, int64(n)), align)
	off := min(int64(i)*per, count)
	return off, min(per, count-off)
}
