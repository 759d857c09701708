package plan

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// windowedPlan is a one-channel windowed point-to-point pair of depth d:
// a writer group that waits for the release of window w−d and signals
// each window, and a reader group that copies each window out and
// releases it (the last d windows unreleased).
func windowedPlan(d int) *Plan {
	skip := func(o Op, first, last int) Op { o.SkipFirst, o.SkipLast = first, last; return o }
	put := Transfer(All, 1, []Ref{RS(0, 0)}, L(Input))
	get := Transfer(All, 1, []Ref{L(Output)}, LS(0))
	put.Chunk, get.Chunk = 0, 0
	k := max(d, 2) // WindowDepth 0 is 2
	return &Plan{
		Name: "depth", NRanks: 2, Channels: []Channel{{Peer: 1}}, Threads: 64, Semaphores: 2,
		Scratch: Simple, ScratchSlots: 1, WindowDepth: d,
		Groups: []Group{
			{Blocks: 1, Window: 4096, NChunks: 1, Ops: []Op{skip(Wait(0, 0), k, 0), put, Signal(0, 1)}},
			{Blocks: 1, Window: 4096, NChunks: 1, Ops: []Op{Wait(0, 1), get, skip(Signal(0, 0), 0, k)}},
		},
	}
}

// A deeper plan's scratch holds WindowDepth windows per slot, window w
// lands in part w mod depth, and the kernel addresses the same parts.
func TestWindowDepthLayout(t *testing.T) {
	for _, d := range []int{0, 2, 5, MaxWindowDepth} {
		p := windowedPlan(d)
		if err := p.Validate(); err != nil {
			t.Fatalf("depth %d: %v", d, err)
		}
		parts := int64(max(d, 2))
		if got := p.Depth(); got != parts {
			t.Fatalf("Depth() = %d with WindowDepth %d, want %d", got, d, parts)
		}
		capacity := p.ScratchBytes(1<<20, 4)
		if capacity != parts*4096 {
			t.Fatalf("depth %d: scratch %d bytes, want %d", d, capacity, parts*4096)
		}
		seen := map[int64]int64{}
		for w := int64(0); w < 3*parts; w++ {
			off := p.WindowScratchOffset(capacity, 4, w, 0, 0)
			if off < 0 || off+4096 > capacity {
				t.Fatalf("depth %d: window %d at %d, outside %d bytes", d, w, off, capacity)
			}
			if prev, ok := seen[off]; ok && w-prev != parts {
				t.Fatalf("depth %d: window %d reuses window %d's part (want %d windows apart)", d, w, prev, parts)
			}
			seen[off] = w
		}
		if int64(len(seen)) != parts {
			t.Fatalf("depth %d: %d distinct parts, want %d", d, len(seen), parts)
		}
		src, err := EmitCUDA(p, Float32, Sum)
		if err != nil {
			t.Fatal(err)
		}
		want := "wslot_at<ES>(c, P.peer_scratch[0], 0, w, off - wstart)"
		if parts != 2 {
			want = "wslot_at<ES, " + itoa(parts) + ">(c, P.peer_scratch[0], 0, w, off - wstart)"
		}
		if !strings.Contains(src, want) || !strings.Contains(src, "if (w >= "+itoa(parts)+" && w + 0 < nwin)") {
			t.Errorf("depth %d: generated source lacks %q or the writer's skip of %d windows:\n%s", d, want, parts, src)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestWindowDepthValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"one", func(p *Plan) { p.WindowDepth = 1 }, "window depth 1"},
		{"too deep", func(p *Plan) { p.WindowDepth = MaxWindowDepth + 1 }, "window depth 17"},
		{"no windows", func(p *Plan) {
			for i := range p.Groups {
				p.Groups[i].Window = 0
				for j := range p.Groups[i].Ops {
					p.Groups[i].Ops[j].SkipFirst, p.Groups[i].Ops[j].SkipLast = 0, 0
				}
			}
		}, "in a windowed or LL plan"},
		{"rolling", func(p *Plan) {
			p.WindowDepth = 3
			p.Groups[1].Rolling, p.Groups[1].RollChan, p.Groups[1].RollSem = true, 0, 1
		}, "rolling group"},
		{"switch", func(p *Plan) { p.SwitchSlots = 1 }, "switch buffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := windowedPlan(4)
			tc.edit(p)
			if err := p.Validate(); !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalidPlan containing %q", err, tc.want)
			}
		})
	}
}

// A rolling group of a plan four windows deep takes the four positions in
// turn across launches, and its tags carry the position in two bits.
func TestRollingDepthTags(t *testing.T) {
	p := windowedPlan(4)
	p.Groups[1].Rolling, p.Groups[1].RollChan, p.Groups[1].RollSem = true, 0, 1
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.RollBits() != 2 {
		t.Fatalf("RollBits = %d at depth 4, want 2", p.RollBits())
	}
	src, err := EmitCUDA(p, Float32, Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"c.rollbits = 2;", "c.tag = (c.count << 2) | ((wbase + w) & 3);", "wslot_at<ES, 4>(c, P.scratch, 0, wbase + w, off - wstart)"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q:\n%s", want, src)
		}
	}
}

// An LL plan's scratch with WindowDepth d has d parts that launches take
// in turn (launch k: part k mod d), its headers and packets move with
// them, and the kernel addresses the same parts (slot_base<PROTO, d>).
func TestLLDepthLayout(t *testing.T) {
	for _, d := range []int{0, 2, 4, 8} {
		p := &Plan{Name: "ll-depth", NRanks: 2, Channels: []Channel{{Peer: 1}}, Threads: 64, Semaphores: 1,
			Scratch: LL16, ScratchSlots: 2, WindowDepth: d, MaxBytes: 4096,
			Groups: []Group{{Blocks: 1, Ops: []Op{Transfer(All, 0, []Ref{RS(0, 0)}, L(Input)), Transfer(All, 0, []Ref{L(Output)}, LS(0)), Signal(0, 0)}}}}
		if err := p.Validate(); err != nil {
			t.Fatalf("depth %d: %v", d, err)
		}
		parts := int64(max(d, 2))
		capacity := p.ScratchBytes(1024, 4)
		if want := parts * 2 * p.SlotBytes(1024, 4); capacity != want {
			t.Fatalf("depth %d: scratch %d bytes, want %d", d, capacity, want)
		}
		stride := p.SlotStride(capacity)
		for k := uint64(0); k < uint64(3*parts); k++ {
			for s := 0; s < 2; s++ {
				h := p.HeaderOffset(capacity, k, s)
				if want := (int64(k)%parts*2 + int64(s)) * stride; h != want {
					t.Fatalf("depth %d: launch %d slot %d header at %d, want %d", d, k, s, h, want)
				}
				if e := p.ScratchOffset(capacity, 4, k, s, 1023); e+16 > h+stride {
					t.Fatalf("depth %d: launch %d slot %d: last packet at %d, past the slot's end %d", d, k, s, e, h+stride)
				}
			}
		}
		src, err := EmitCUDA(p, Float32, Sum)
		if err != nil {
			t.Fatal(err)
		}
		base, at := "slot_base<PROTO>(", "slot_at<PROTO, ES>("
		if parts != 2 {
			base, at = "slot_base<PROTO, "+itoa(parts)+">(", "slot_at<PROTO, ES, "+itoa(parts)+">("
		}
		if !strings.Contains(src, base) || !strings.Contains(src, at) {
			t.Errorf("depth %d: generated source lacks %q or %q:\n%s", d, base, at, src)
		}
	}
}
