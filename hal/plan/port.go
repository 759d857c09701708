package plan

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Port channels. A channel with Port set reaches its peer through the
// port-mapped capability (hal.PortMapped): its transfers are requests that
// the executing device pushes as triggers into the plan's FIFO, and that a
// CPU proxy (package channels) hands to the channel's engine (a copy
// engine, a NIC, a host copy). No thread moves the bytes.
//
// On a port channel:
//   - a put (a transfer with Port set, one local source and one remote
//     destination on the channel) is one trigger per thread block, covering
//     the block's part of the op's range;
//   - a copy (a Port transfer between two local buffers) runs on the
//     channel's engine, ordered with its puts and signals: a receiver
//     copies a scratch slot out, then signals "slot free" on the same
//     engine, which applies the signal only after the copy;
//   - signal is a trigger: the engine stores the count beside the peer's
//     semaphore and adds one to it after every earlier request of the
//     channel is visible at the peer;
//   - wait is unchanged: the engine writes the waiting rank's semaphores in
//     its own memory;
//   - flush pushes a trigger and waits until the proxy reports every
//     earlier request of the channel complete at the source (sources
//     reusable, copies done). A plan flushes its port channels before it
//     ends, so that the stream's next work sees the copies done — unless
//     its engines touch only its own scratch (Plan.StageSends with the
//     copies out on SMs; algorithms.dropFlushes), where nothing of the
//     caller's waits for them.
//
// LL puts. In a plan whose scratch holds LL packets (Plan.Scratch LL16 or
// LL8, no windows), a port put moves packets, not plain data: the block's
// threads write its part of the input as packets carrying the launch's
// flag into local staging slot Op.Stage−1 (part 0 also the slot's header
// packet), and one trigger puts those bytes (PacketSpan) into the same
// offsets of the peer's slot, marked TriggerAlone. No signal follows: the reader polls the
// flags in its own scratch, as with packets a memory channel stored, so a
// small message over a network costs one trigger and one frame per block
// and peer, and the receiving kernel sees data and completion in one read
// (docs/network.md). Transports write a put's bytes in order with aligned
// stores of 8 bytes or more, so a reader never takes a torn half-packet
// for a written one: each 8-byte half of an LL16 packet, and each LL8
// packet, carries its own flag. The slots alternate halves by launch as
// in every LL plan; a plan whose every rank sends to and receives from
// each of its peers in every launch needs no credits (a rank rewrites a
// half, its own staging half included, only after its peers have read
// what it wrote there two launches before: algorithms.AllGatherPortLL).

// FIFO layout. A plan with port channels owns one FIFO in host memory that
// the device can reach (hal.Device.AllocHost): FifoCtlBytes of control
// words, then FifoSlots triggers of TriggerBytes. The device side holds
// FifoHeadBytes in device memory (Bindings.FifoHead): a 64-bit head
// counter, and at FifoSeenTail the largest tail a pusher has read. A
// pusher takes position pos with an atomic add on the head; when pos <
// seen + FifoSlots the slot is free (the tail only grows), else it reads
// the tail from host memory until pos < tail + FifoSlots (with a
// deadline) and raises the seen tail to it. So a push reads host memory
// only about once per FifoSlots pushes, not every time: each such read is
// a round trip over PCIe (about 1.2 µs on H100), and a put-with-signal
// pushes twice (docs/network.md, "Where a hop's time goes"). It then
// writes words 0–2 of slot pos mod FifoSlots and, with release semantics,
// word 3, the tag. The proxy reads slot
// tail mod FifoSlots until its tag is TriggerTag(tail, …), handles the
// trigger and publishes tail+1. Triggers are 32 bytes, not MSCCL++'s 16,
// so that addresses, byte counts and element counts keep 64 bits.
const (
	FifoSlots    = 1024
	TriggerBytes = 32
	// FifoHeadBytes is the device-memory block of Bindings.FifoHead: the
	// head counter at 0, the seen tail at FifoSeenTail.
	FifoHeadBytes = 16
	FifoSeenTail  = 8
	FifoCtlBytes  = 64 + 8*FifoCounters
	FifoBytes     = FifoCtlBytes + FifoSlots*TriggerBytes
	// FifoCounters are local counters (GIN's "counters"): a TriggerCounter
	// adds one to counter C once every earlier request of its channel is
	// complete at the source, so a kernel learns without a flush round
	// trip that it may reuse what it put. They follow the control words.
	FifoCounters   = 64
	FifoCounterOff = 64
	// Control words (uint64, written by the proxy, read by the device).
	FifoTail    = 0  // triggers consumed
	FifoFlushed = 8  // position + 1 of the last flush completed
	FifoError   = 16 // non-zero: the proxy failed (its error is on the host)
)

