package plan

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Scratch layout. A rank's scratch of capacity C bytes is split into
// halves (Depth for LL protocols: two unless Plan.WindowDepth says more;
// one for Simple; Depth for windowed plans), each into ScratchSlots slots
// of SlotStride(C) bytes. Launch number k of an LL plan uses half k mod
// Depth (two halves: k mod 2), so a rank
// that starts the next call never overwrites packets a slower peer has not
// read yet. The layout depends only on the capacity, never on the count, so
// consecutive calls of different sizes keep that guarantee. An LL slot
// starts with its header (Protocol.HeaderBytes: one packet carrying the
// sender's count), then one packet per PayloadBytes of data; LL128 slots
// and lines are aligned to 128 bytes.

func (p *Plan) halves() int64 {
	switch {
	case p.Windowed():
		return p.Depth()
	case p.Scratch == Simple:
		return 1
	}
	return p.Depth()
}

// Windowed reports whether a group of the plan runs in windows.
func (p *Plan) Windowed() bool {
	for _, g := range p.Groups {
		if g.Window > 0 {
			return true
		}
	}
	return false
}

// WindowScratchOffset is the byte offset, in a windowed plan's scratch of
// capacity bytes, of element elem (counted from the window's start) of slot
// s in window w: windows take the scratch's Depth parts in turn (two halves
// unless Plan.WindowDepth says more), so a peer may fill window w+1 while
// this rank still reduces window w.
//
// Offsets are within the slot's region: a split plan's network windows
// (NetSlot) hold only the slots from NetSlot on, each part of them at the
// scratch's stride (regionSlot, NetScratchBytes).
func (p *Plan) WindowScratchOffset(capacity int64, esize int, w int64, s int, elem int64) int64 {
	stride := p.SlotStride(capacity)
	i, n := p.regionSlot(s)
	return ((w%p.Depth())*n+i)*stride + elem*int64(esize)
}

// regionSlot is slot s's index within a part of its region, and the slots
// a part of that region holds: for a split plan's network slots (NetSlot)
// s − NetSlot of ScratchSlots − NetSlot, else s of ScratchSlots.
func (p *Plan) regionSlot(s int) (index, perPart int64) {
	if p.NetScratchSlot(s) {
		return int64(s - p.NetSlot), int64(p.ScratchSlots - p.NetSlot)
	}
	return int64(s), int64(p.ScratchSlots)
}

// NetScratchBytes is the size of a split plan's network windows beside a
// scratch of capacity bytes: every part's slots from NetSlot on, at the
// scratch's stride (Bindings.NetScratch); 0 for plans that do not split.
func (p *Plan) NetScratchBytes(capacity int64) int64 {
	if p.NetSlot == 0 {
		return 0
	}
	return p.halves() * int64(p.ScratchSlots-p.NetSlot) * p.SlotStride(capacity)
}

// SlotBytes is the size a slot needs for count elements of esize bytes.
func (p *Plan) SlotBytes(count int64, esize int) int64 {
	if p.SlotChunks > 0 {
		_, count = p.ChunkRange(count, esize, 0, p.SlotChunks) // the first chunk is the largest
	}
	data := count * int64(esize)
	if p.Scratch == Simple {
		return roundUp(max(data, 1), 16)
	}
	packets := ceilDiv(data, int64(p.Scratch.PayloadBytes()))
	return roundUp(p.Scratch.HeaderBytes()+packets*int64(p.Scratch.PacketBytes()), p.Scratch.SlotAlign())
}

// ScratchBytes is the scratch capacity a call of count elements needs; for
// a windowed plan, Depth parts of slots one window long, whatever the count.
func (p *Plan) ScratchBytes(count int64, esize int) int64 {
	if p.ScratchSlots == 0 {
		return 0
	}
	if p.Windowed() {
		var w int64
		for _, g := range p.Groups {
			w = max(w, g.Window)
		}
		return p.Depth() * int64(p.ScratchSlots) * w
	}
	return p.halves() * int64(p.ScratchSlots) * p.SlotBytes(count, esize)
}

// SlotStride is the distance between slots in a scratch of capacity bytes.
func (p *Plan) SlotStride(capacity int64) int64 {
	if p.ScratchSlots == 0 {
		return 0
	}
	a := p.Scratch.SlotAlign()
	return capacity / p.halves() / int64(p.ScratchSlots) / a * a
}

// HeaderOffset is the byte offset of slot s's first byte (its header packet
// for LL) for launch number launch.
func (p *Plan) HeaderOffset(capacity int64, launch uint64, s int) int64 {
	stride := p.SlotStride(capacity)
	half := int64(0)
	if p.Scratch != Simple {
		half = int64(launch % uint64(p.Depth()))
	}
	i, n := p.regionSlot(s)
	return (half*n + i) * stride
}

