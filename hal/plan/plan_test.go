package plan

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// Chunks and parts tile the range exactly, start on 16-byte boundaries and
// never overlap, for any count, element size and split.
func TestRangesTile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		count := rapid.Int64Range(0, 1<<40).Draw(t, "count")
		esize := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "esize")
		n := rapid.IntRange(1, 9).Draw(t, "chunks")
		parts := rapid.IntRange(1, 132).Draw(t, "parts")
		var next int64
		for c := 0; c < n; c++ {
			off, l := ChunkRange(count, esize, c, n)
			if off != next && l > 0 {
				t.Fatalf("chunk %d starts at %d, want %d", c, off, next)
			}
			if l > 0 && off*int64(esize)%AlignBytes != 0 {
				t.Fatalf("chunk %d at element %d is not 16-byte aligned", c, off)
			}
			pnext := off
			for p := 0; p < parts; p++ {
				po, pl := PartRange(off, l, esize, p, parts)
				if pl > 0 && (po != pnext || po*int64(esize)%AlignBytes != 0) {
					t.Fatalf("chunk %d part %d at %d, want %d (aligned)", c, p, po, pnext)
				}
				pnext += pl
			}
			if pnext != off+l {
				t.Fatalf("parts of chunk %d cover %d elements, want %d", c, pnext-off, l)
			}
			next = off + l
		}
		if next != count {
			t.Fatalf("chunks cover %d of %d elements", next, count)
		}
	})
}

func TestFlagNeverZeroAndDistinctFromTwoBefore(t *testing.T) {
	for _, l := range []uint64{0, 1, 2, 0xFFFFFFFD, 0xFFFFFFFE, 0xFFFFFFFF, 0x100000000, 1 << 40} {
		if Flag(l) == 0 {
			t.Errorf("Flag(%d) = 0", l)
		}
		if l >= 2 && Flag(l) == Flag(l-2) {
			t.Errorf("Flag(%d) = Flag(%d) = %d: a stale packet of the same half would look fresh", l, l-2, Flag(l))
		}
	}
	if got := Flag(0xFFFFFFFE); got != 0xFFFFFFFF {
		t.Errorf("Flag(2^32-2) = %#x, want 0xffffffff", got)
	}
	if got := Flag(0xFFFFFFFF); got != 1 {
		t.Errorf("Flag(2^32-1) = %d, want 1 (wrap skips 0)", got)
	}
}

func llPlan() *Plan {
	return &Plan{Name: "t", Rank: 0, NRanks: 2, Channels: []Channel{{Peer: 1}}, Threads: 64,
		Scratch: LL16, ScratchSlots: 2, Groups: []Group{{Blocks: 1, Ops: []Op{
			Transfer(All, 0, []Ref{RS(0, 0)}, L(Input)),
			Transfer(All, 0, []Ref{L(Output)}, L(Input), LS(0)),
		}}}}
}

