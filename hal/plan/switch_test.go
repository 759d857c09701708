package plan

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// switchPlan is rank 0 of 2 of a windowed NVLS-style AllReduce: copy in,
// barrier, reduce-store chunk 0 through the switch, barrier, copy out.
func switchPlan() *Plan {
	in := []Op{Transfer(0, 2, []Ref{SW(0)}, L(Input)), Transfer(1, 2, []Ref{SW(1)}, L(Input))}
	red := Transfer(0, 2, []Ref{MC(0)}, MC(0))
	red.Combine = true
	out := []Op{Transfer(0, 2, []Ref{L(Output)}, SW(0)), Transfer(1, 2, []Ref{L(Output)}, SW(1))}
	ops := append(append(append(append(in, Signal(0, 0), Wait(0, 0)), red), Signal(0, 1), Wait(0, 1)), out...)
	return &Plan{Name: "nvls", Rank: 0, NRanks: 2, Channels: []Channel{{Peer: 1}}, Threads: 64, Semaphores: 2, SwitchSlots: 2,
		Groups: []Group{{Blocks: 1, Window: 4096, NChunks: 2, Ops: ops}}}
}

func TestSwitchValidate(t *testing.T) {
	red := func(p *Plan) *Op { return &p.Groups[0].Ops[4] }
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"ok", func(*Plan) {}, ""},
		{"no switch buffer", func(p *Plan) { p.SwitchSlots = 0 }, "has no switch buffer"},
		{"slot", func(p *Plan) { red(p).Dsts[0].Slot = 2 }, "switch slot 2 of 2"},
		{"multicast source and another", func(p *Plan) { red(p).Srcs = append(red(p).Srcs, L(Input)) }, "only source"},
		{"multicast source second", func(p *Plan) { red(p).Srcs = []Ref{L(Input), MC(0)} }, "only source"},
		{"not combined", func(p *Plan) { red(p).Combine = false }, "mark the transfer Combine"},
		{"two multicast destinations", func(p *Plan) { red(p).Dsts = []Ref{MC(0), MC(1)} }, "more than one multicast destination"},
		{"multicast input", func(p *Plan) { red(p).Srcs = []Ref{{Buf: Input, Chan: Multicast}} }, "only the switch buffer has a multicast view"},
		{"peer's switch copy", func(p *Plan) { red(p).Dsts = []Ref{{Buf: Switch, Chan: 0}} }, "through the multicast view"},
		{"segment", func(p *Plan) { red(p).Dsts = []Ref{MC(0).At(1)} }, "segment 1"},
		{"unbounded", func(p *Plan) { p.Groups[0].Window, p.Groups[0].NChunks = 0, 0 }, "bounded message size"},
		{"after ops", func(p *Plan) {
			p.Groups[0].After = []Op{Transfer(All, 0, []Ref{L(Output)}, SW(0))}
		}, "windowed groups only"},
		{"port", func(p *Plan) {
			p.Channels[0].Port = true
			o := PortPut(0, 0, 2, MC(0), L(Input))
			p.Groups[0].Ops[0] = o
		}, "does not reach the multicast view"},
		{"slots", func(p *Plan) { p.SwitchSlots = MaxOperands + 1 }, "switch slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := switchPlan()
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
	// LL packets do not go through the switch.
	p := llPlan()
	p.SwitchSlots, p.MaxBytes = 1, 1<<10
	p.Groups[0].Ops[1] = Transfer(All, 0, []Ref{MC(0)}, LS(0))
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not LL packets") {
		t.Fatalf("Validate of a packet source stored through the switch = %v", err)
	}
}