// ScratchOffset is the byte offset of element elem of slot s (for LL, of
// the packet holding it; elem × esize is a multiple of the payload); elem
// counts from the start of the slot's chunk in a plan with SlotChunks.
func (p *Plan) ScratchOffset(capacity int64, esize int, launch uint64, s int, elem int64) int64 {
	base := p.HeaderOffset(capacity, launch, s)
	if p.Scratch == Simple {
		return base + elem*int64(esize)
	}
	return base + p.Scratch.HeaderBytes() + elem*int64(esize)/int64(p.Scratch.PayloadBytes())*int64(p.Scratch.PacketBytes())
}

// Flag is the LL flag value of launch number launch: launches are counted
// from 0 and flags run 1, 2, …, 2^32−1, 1, …, never 0, so zeroed scratch
// never looks written, and a packet left from launch k−2 in the same half
// never carries launch k's flag.
func Flag(launch uint64) uint32 { return uint32(launch%0xFFFFFFFF) + 1 }

// Semaphore region. Each rank has one, exported to its peers: first
// NRanks×Semaphores inbound counters (uint64; counter (f, s) is signalled by
// rank f on semaphore s), then as many count words, where a signal stores
// the sender's element count before adding to the counter.

// SemaphoreRegionBytes is the size of a rank's semaphore region.
func (p *Plan) SemaphoreRegionBytes() int64 { return 2 * int64(p.NRanks*p.Semaphores) * 8 }

// InboundOffset is the offset of the counter that rank from signals on s.
func (p *Plan) InboundOffset(from, s int) int64 { return int64(from*p.Semaphores+s) * 8 }

// CountOffset is the offset of the count word beside that counter.
func (p *Plan) CountOffset(from, s int) int64 {
	return int64(p.NRanks*p.Semaphores)*8 + p.InboundOffset(from, s)
}

// ExpectedRegionBytes is the size of a rank's local expected-value table:
// one uint64 per (peer, semaphore), at InboundOffset. Kept in device memory
// and advanced by the waits themselves, so graph replays stay in step.
func (p *Plan) ExpectedRegionBytes() int64 { return int64(p.NRanks*p.Semaphores) * 8 }

// StateBytes is the size of the plan's device state: one launch counter
// (uint64) per thread block, at 8 × block. Each block reads its own counter
// at the start of a launch and advances it at the end, so the counters of
// a group's blocks move in step without any cross-block atomic. A group
// that a launch leaves out (GroupArgs.Skip) does not advance its counters:
// a group's launch number counts the launches in which it ran, so the LL
// flags and scratch halves of a point-to-point group to a peer follow the
// sends to that peer alone, and match the peer's receive group whatever
// else either rank launched in between.
func (p *Plan) StateBytes() int64 { return 8 * int64(max(p.Blocks(), 1)) }

// Control block: host-visible memory (hal.Device.AllocHost) through which
// a launch reports a failure. The first failing block claims Status with a
// compare-and-swap, fills in the rest, and sets Abort; every block polls
// Abort in its waits and exits early. The host may also set Abort.
const (
	ControlBytes   = 64
	CtlAbort       = 0  // uint32: non-zero makes every wait give up
	CtlStatus      = 4  // uint32: a Status value
	CtlRank        = 8  // int32
	CtlPeer        = 12 // int32
	CtlChannel     = 16 // int32
	CtlSemaphore   = 20 // int32
	CtlBlock       = 24 // int32
	CtlWhat        = 28 // uint32: WhatSemaphore or WhatPacket
	CtlExpected    = 32 // uint64
	CtlObserved    = 40 // uint64
	CtlLaunch      = 48 // uint64: launch number that failed
	WhatSemaphore  = 1
	WhatPacket     = 2
	WhatFifo       = 3 // a port-channel FIFO stayed full (the proxy did not drain it)
	WhatFlush      = 4 // a port-channel flush did not complete
	WhatProxy      = 5 // the proxy's engine failed a request (Expected: FIFO position + 1)
	StatusOK       = 0
	StatusTimeout  = 1
	StatusMismatch = 2 // a peer's element count differs from ours
	StatusAborted  = 3 // the host set Abort
	DefaultTimeout = 10 * time.Second
)

// Failure is a decoded control block.
type Failure struct {
	Status, What                          uint32
	Rank, Peer, Channel, Semaphore, Block int
	Expected, Observed, Launch            uint64
}