// TriggerKind is the request a trigger carries.
type TriggerKind uint8

const (
	TriggerPut     TriggerKind = 1 // A: source address, B: remote destination address, C: bytes
	TriggerCopy    TriggerKind = 2 // A: source address, B: local destination address, C: bytes
	TriggerSignal  TriggerKind = 3 // A: count, B: semaphore address, C: count-word address
	TriggerFlush   TriggerKind = 4
	TriggerCounter TriggerKind = 5 // C: counter index (FifoCounters)
	// TriggerAlone, or'ed into a put's kind in its tag, says that no
	// request of the channel follows it at once (an LL put carries its own
	// completion): the proxy hands it on without waiting for a signal to
	// send it with (channels' batchWait). TagKind separates it.
	TriggerAlone TriggerKind = 0x80
	// TriggerAck, or'ed into a signal's kind in its tag, marks a release
	// (Op.Ack on a port signal): the engine may apply it once the
	// channel's earlier copies are done, without waiting for its earlier
	// puts to land (hal.AckSignaler). TagKind separates it.
	TriggerAck TriggerKind = 0x40
)

// CounterOffset is the byte offset of local counter i in the FIFO region.
func CounterOffset(i int) int64 { return FifoCounterOff + 8*int64(i) }

func (k TriggerKind) String() string {
	switch k {
	case TriggerPut:
		return "put"
	case TriggerCopy:
		return "copy"
	case TriggerSignal:
		return "signal"
	case TriggerFlush:
		return "flush"
	case TriggerCounter:
		return "counter"
	}
	return fmt.Sprintf("trigger(%d)", uint8(k))
}

// Trigger is one decoded FIFO entry.
type Trigger struct {
	Kind    TriggerKind
	Chan    int // channel index in the plan
	A, B, C uint64
	// Alone: TriggerAlone was set; Ack: TriggerAck was set (Kind is
	// without them).
	Alone, Ack bool
}

// TagKind is the kind a tag carries, without TriggerAlone and
// TriggerAck, and whether each was set.
func TagKind(tag uint64) (k TriggerKind, alone, ack bool) {
	k = TriggerKind(tag >> 8)
	return k &^ (TriggerAlone | TriggerAck), k&TriggerAlone != 0, k&TriggerAck != 0
}

// TriggerTag is word 3 of the trigger at FIFO position pos: (pos+1) in the
// high 48 bits, the kind and channel in the low 16. The position makes a
// stale slot (the previous lap's trigger) distinguishable from a fresh one.
func TriggerTag(pos uint64, k TriggerKind, ch int) uint64 {
	return (pos+1)<<16 | uint64(k)<<8 | uint64(uint8(ch))
}

// TagPosition returns the FIFO position + 1 a tag carries (0: never written).
func TagPosition(tag uint64) uint64 { return tag >> 16 }

// DecodeTrigger decodes the 32 bytes of a slot whose tag was read as tag.
func DecodeTrigger(slot []byte, tag uint64) Trigger {
	le := binary.LittleEndian
	k, alone, ack := TagKind(tag)
	return Trigger{Kind: k, Alone: alone, Ack: ack, Chan: int(uint8(tag)),
		A: le.Uint64(slot[0:]), B: le.Uint64(slot[8:]), C: le.Uint64(slot[16:])}
}

// SlotOffset is the byte offset of FIFO position pos's slot in the FIFO.
func SlotOffset(pos uint64) int64 { return FifoCtlBytes + int64(pos%FifoSlots)*TriggerBytes }