// The scratch layout depends on the capacity only, halves alternate by
// launch, and a call that fits ScratchBytes stays inside the capacity.
func TestScratchLayout(t *testing.T) {
	p := llPlan()
	const capacity = 1 << 20
	stride := p.SlotStride(capacity)
	if stride != capacity/2/2 {
		t.Fatalf("stride %d, want %d", stride, capacity/4)
	}
	if a, b := p.HeaderOffset(capacity, 0, 1), p.HeaderOffset(capacity, 1, 1); b-a != capacity/2 {
		t.Fatalf("halves %d apart, want %d", b-a, capacity/2)
	}
	count := int64(1000)
	if need := p.ScratchBytes(count, 4); need > capacity {
		t.Fatalf("ScratchBytes %d > capacity", need)
	}
	// The packet of the last element lies inside the slot.
	last := p.ScratchOffset(capacity, 4, 1, 1, (count-1)/2*2)
	if end := p.HeaderOffset(capacity, 1, 1) + p.SlotBytes(count, 4); last+16 > end {
		t.Fatalf("last packet at %d ends past the slot end %d", last, end)
	}
	if got, want := p.ScratchOffset(capacity, 2, 0, 0, 8), int64(HeaderBytes+16*2); got != want {
		t.Fatalf("element 8 of a half slot: offset %d, want %d (two LL16 packets in)", got, want)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"ok", func(*Plan) {}, ""},
		{"peer is self", func(p *Plan) { p.Channels[0].Peer = 0 }, "channel 0 has peer 0"},
		{"threads", func(p *Plan) { p.Threads = 33 }, "threads per block"},
		{"slot", func(p *Plan) { p.Groups[0].Ops[0].Dsts[0].Slot = 2 }, "scratch slot 2 of 2"},
		{"remote packet source", func(p *Plan) { p.Groups[0].Ops[1].Srcs[1] = RS(0, 0) }, "local scratch only"},
		{"semaphores", func(p *Plan) { p.Groups[0].Ops = append(p.Groups[0].Ops, Wait(0, 0)) }, "beyond 0"},
		{"no sources", func(p *Plan) { p.Groups[0].Ops[0].Srcs = nil }, "needs sources"},
		{"chunk", func(p *Plan) { p.Groups[0].Ops[0].Chunk, p.Groups[0].Ops[0].NChunks = 3, 2 }, "chunk 3 of 2"},
		{"deferred release", func(p *Plan) { p.Semaphores, p.Groups[0].Before = 1, []Op{deferred(Signal(0, 0))} }, ""},
		{"deferred release among ops", func(p *Plan) {
			p.Semaphores, p.Groups[0].Ops = 1, append(p.Groups[0].Ops, deferred(Signal(0, 0)))
		}, "not among its ops"},
		{"plain signal before", func(p *Plan) { p.Semaphores, p.Groups[0].Before = 1, []Op{Signal(0, 0)} }, "deferred signals only"},
		{"deferred release semaphores", func(p *Plan) { p.Groups[0].Before = []Op{deferred(Signal(0, 0))} }, "beyond 0"},
		{"deferred release on a port", func(p *Plan) {
			p.Semaphores, p.Channels[0].Port, p.Groups[0].Before = 1, true, []Op{deferred(Signal(0, 0))}
		}, "memory channels only"},
		{"deferred wait without credits", func(p *Plan) { p.Semaphores, p.Groups[0].Ops = 1, append(p.Groups[0].Ops, deferred(Wait(0, 0))) }, "marks a credit wait"},
		{"deferred release on no channel", func(p *Plan) { p.Semaphores, p.Groups[0].Before = 1, []Op{deferred(Signal(3, 0))} }, "channel 3"},
		{"deferred wait on no channel", func(p *Plan) {
			w := deferred(Wait(3, 0))
			w.Ack, w.Credits = true, 2
			p.Semaphores, p.Groups[0].Ops = 1, append(p.Groups[0].Ops, w)
		}, "marks a credit wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := llPlan()
			tc.edit(p)
			err := p.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalidPlan containing %q", err, tc.want)
			}
		})
	}
}

func deferred(o Op) Op {
	o.Deferred = true
	return o
}

// ReleaseLag marks the semaphores whose credit waits count deferred
// releases, for every block of the peer's group, and nothing else.
func TestReleaseLag(t *testing.T) {
	p := llPlan()
	p.NRanks, p.Channels, p.Semaphores = 3, []Channel{{Peer: 1}, {Peer: 2}}, 4
	credit := func(ch int, d bool) Op {
		o := Wait(ch, 1)
		o.Ack, o.Credits, o.Deferred = true, 2, d
		return o
	}
	p.Groups[0].Blocks = 2
	p.Groups[0].Ops = append([]Op{credit(0, true), credit(1, false)}, p.Groups[0].Ops...)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, 3*4)
	want[1*4+1], want[1*4+2] = 1, 1 // peer 1, semaphores 1 and 2 (two blocks)
	if d := cmp.Diff(want, p.ReleaseLag()); d != "" {
		t.Errorf("ReleaseLag differs (-want +got):\n%s", d)
	}
	p.Groups[0].Ops[0].Deferred = false
	if got := p.ReleaseLag(); got != nil {
		t.Errorf("ReleaseLag without deferred releases = %v, want nil", got)
	}
}