// DecodeControl reads a control block; ok is false when no failure is
// recorded.
func DecodeControl(b []byte) (f Failure, ok bool) {
	le := binary.LittleEndian
	f.Status = le.Uint32(b[CtlStatus:])
	if f.Status == StatusOK {
		return f, false
	}
	f.Rank = int(int32(le.Uint32(b[CtlRank:])))
	f.Peer = int(int32(le.Uint32(b[CtlPeer:])))
	f.Channel = int(int32(le.Uint32(b[CtlChannel:])))
	f.Semaphore = int(int32(le.Uint32(b[CtlSemaphore:])))
	f.Block = int(int32(le.Uint32(b[CtlBlock:])))
	f.What = le.Uint32(b[CtlWhat:])
	f.Expected = le.Uint64(b[CtlExpected:])
	f.Observed = le.Uint64(b[CtlObserved:])
	f.Launch = le.Uint64(b[CtlLaunch:])
	return f, true
}

func (f Failure) String() string {
	what := "semaphore"
	switch f.What {
	case WhatPacket:
		what = "LL packet"
	case WhatFifo:
		return fmt.Sprintf("rank %d: port-channel FIFO full past the deadline (channel %d to peer rank %d, block %d): trigger %d, proxy at %d",
			f.Rank, f.Channel, f.Peer, f.Block, f.Expected, f.Observed)
	case WhatFlush:
		return fmt.Sprintf("rank %d: port-channel flush not completed by the proxy (channel %d to peer rank %d, block %d): flush %d, proxy at %d",
			f.Rank, f.Channel, f.Peer, f.Block, f.Expected, f.Observed)
	case WhatProxy:
		return fmt.Sprintf("rank %d: the proxy's engine failed trigger %d of channel %d (peer rank %d); the error is in the proxy's log",
			f.Rank, f.Expected, f.Channel, f.Peer)
	}
	switch f.Status {
	case StatusMismatch:
		return fmt.Sprintf("rank %d: element count differs from peer rank %d (channel %d): this rank has %d, the peer %d",
			f.Rank, f.Peer, f.Channel, f.Expected, f.Observed)
	case StatusAborted:
		return fmt.Sprintf("rank %d: launch %d aborted by the host", f.Rank, f.Launch)
	}
	return fmt.Sprintf("rank %d: %s wait on peer rank %d timed out (channel %d, semaphore %d, block %d): expected %d, observed %d",
		f.Rank, what, f.Peer, f.Channel, f.Semaphore, f.Block, f.Expected, f.Observed)
}

// Bindings are the resources a prepared plan runs on, as addresses in the
// executing device's address space (hal.Buffer.Addr). Package channels
// allocates, exports and maps them.
type Bindings struct {
	Scratch      uint64 // local scratch
	ScratchBytes int64  // its capacity
	Semaphores   uint64 // local semaphore region (SemaphoreRegionBytes)
	Expected     uint64 // local expected-value table (ExpectedRegionBytes)
	State        uint64 // device state (Plan.StateBytes)
	Control      uint64 // host-visible control block (ControlBytes)
	// NetScratch (NetScratchBytes of the scratch's capacity: its
	// network slots, each part at the scratch's stride) and NetSemaphores
	// (laid out as Semaphores) are the network windows of a plan that
	// splits them (Plan.NetSlot), required there (CheckNetRegions); 0
	// for plans that do not split.
	NetScratch, NetSemaphores uint64
	// Fifo (host memory the device reaches, FifoBytes) and FifoHead
	// (FifoHeadBytes of device memory: the head counter and the seen
	// tail) are the port-channel FIFO of a plan with port channels
	// (port.go); 0 otherwise.
	Fifo, FifoHead uint64
	// Switch is this rank's copy of the plan's switch buffer (local memory
	// bound to the multicast group), Multicast the group's multicast
	// address on this device (hal.Multicast.Addr), SwitchBytes the
	// buffer's capacity (Plan.SwitchCapacity); 0 without a switch buffer.
	Switch, Multicast uint64
	SwitchBytes       int64
	Peers             []PeerBinding
}

// PeerBinding is the peer side of one channel: mapped locally for a memory
// channel, the addresses its engine takes (hal.PortMapped.ImportPort) for
// a port channel (the peer's network windows where its plan splits them:
// Plan.NetSlot).
type PeerBinding struct {
	Scratch    uint64 // the peer's scratch
	Semaphores uint64 // the peer's semaphore region
}

// Args are the per-launch arguments.
type Args struct {
	Count  int64  // elements per rank
	Input  uint64 // local input buffer address
	Output uint64 // local output buffer address
	// PeerInput and PeerOutput are the peers' (registered) input and output
	// buffers mapped locally, by channel; needed only by plans whose
	// transfers name them.
	PeerInput, PeerOutput []uint64
	// Timeout bounds every device-side wait; 0 means DefaultTimeout.
	Timeout time.Duration
	// Scalar is the PreMulSum multiplier of this rank (each rank may pass
	// its own; it scales this rank's input: premul.go): the bits of one
	// element of the data type, little-endian in the low bytes. ScalarPtr,
	// when not 0, is the address of that element in device memory
	// instead, read by the launch when it runs (ncclScalarDevice).
	Scalar    uint64
	ScalarPtr uint64
	// Groups are the per-group arguments of groups with Arg ≥ 1
	// (Groups[Arg−1]); missing entries leave the group out.
	Groups []GroupArgs
	// PostTable is the address of the communicator's post table
	// (PostTableBytes, posted.go), read by send groups with a post; 0
	// when no group of the launch takes posts.
	PostTable uint64
}