// FifoRoom is a pusher's wait for room at FIFO position pos, for the
// executors that run kernels on the host (hal/host, the GIN host blocks)
// as the device does (weft_channels.h's port_push): head is the
// FifoHeadBytes block, fifo the FIFO. When the seen tail does not show the
// slot free it reads the tail through spin (which polls cond until true
// or gives up) and raises the seen tail to it. ok: the slot is free;
// tail: the tail last read (for a timeout's report).
func FifoRoom(head, fifo []byte, pos uint64, spin func(cond func() bool) bool) (ok bool, tail uint64) {
	seen := (*uint64)(unsafe.Pointer(&head[FifoSeenTail]))
	if pos < atomic.LoadUint64(seen)+FifoSlots {
		return true, 0
	}
	t := (*uint64)(unsafe.Pointer(&fifo[FifoTail]))
	if !spin(func() bool { tail = atomic.LoadUint64(t); return pos < tail+FifoSlots }) {
		return false, atomic.LoadUint64(t)
	}
	for old := atomic.LoadUint64(seen); old < tail && !atomic.CompareAndSwapUint64(seen, old, tail); old = atomic.LoadUint64(seen) {
	}
	return true, tail
}

// HasPorts reports whether the plan has a port channel (and so needs a FIFO
// and a proxy).
func (p *Plan) HasPorts() bool {
	for _, c := range p.Channels {
		if c.Port {
			return true
		}
	}
	return false
}

// PortPut is a put on port channel ch of chunk c of n (windowed groups: of
// the window) from local src to remote dst.
func PortPut(ch, c, n int, dst, src Ref) Op {
	o := Transfer(c, n, []Ref{dst}, src)
	o.Port, o.Chan = true, ch
	return o
}

// PortCopy is a local copy of chunk c of n run by port channel ch's engine.
func PortCopy(ch, c, n int, dst, src Ref) Op { return PortPut(ch, c, n, dst, src) }

// validatePort checks a Port transfer and any transfer that names a port
// channel's buffers.
func (p *Plan) validatePort(o Op) string {
	isPort := func(ch int) bool { return ch >= 0 && ch < len(p.Channels) && p.Channels[ch].Port }
	if !o.Port {
		for _, r := range append(append([]Ref{}, o.Srcs...), o.Dsts...) {
			if r.Remote() && isPort(r.Chan) {
				return fmt.Sprintf("operand %s is on port channel %d: only port transfers (puts) reach it", r, r.Chan)
			}
		}
		return ""
	}
	if !isPort(o.Chan) {
		return fmt.Sprintf("port transfer on channel %d, which is not a port channel", o.Chan)
	}
	if len(o.Srcs) != 1 || len(o.Dsts) != 1 || o.Combine || o.PostDiv {
		return "a port transfer has one source and one destination and does not reduce"
	}
	if o.Srcs[0].Remote() {
		return "a port transfer reads local memory (engines put; they do not get)"
	}
	if d := o.Dsts[0]; d.Remote() && d.Chan != o.Chan {
		return fmt.Sprintf("a put on channel %d writes %s, a buffer of another channel", o.Chan, d)
	}
	if p.Scratch == LL128 {
		return "an LL128 line is one warp's write over NVLink: engines and networks cannot carry LL128 packets (use LL16 or LL8)"
	}
	if p.Scratch != Simple {
		if d := o.Dsts[0]; !d.Remote() || d.Buf != Scratch || o.Stage == 0 {
			return "in an LL plan a port transfer is a put of packets staged in a local slot (Stage) into a peer's scratch slot"
		}
	}
	return ""
}

// PacketSpan is where, in a slot of an LL plan's scratch of capacity bytes,
// the packets of elements [off, off+n) (esize bytes each) of launch number
// launch lie: start, the byte offset from the scratch's start, and bytes,
// their length — 16 bytes of packets per 8 data bytes or part of them
// (one LL16 packet or two LL8 packets; the last unit may be short), from
// the slot's header packet on when header is set. off × esize must be a
// multiple of 8 (part boundaries are multiples of AlignBytes). The span
// of an LL put (port.go, "LL puts").
func (p *Plan) PacketSpan(capacity int64, esize int, launch uint64, slot int, off, n int64, header bool) (start, bytes int64) {
	start = p.ScratchOffset(capacity, esize, launch, slot, off)
	end := start + ceilDiv(n*int64(esize), 8)*16
	if header {
		start = p.HeaderOffset(capacity, launch, slot)
	}
	return start, end - start
}

// DataBlocks is the number of thread blocks whose groups move data with
// their threads (a transfer that is not a port transfer); the other blocks
// only push triggers, signal and wait. A port-channel AllGather has none.
func (p *Plan) DataBlocks() int {
	n := 0
	for gi := range p.Groups {
		g := &p.Groups[gi]
		moves := false
		g.eachOp(func(o *Op) { moves = moves || (o.Kind == OpTransfer && !o.Port) })
		if moves {
			n += g.Blocks
		}
	}
	return n
}
