package plan

import "fmt"

// Switch buffers. A plan may have one switch buffer (SwitchSlots > 0): on
// every rank, a region of local device memory bound to a multicast group
// of all the plan's ranks (hal.SwitchMapped; package channels sets it up).
// Two views of it are operands of transfers:
//
//   - Ref{Buf: Switch, Chan: Local} (SW) is this rank's own copy: ordinary
//     local memory, read and written with plain loads and stores;
//   - Ref{Buf: Switch, Chan: Multicast} (MC) is the multicast view. As the
//     source of a transfer it is the element-wise reduction of every
//     member's copy, computed in the switch (multimem load-reduce; NVLink
//     SHARP): the transfer then has that one source and is marked Combine,
//     because it combines every rank's contribution. As a destination it
//     stores to every member's copy (multimem store).
//
// A transfer with a multicast source is a switchReduce, one with a
// multicast destination a switchStore, one with both a switchReduceStore
// (MSCCL++'s SwitchChannel reduce and broadcast).
//
// Layout. Like scratch, the switch buffer is a set of slots whose layout
// depends on the buffer's capacity only, never on the count, so one
// compiled plan serves every size. A plan whose groups run in windows has
// two halves of SwitchSlots slots, each one window long (windows alternate
// between the halves, as in windowed scratch: WindowSwitchOffset); a plan
// without windows has one set of slots, each large enough for its largest
// message (Plan.MaxBytes). Every slot region is a multiple of 16 bytes and
// every chunk and block part starts on a 16-byte boundary of it, so the
// device moves whole 16-byte vectors through the switch: the lanes of the
// last vector past the count hold unspecified values and are never copied
// out of the switch buffer.

// Multicast as a Ref's Chan means the multicast view of the plan's switch
// buffer (see Switch).
const Multicast = -2

// SW is this rank's copy of switch slot s.
func SW(s int) Ref { return Ref{Buf: Switch, Chan: Local, Slot: s} }

// MC is switch slot s through the multicast view: the reduction of every
// member's copy as a source, every member's copy as a destination.
func MC(s int) Ref { return Ref{Buf: Switch, Chan: Multicast, Slot: s} }

// IsMulticast reports whether r is the multicast view of the switch buffer.
func (r Ref) IsMulticast() bool { return r.Chan == Multicast }

// HasSwitch reports whether the plan has a switch buffer.
func (p *Plan) HasSwitch() bool { return p.SwitchSlots > 0 }

// SwitchReduces reports whether a transfer of the plan reads the multicast
// view (a switchReduce): such a plan runs only for the types and operators
// SwitchSupports.
func (p *Plan) SwitchReduces() bool {
	reads := func(ops []Op) bool {
		for i := range ops {
			if o := &ops[i]; o.Kind == OpTransfer && len(o.Srcs) > 0 && o.Srcs[0].IsMulticast() {
				return true
			}
		}
		return false
	}
	for i := range p.Groups {
		if g := &p.Groups[i]; reads(g.Ops) || reads(g.After) {
			return true
		}
	}
	return false
}

// SwitchSupports reports whether the switch reduces type t with operator
// op: the types and operators of PTX multimem.ld_reduce on sm_90 (PTX ISA
// 8.1+), the same set NCCL serves with NVLS (ncclNvlsSupported, NCCL
// 2.28):
//
//   - Sum, Max and Min of Int32, Uint32, Int64, Uint64 (.s32, .u32, .u64
//     add; .s32, .u32, .s64, .u64 min and max), Float16 and BFloat16
//     (.f16x2, .bf16x2 add, min, max);
//   - Sum of Float32 and Float64 (.f32, .f64 add; the switch has no
//     floating min or max at those widths);
//   - Avg of the integer types above: the switch sums, the device divides
//     by the number of ranks (plan.CombineMode's integer Avg).
//
// Prod, PreMulSum, the Avg of floating types (both scale every
// contribution before the sum), Int8, Uint8 and FP8 are not served.
func SwitchSupports(t DataType, op RedOp) bool {
	switch t {
	case Int32, Uint32, Int64, Uint64:
		return op == Sum || op == Max || op == Min || op == Avg
	case Float16, BFloat16:
		return op == Sum || op == Max || op == Min
	case Float32, Float64:
		return op == Sum
	}
	return false
}