func TestOpNames(t *testing.T) {
	p := llPlan()
	var got []string
	for _, o := range p.Groups[0].Ops {
		got = append(got, o.Name())
	}
	got = append(got,
		Transfer(0, 2, []Ref{R(0, Output)}, L(Input)).Name(),
		Transfer(0, 2, []Ref{L(Output)}, R(0, Input)).Name(),
		Transfer(0, 2, []Ref{L(Output)}, L(Input), R(0, Input)).Name(),
		Transfer(0, 2, []Ref{L(Output)}, LS(0)).Name(),
		Signal(0, 0).Name(), Wait(0, 0).Name(), Op{Kind: OpWait, Relaxed: true}.Name())
	want := []string{"putPackets", "reducePackets", "put", "get", "readReduce", "unpackPackets", "signal", "wait", "relaxedWait"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
}

// The generated source names every op and both include files, and the
// parameter block has the documented size.
func TestEmitCUDA(t *testing.T) {
	p := llPlan()
	src, err := EmitCUDA(p, BFloat16, Max)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`#include "weft_hal.h"`, `#include "weft_channels.h"`, "DT = 9, OP = 2, ES = 2, PROTO = 1",
		"put_header<PROTO>", "check_header<PROTO>", "xfer_ll<DT, OP, PROTO, 1, 0, 0, 1, 0>", "xfer_ll<DT, OP, PROTO, 1, 1, 1, 0, 0>",
		"__launch_bounds__(64) weft_plan"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q:\n%s", want, src)
		}
	}
	params, err := PackParams(p, &Bindings{Peers: make([]PeerBinding, 1)}, &Args{Count: 7})
	// 9 bindings (6, and the network windows' scratch, semaphores and
	// channel mask), 2×16 peer bindings, count/input/output, 2×16 peer
	// buffers, timeout, scalar and its address, FIFO and its head, 4×33
	// group arguments, the post table, 4 switch-buffer words (8 bytes each), then rank,
	// nranks, semaphores, slots and 16 peer ranks (4 bytes each).
	if err != nil || len(params) != ParamsBytes || ParamsBytes != 1824 {
		t.Fatalf("PackParams: %d bytes, %v; want 1824", len(params), err)
	}
}

func TestParseTypes(t *testing.T) {
	for _, s := range []string{"float", "fp16", "bf16", "int32", "int64", "int8", "uint8", "uint32", "uint64", "double", "f8e4m3", "e5m2"} {
		if _, err := ParseDataType(s); err != nil {
			t.Errorf("ParseDataType(%q): %v", s, err)
		}
	}
	if _, err := ParseDataType("float8"); err == nil {
		t.Error("ParseDataType(float8) accepted")
	}
	for _, s := range []string{"avg", "premulsum", "SUM"} {
		if _, err := ParseRedOp(s); err != nil {
			t.Errorf("ParseRedOp(%q): %v", s, err)
		}
	}
	if _, err := ParseRedOp("mean"); err == nil {
		t.Error("ParseRedOp(mean) accepted")
	}
}

