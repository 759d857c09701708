package host

import (
	"sync/atomic"
	"unsafe"

	"github.com/weftccl/weft/hal/plan"
)

// Port-channel ops of the interpreter: a block pushes triggers into the
// plan's FIFO exactly as a GPU block does (plan/port.go), and the proxy of
// package channels hands them to the engines. The interpreter never moves
// the bytes of a port transfer itself.

func (b *blockCtx) port(ch int) bool {
	return ch >= 0 && ch < len(b.p.Channels) && b.p.Channels[ch].Port
}

// addr is the address of the first byte of s (len(s) > 0): interpreter
// operands are slices of mapped memory, whose addresses engines resolve.
func addr(s []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&s[0]))) }

// push takes the next FIFO position, waits while the FIFO is full, writes
// the trigger and publishes its tag last. It returns the position + 1, or
// 0 after recording a failure. As on the device (plan/port.go), the tail
// in host memory is read only when the seen tail beside the head does not
// already show the slot free, and the seen tail is raised to what it read.
func (b *blockCtx) push(k plan.TriggerKind, ch int, a, bw, c uint64) uint64 {
	pos := atomic.AddUint64(u64(b.fifoHead, 0), 1) - 1
	if ok, tail := plan.FifoRoom(b.fifoHead, b.fifo, pos, b.spin); !ok {
		if atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
			b.fail(plan.StatusTimeout, plan.WhatFifo, ch, -1, pos+1, tail)
		}
		return 0
	}
	off := plan.SlotOffset(pos)
	atomic.StoreUint64(u64(b.fifo, off), a)
	atomic.StoreUint64(u64(b.fifo, off+8), bw)
	atomic.StoreUint64(u64(b.fifo, off+16), c)
	atomic.StoreUint64(u64(b.fifo, off+24), plan.TriggerTag(pos, k, ch))
	return pos + 1
}

func (b *blockCtx) portSignal(o plan.Op) bool {
	s := o.Sem + b.part
	sems := b.peers[o.Chan].semsAddr
	k := plan.TriggerSignal
	if o.Ack {
		k |= plan.TriggerAck
	}
	return b.push(k, o.Chan, b.tag(),
		sems+uint64(b.p.InboundOffset(b.p.Rank, s)), sems+uint64(b.p.CountOffset(b.p.Rank, s))) != 0
}

func (b *blockCtx) portFlush(o plan.Op) bool {
	me := b.push(plan.TriggerFlush, o.Chan, 0, 0, 0)
	if me == 0 {
		return false
	}
	flushed := u64(b.fifo, plan.FifoFlushed)
	if !b.spin(func() bool { return atomic.LoadUint64(flushed) >= me }) {
		if atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
			b.fail(plan.StatusTimeout, plan.WhatFlush, o.Chan, -1, me, atomic.LoadUint64(flushed))
		}
		return false
	}
	return true
}

func (b *blockCtx) portTransfer(o plan.Op) bool {
	off, n := b.partRange(o)
	if b.p.Scratch != plan.Simple {
		return b.portPutPackets(o, off, n)
	}
	if n == 0 {
		return true
	}
	k := plan.TriggerCopy
	if o.Dsts[0].Remote() {
		k = plan.TriggerPut
	}
	src := b.plain(o.Srcs[0], off, n)
	if b.p.Staged(o, b.op) {
		// An engine moves bytes: the (scaled) window goes into the
		// staging slot first, and the engine moves the slot
		// (plan.Op.Stage, Plan.StageSends).
		st := b.plain(plan.LS(o.Stage-1), off, n)
		copy(st, src)
		if plan.ScalesSource(b.op, o.Srcs[0]) {
			scaleInto(st, b.t, b.scalar)
		}
		src = st
	}
	var dst uint64
	if r := o.Dsts[0]; k == plan.TriggerPut && r.Buf == plan.Scratch {
		// A peer's scratch: an address for the engine, perhaps not mapped
		// here.
		dst = b.peers[r.Chan].scratchAddr + uint64(b.scratchOffset(r, off))
	} else {
		dst = addr(b.plain(r, off, n))
	}
	return b.push(k, o.Chan, addr(src), dst, uint64(len(src))) != 0
}

// portPutPackets is an LL put (plan/port.go, "LL puts"): the part's
// elements [off, off+n) go as packets into the staging slot (part 0 writes
// the header too), and one trigger, marked alone, puts those bytes into the
// same place of the peer's slot.
func (b *blockCtx) portPutPackets(o plan.Op, off, n int64) bool {
	st, d := plan.LS(o.Stage-1), o.Dsts[0]
	if n == 0 && b.part != 0 {
		return true
	}
	if b.part == 0 {
		b.putHeader(st)
	}
	if n > 0 {
		src := b.plain(o.Srcs[0], off, n)
		if plan.ScalesSource(b.op, o.Srcs[0]) {
			src = append([]byte(nil), src...)
			scaleInto(src, b.t, b.scalar)
		}
		b.pack(st, off, src)
	}
	capacity := int64(len(b.scratch))
	start, bytes := b.p.PacketSpan(capacity, b.esize, b.number, st.Slot, off, n, b.part == 0)
	dstart, _ := b.p.PacketSpan(capacity, b.esize, b.number, d.Slot, off, n, b.part == 0)
	return b.push(plan.TriggerPut|plan.TriggerAlone, o.Chan, addr(b.packetSlot(st)[start:start+bytes]), b.peers[d.Chan].scratchAddr+uint64(dstart), uint64(bytes)) != 0
}