// CheckNetRegions reports, for a plan p that splits its windows
// (Plan.NetSlot), a network region it needs that b leaves 0: a message
// naming it, or "" when nothing is missing (always for plans that do not
// split). Executors refuse such bindings at Prepare.
func (b *Bindings) CheckNetRegions(p *Plan) string {
	switch {
	case p.NetSlot == 0:
		return ""
	case b.ScratchBytes > 0 && b.NetScratch == 0:
		return fmt.Sprintf("plan %s splits its windows (network slots from %d) but its network scratch is not bound", p.Name, p.NetSlot)
	case p.Semaphores > 0 && b.NetSemaphores == 0:
		return fmt.Sprintf("plan %s splits its windows but its network semaphores are not bound", p.Name)
	}
	return ""
}

// NetRegions returns the network windows of b (Bindings.NetScratch,
// NetSemaphores), each the device region where b leaves it 0 (a plan that
// does not split them addresses none: the kernel's parameters carry the
// device regions again).
func (b *Bindings) NetRegions() (scratch, sems uint64) {
	scratch, sems = b.NetScratch, b.NetSemaphores
	if scratch == 0 {
		scratch = b.Scratch
	}
	if sems == 0 {
		sems = b.Semaphores
	}
	return scratch, sems
}

// GroupArgs are one group's count and buffers. Skip leaves the group's
// blocks idle in this launch; their launch counters stay (StateBytes).
type GroupArgs struct {
	Count         int64
	Input, Output uint64
	Skip          bool
	// Post drives a group's posted-buffer exchange (Group.Post,
	// posted.go): 0, none in this launch; PostNone, take posts (send
	// side) or post "nothing registered" (receive side); PostArg(id,
	// off), post the output as off bytes into registration id.
	Post uint64
}

// GroupArgs returns the count and buffers of group g for launch a, and
// whether the group runs.
func (a *Args) GroupArgs(g *Group) (GroupArgs, bool) {
	if g.Arg == 0 {
		return GroupArgs{Count: a.Count, Input: a.Input, Output: a.Output}, true
	}
	if g.Arg > len(a.Groups) || a.Groups[g.Arg-1].Skip {
		return GroupArgs{}, false
	}
	return a.Groups[g.Arg-1], true
}

// Extent returns how many count-element segments of the local input and
// output buffers group g addresses (1 + the largest Ref.Seg; 0 when the
// group does not address that buffer): a launch's buffers must hold that
// many segments of the group's count.
func (g *Group) Extent() (in, out int) {
	g.eachRef(func(r *Ref) {
		switch r.Buf {
		case Input:
			in = max(in, r.Seg+1)
		case Output:
			out = max(out, r.Seg+1)
		}
	})
	return in, out
}

// eachOp calls f on every op of g, Before, Ops then After, without copying them
// (Launch asks per call).
func (g *Group) eachOp(f func(o *Op)) {
	for i := range g.Before {
		f(&g.Before[i])
	}
	for i := range g.Ops {
		f(&g.Ops[i])
	}
	for i := range g.After {
		f(&g.After[i])
	}
}

// eachRef calls f on every source and destination of every op of g.
func (g *Group) eachRef(f func(r *Ref)) {
	g.eachOp(func(o *Op) {
		for i := range o.Srcs {
			f(&o.Srcs[i])
		}
		for i := range o.Dsts {
			f(&o.Dsts[i])
		}
	})
}

// CombineMode says what a Combine transfer does for type t and operator
// op: scale every contribution by the scalar (Avg of floating types, whose
// scalar is AvgScalar, the same on every rank), or divide the sum by the
// number of ranks (Avg of integer types). PreMulSum combines nothing: each
// rank's input is scaled where it is read (ScalesSource, premul.go).
func CombineMode(t DataType, op RedOp) (scale, div bool) {
	return op == Avg && t.Float(), op == Avg && !t.Float()
}

// Needs reports which peer buffers the plan reads or writes directly.
func (p *Plan) Needs() (peerInput, peerOutput bool) {
	for gi := range p.Groups {
		p.Groups[gi].eachRef(func(r *Ref) {
			if r.Remote() && r.Buf == Input {
				peerInput = true
			}
			if r.Remote() && r.Buf == Output {
				peerOutput = true
			}
		})
	}
	return peerInput, peerOutput
}