func TestSwitchOpNames(t *testing.T) {
	p := switchPlan()
	var got []string
	for _, o := range p.Groups[0].Ops {
		if o.Kind == OpTransfer {
			got = append(got, p.OpName(o))
		}
	}
	got = append(got, Transfer(All, 0, []Ref{L(Output)}, MC(1)).Name(), Transfer(All, 0, []Ref{MC(1), L(Output)}, L(Input)).Name())
	want := []string{"copy", "copy", "switchReduceStore", "copy", "copy", "switchReduce", "switchStore"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
	if s := p.String(); !strings.Contains(s, "switchReduceStore[chunk 0/2] multicast.switch[0] <- multicast.switch[0]") || !strings.Contains(s, "switch 2 slots") {
		t.Fatalf("plan dump lacks the switch transfer:\n%s", s)
	}
	if !p.SwitchReduces() || !p.HasSwitch() {
		t.Fatal("SwitchReduces or HasSwitch is false for a plan that load-reduces")
	}
}

// SwitchSupports is PTX multimem.ld_reduce's set on sm_90 (NCCL's
// ncclNvlsSupported), plus integer Avg.
func TestSwitchSupports(t *testing.T) {
	var got []string
	for _, dt := range DataTypes {
		for _, op := range RedOps {
			if SwitchSupports(dt, op) {
				got = append(got, dt.String()+"/"+op.String())
			}
		}
	}
	want := []string{
		"float/sum", "half/sum", "half/max", "half/min", "bfloat16/sum", "bfloat16/max", "bfloat16/min",
		"int32/sum", "int32/max", "int32/min", "int32/avg", "int64/sum", "int64/max", "int64/min", "int64/avg",
		"uint32/sum", "uint32/max", "uint32/min", "uint32/avg", "uint64/sum", "uint64/max", "uint64/min", "uint64/avg", "double/sum",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("SwitchSupports (-want +got):\n%s", d)
	}
}

// The switch layout: windows alternate halves of window-sized slots; a plan
// without windows has one slot per SwitchSlots of its largest message.
func TestSwitchLayout(t *testing.T) {
	p := switchPlan()
	capacity := p.SwitchCapacity()
	if capacity != 2*2*4096 || p.SwitchBytes(1<<30, 4) != capacity {
		t.Fatalf("capacity %d, bytes for 1 GiB %d; want %d for any count", capacity, p.SwitchBytes(1<<30, 4), 2*2*4096)
	}
	if got := p.WindowSwitchOffset(capacity, 4, 0, 1, 3); got != 4096+12 {
		t.Fatalf("window 0 slot 1 element 3 at %d, want %d", got, 4096+12)
	}
	if got := p.WindowSwitchOffset(capacity, 4, 3, 0, 0); got != 2*4096 {
		t.Fatalf("window 3 slot 0 at %d, want %d (second half)", got, 2*4096)
	}
	q := switchPlan()
	q.Groups[0].Window, q.Groups[0].NChunks, q.MaxBytes = 0, 0, 1000
	for i := range q.Groups[0].Ops {
		q.Groups[0].Ops[i].SkipFirst, q.Groups[0].Ops[i].SkipLast = 0, 0
	}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if c := q.SwitchCapacity(); c != 2*1008 || q.SwitchBytes(5, 4) != 2*32 {
		t.Fatalf("capacity %d (want %d), bytes for 5 floats %d (want 64)", c, 2*1008, q.SwitchBytes(5, 4))
	}
	if got := q.SwitchOffset(q.SwitchCapacity(), 8, 1, 2); got != 1008+16 {
		t.Fatalf("slot 1 element 2 at %d, want %d", got, 1008+16)
	}
}

func TestEmitCUDASwitch(t *testing.T) {
	p := switchPlan()
	src, err := EmitCUDA(p, Float32, Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`#include "weft_switch.h"`, "static_assert(sizeof(weft_params) == 1824", "switch_fence();",
		"xfer_switch<DT, OP, 0, 0, 4, CMB, true, true>(c, (const char*)wswitch_at<ES>(c, P.switch_mc, 0, w, off - wstart), s, d, (char*)wswitch_at<ES>(c, P.switch_mc, 0, w, off - wstart), len)",
		"(char*)wswitch_at<ES>(c, P.switch_local, 1, w, off - wstart)"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q:\n%s", want, src)
		}
	}
	if _, err := EmitCUDA(p, Float32, Max); !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), "cannot reduce") {
		t.Errorf("EmitCUDA for float max through the switch = %v, want a refusal", err)
	}
	// A store-only plan serves every type.
	st := &Plan{Name: "st", Rank: 0, NRanks: 1, Threads: 32, SwitchSlots: 1, MaxBytes: 64,
		Groups: []Group{{Blocks: 1, Ops: []Op{Transfer(All, 0, []Ref{MC(0), L(Output)}, L(Input))}}}}
	src, err = EmitCUDA(st, Int8, Prod)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "xfer_switch<DT, OP, 1, 1, 4, 0, false, true>(c, nullptr, s, d, (char*)switch_at<ES>(c, P.switch_mc, 0, off), len)") {
		t.Errorf("store-only source:\n%s", src)
	}
	if src, _ := EmitCUDA(llPlan(), Float32, Sum); strings.Contains(src, "weft_switch.h") {
		t.Error("a plan without a switch buffer includes weft_switch.h")
	}
	b := &Bindings{Peers: make([]PeerBinding, 1), Switch: 0x1000, Multicast: 0x2000, SwitchBytes: 16384}
	params, err := PackParams(p, b, &Args{Count: 7})
	if err != nil {
		t.Fatal(err)
	}
	at := (9 + 2*MaxPeers + 3 + 2*MaxPeers + 1 + 2 + 2 + 4*MaxGroupArgs + 1) * 8
	var got [4]uint64
	for i := range got {
		got[i] = binary.LittleEndian.Uint64(params[at+8*i:])
	}
	if got != [4]uint64{0x1000, 0x2000, 16384, 2} {
		t.Fatalf("switch words %#x, want local, multicast, capacity, slots", got)
	}
}