// SwitchCapacity is the size in bytes of the plan's switch buffer on every
// rank: two halves of SwitchSlots window-sized slots for a windowed plan,
// SwitchSlots slots of MaxBytes (rounded up to 16) otherwise; 0 without a
// switch buffer. Validate requires one of the two bounds.
func (p *Plan) SwitchCapacity() int64 {
	if p.SwitchSlots == 0 {
		return 0
	}
	if p.Windowed() {
		var w int64
		for _, g := range p.Groups {
			w = max(w, g.Window)
		}
		return 2 * int64(p.SwitchSlots) * w
	}
	return int64(p.SwitchSlots) * roundUp(max(p.MaxBytes, 1), AlignBytes)
}

// SwitchBytes is the switch capacity a call of count elements of esize
// bytes needs: SwitchCapacity for a windowed plan, SwitchSlots slots of
// the message rounded up to 16 bytes otherwise.
func (p *Plan) SwitchBytes(count int64, esize int) int64 {
	if p.SwitchSlots == 0 {
		return 0
	}
	if p.Windowed() {
		return p.SwitchCapacity()
	}
	return int64(p.SwitchSlots) * roundUp(max(count*int64(esize), 1), AlignBytes)
}

// SwitchStride is the distance between switch slots in a switch buffer of
// capacity bytes (a multiple of 16).
func (p *Plan) SwitchStride(capacity int64) int64 {
	if p.SwitchSlots == 0 {
		return 0
	}
	halves := int64(1)
	if p.Windowed() {
		halves = 2
	}
	return capacity / halves / int64(p.SwitchSlots) / AlignBytes * AlignBytes
}

// SwitchOffset is the byte offset of element elem of switch slot s in a
// plan without windows.
func (p *Plan) SwitchOffset(capacity int64, esize int, s int, elem int64) int64 {
	return int64(s)*p.SwitchStride(capacity) + elem*int64(esize)
}

// WindowSwitchOffset is the byte offset, in a windowed plan's switch
// buffer, of element elem (counted from the window's start) of slot s in
// window w: windows alternate between the two halves.
func (p *Plan) WindowSwitchOffset(capacity int64, esize int, w int64, s int, elem int64) int64 {
	stride := p.SwitchStride(capacity)
	return ((w&1)*int64(p.SwitchSlots)+int64(s))*stride + elem*int64(esize)
}

// touchesSwitch reports whether transfer o has a switch operand.
func touchesSwitch(o Op) bool {
	for _, r := range append(append([]Ref{}, o.Srcs...), o.Dsts...) {
		if r.Buf == Switch {
			return true
		}
	}
	return false
}

// validateSwitch checks the switch operands of transfer o; "" when right.
func (p *Plan) validateSwitch(o Op) string {
	var mcSrc, mcDst int
	for i, r := range o.Srcs {
		if r.IsMulticast() {
			mcSrc++
			if i != 0 || len(o.Srcs) != 1 {
				return "a multicast source is the reduction of every member's copy: it is the transfer's only source"
			}
		}
	}
	for _, r := range o.Dsts {
		if r.IsMulticast() {
			mcDst++
		}
	}
	for _, r := range append(append([]Ref{}, o.Srcs...), o.Dsts...) {
		switch {
		case r.IsMulticast() && r.Buf != Switch:
			return fmt.Sprintf("operand %s: only the switch buffer has a multicast view", r)
		case r.Buf == Switch && r.Chan != Local && r.Chan != Multicast:
			return fmt.Sprintf("operand %s: a peer's switch copy is reached through the multicast view, not a channel", r)
		case r.Buf == Switch && p.SwitchSlots == 0:
			return fmt.Sprintf("operand %s: the plan has no switch buffer (SwitchSlots 0)", r)
		case r.Buf == Switch && (r.Slot < 0 || r.Slot >= p.SwitchSlots):
			return fmt.Sprintf("operand %s: switch slot %d of %d", r, r.Slot, p.SwitchSlots)
		}
	}
	if mcSrc == 0 && mcDst == 0 {
		return ""
	}
	switch {
	case mcDst > 1:
		return "more than one multicast destination (one store reaches every member)"
	case o.Port:
		return "a port transfer does not reach the multicast view"
	case mcSrc > 0 && !o.Combine:
		return "a multicast source combines every rank's contribution: mark the transfer Combine"
	}
	if p.Scratch != Simple {
		for _, r := range append(append([]Ref{}, o.Srcs...), o.Dsts...) {
			if r.Buf == Scratch {
				return "a transfer through the multicast view moves plain data, not LL packets"
			}
		}
	}
	return ""
}