// Windowed groups: windows cover every chunk exactly once, are no longer
// than Window and no longer than a chunk needs, and each block's region of
// a window is the same in every window (the last, partial one included),
// so a block's slot-free handshake covers everything it writes.
func TestWindowParts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		esize := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "esize")
		g := Group{Blocks: rapid.IntRange(1, 9).Draw(t, "blocks"), NChunks: rapid.IntRange(1, 8).Draw(t, "chunks"),
			Window: 16 * rapid.Int64Range(1, 64).Draw(t, "window16"), Pipeline: rapid.IntRange(0, MaxPipeline).Draw(t, "pipeline")}
		count := rapid.Int64Range(0, 1<<16).Draw(t, "count")
		nwin := g.Windows(count, esize)
		we := g.WindowElems(count, esize)
		if we > g.Window/int64(esize) {
			t.Fatalf("window of %d elements, more than Window (%d bytes)", we, g.Window)
		}
		// A chunk under one Window is one window of its own length, so all
		// blocks share it; a larger one takes enough windows of at most
		// Window, and at least Pipeline.
		_, per := ChunkRange(count, esize, 0, g.NChunks)
		full := g.Window / int64(esize)
		switch {
		case per < full && (nwin != 1 || we != max(AlignElems(esize), roundUp(per, AlignElems(esize)))):
			t.Fatalf("chunk of %d elements under the window (%d): %d windows of %d elements", per, full, nwin, we)
		case nwin > max(1, ceilDiv(per, full), int64(g.Pipeline)):
			t.Fatalf("chunk of %d elements, windows of at most %d: %d windows, more than needed or pipelined (%d)", per, full, nwin, g.Pipeline)
		case per >= full && nwin < int64(g.Pipeline):
			t.Fatalf("chunk of %d elements (a window: %d): %d windows, want at least %d", per, full, nwin, g.Pipeline)
		}
		for c := 0; c < g.NChunks; c++ {
			off, l := ChunkRange(count, esize, c, g.NChunks)
			covered := int64(0)
			for w := int64(0); w < nwin; w++ {
				for p := 0; p < g.Blocks; p++ {
					start, o, n := g.WindowPart(count, off, l, esize, w, p, g.Blocks)
					if n == 0 {
						continue
					}
					if o < off || o+n > off+l || o < start || o+n > start+we {
						t.Fatalf("chunk %d window %d part %d: [%d,%d) outside chunk [%d,%d) or window at %d", c, w, p, o, o+n, off, off+l, start)
					}
					// The region within the window is the part's nominal one.
					_, nominal, _ := g.WindowPart(count, 0, nwin*we, esize, 0, p, g.Blocks)
					po, pl := split(we, AlignElems(esize), p, g.Blocks)
					if o-start < po || o-start+n > po+pl || nominal != po {
						t.Fatalf("part %d of window %d at +%d..+%d, its region is +%d..+%d", p, w, o-start, o-start+n, po, po+pl)
					}
					covered += n
				}
			}
			if covered != l {
				t.Fatalf("chunk %d: windows cover %d of %d elements", c, covered, l)
			}
		}
	})
}

