package plan

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// slotChunkPlan is a two-rank LL plan whose one slot receives chunk 1 of
// 2 from the peer, and which reads chunk 0 of its own slot.
func slotChunkPlan(proto Protocol, chunks int, ops ...Op) *Plan {
	if ops == nil {
		ops = []Op{Transfer(1, 2, []Ref{RS(0, 0)}, L(Input)), Transfer(0, 2, []Ref{L(Output)}, LS(0))}
	}
	return &Plan{Name: "slot-chunks", Rank: 0, NRanks: 2, Channels: []Channel{{Peer: 1}}, Threads: 64,
		Scratch: proto, ScratchSlots: 1, SlotChunks: chunks, MaxBytes: 1 << 20, Groups: []Group{{Blocks: 2, Ops: ops}}}
}

// A plan with slot chunks sizes each slot for its largest chunk (the
// first), in every protocol, and is refused where a slot would hold two
// chunks, a transfer is not one of its chunks, or the plan has no
// packets, windows or spans.
func TestSlotChunks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		proto := rapid.SampledFrom([]Protocol{LL16, LL8, LL128}).Draw(t, "proto")
		k := rapid.IntRange(1, 8).Draw(t, "chunks")
		count := rapid.Int64Range(1, 1<<22).Draw(t, "count")
		es := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "esize")
		whole := slotChunkPlan(proto, 0)
		p := slotChunkPlan(proto, k, Transfer(0, k, []Ref{RS(0, 0)}, L(Input)), Transfer(0, k, []Ref{L(Output)}, LS(0)))
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		_, first := p.ChunkRange(count, es, 0, k)
		if got, want := p.SlotBytes(count, es), whole.SlotBytes(first, es); got != want {
			t.Fatalf("%v, %d chunks of %d × %d B: slot of %d bytes, want %d (one chunk of %d)", proto, k, count, es, got, want, first)
		}
		if k > 1 && whole.SlotBytes(count, es) < p.SlotBytes(count, es) {
			t.Fatalf("%v: a chunk's slot (%d B) larger than the message's (%d B)", proto, p.SlotBytes(count, es), whole.SlotBytes(count, es))
		}
	})
	for _, tc := range []struct {
		name string
		p    *Plan
		want string
	}{
		{"two chunks in one slot", slotChunkPlan(LL128, 2, Transfer(0, 2, []Ref{LS(0)}, L(Input)), Transfer(1, 2, []Ref{L(Output)}, LS(0))), "holds chunks 0 and 1"},
		{"a transfer of another chunking", slotChunkPlan(LL16, 2, Transfer(0, 4, []Ref{RS(0, 0)}, L(Input))), "want one of the plan's 2 slot chunks"},
		{"the whole message", slotChunkPlan(LL16, 2, Transfer(All, 1, []Ref{RS(0, 0)}, L(Input))), "want one of the plan's 2 slot chunks"},
		{"no packets", slotChunkPlan(Simple, 2), "without LL packets"},
		{"negative", slotChunkPlan(LL16, -1), "-1 slot chunks"},
	} {
		err := tc.p.Validate()
		if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidPlan naming %q", tc.name, err, tc.want)
		}
	}
	// The two-phase LL AllReduce's second slot per peer names its peer's
	// channel in failures.
	p := slotChunkPlan(LL16, 2)
	p.ScratchSlots = 2
	for s, want := range map[int]int{0: 0, 1: 0, 2: -1, -1: -1} {
		if got := p.SlotChannel(s); got != want {
			t.Errorf("SlotChannel(%d) = %d, want %d", s, got, want)
		}
	}
}