// TestNetSlotValidate: a plan with split windows (Plan.NetSlot) has its
// port channels write network slots and carry the Net mark, its memory
// channels write device slots; the slot bound and the Net mark of a
// memory channel are checked too.
func TestNetSlotValidate(t *testing.T) {
	split := func(mut func(p *Plan)) error {
		p := &Plan{Name: "split", Rank: 0, NRanks: 3, Threads: 64, Scratch: Simple, ScratchSlots: 3, NetSlot: 1, Semaphores: 1,
			Channels: []Channel{{Peer: 1}, {Peer: 2, Port: true, Net: true}}}
		put := PortPut(1, All, 0, RS(1, 1), L(Input))
		store := Transfer(All, 0, []Ref{RS(0, 0)}, L(Input))
		read := Transfer(All, 0, []Ref{L(Output)}, LS(2), LS(0))
		p.Groups = []Group{{Blocks: 1, Ops: []Op{put, store, read}}}
		if mut != nil {
			mut(p)
		}
		return p.Validate()
	}
	if err := split(nil); err != nil {
		t.Fatalf("a well-formed split plan: %v", err)
	}
	if p := (&Plan{NetSlot: 1, Channels: []Channel{{Peer: 1}, {Peer: 2, Port: true}}}); p.NetChannels() != 2 {
		t.Errorf("NetChannels %b, want 10 (the port channel)", p.NetChannels())
	}
	if p := (&Plan{NetSlot: 2}); !p.NetScratchSlot(2) || p.NetScratchSlot(1) {
		t.Error("NetScratchSlot: slots from NetSlot on are network windows")
	}
	for name, mut := range map[string]func(p *Plan){
		"port channel writes a device slot":    func(p *Plan) { p.Groups[0].Ops[0].Dsts[0].Slot = 0 },
		"memory channel writes a network slot": func(p *Plan) { p.Groups[0].Ops[1].Dsts[0].Slot = 2 },
		"port channel without Net":             func(p *Plan) { p.Channels[1].Net = false },
		"Net on a memory channel":              func(p *Plan) { p.Channels[0].Net = true },
		"NetSlot past the slots":               func(p *Plan) { p.NetSlot = 3 },
		"negative NetSlot":                     func(p *Plan) { p.NetSlot = -1 },
	} {
		if err := split(mut); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("%s: %v, want ErrInvalidPlan", name, err)
		}
	}
	// The network windows hold only the network slots, every part at the
	// scratch's stride; a split plan's bindings need them.
	lay := &Plan{Name: "split", NRanks: 2, ScratchSlots: 4, NetSlot: 3, Semaphores: 1}
	const capacity = 4096
	stride := lay.SlotStride(capacity)
	if got := lay.NetScratchBytes(capacity); got != stride {
		t.Errorf("NetScratchBytes %d, want one slot's stride %d", got, stride)
	}
	if got := lay.HeaderOffset(capacity, 0, 3); got != 0 {
		t.Errorf("network slot 3 at %d of its region, want 0", got)
	}
	if got := lay.HeaderOffset(capacity, 0, 2); got != 2*stride {
		t.Errorf("device slot 2 at %d, want %d", got, 2*stride)
	}
	if (&Plan{}).NetScratchBytes(capacity) != 0 {
		t.Error("a plan that does not split has no network scratch")
	}
	if msg := (&Bindings{Scratch: 0x10, ScratchBytes: capacity, Semaphores: 0x20}).CheckNetRegions(lay); msg == "" {
		t.Error("a split plan's bindings without network windows pass CheckNetRegions")
	}
	// The packed parameters carry the network windows, or the device
	// ones again where the bindings leave them 0, and the channel mask.
	p := &Plan{Name: "split", Rank: 0, NRanks: 3, Threads: 64, ScratchSlots: 2, NetSlot: 1, Semaphores: 1, Channels: []Channel{{Peer: 1}, {Peer: 2, Port: true, Net: true}}}
	whole := *p
	whole.NetSlot = 0
	for _, c := range []struct {
		p    *Plan
		b    Bindings
		want [3]uint64
	}{
		{p, Bindings{Scratch: 0x10, ScratchBytes: 64, Semaphores: 0x20, NetScratch: 0x30, NetSemaphores: 0x40}, [3]uint64{0x30, 0x40, 2}},
		{&whole, Bindings{Scratch: 0x10, ScratchBytes: 64, Semaphores: 0x20}, [3]uint64{0x10, 0x20, 0}},
	} {
		if msg := c.b.CheckNetRegions(c.p); msg != "" {
			t.Errorf("%s: %s", c.p.Name, msg)
		}
		c.b.Peers = make([]PeerBinding, 2)
		params, err := PackParams(c.p, &c.b, &Args{})
		if err != nil {
			t.Fatal(err)
		}
		var got [3]uint64
		for i := range got {
			got[i] = binary.LittleEndian.Uint64(params[(6+i)*8:])
		}
		if got != c.want {
			t.Errorf("bindings %+v: network words %#x, want %#x", c.b, got, c.want)
		}
	}
}
