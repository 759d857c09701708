package plan

import (
	"errors"
	"testing"
)

// TestSpanRange: in a group with a span, the parts of every count cover
// [0, count) exactly once, and a part never reaches elements that another
// part owns at any other count ≤ the span (so a writer block that waits
// only for its matching reader block never overwrites what another reader
// block still reads). PartRange, which splits the count, breaks the
// second property; the test shows it does.
func TestSpanRange(t *testing.T) {
	owner := func(f func(count int64, part int) (int64, int64), count int64, parts int) []int {
		own := make([]int, count)
		for i := range own {
			own[i] = -1
		}
		for p := 0; p < parts; p++ {
			off, n := f(count, p)
			for e := off; e < off+n; e++ {
				if own[e] != -1 {
					t.Fatalf("count %d: element %d in parts %d and %d", count, e, own[e], p)
				}
				own[e] = p
			}
		}
		for e, p := range own {
			if p == -1 {
				t.Fatalf("count %d: element %d in no part", count, e)
			}
		}
		return own
	}
	for _, esize := range []int{1, 2, 4, 8} {
		for _, tc := range []struct {
			span  int64
			parts int
		}{{16 << 10, 2}, {128 << 10, 16}, {1000, 3}, {64, 7}} {
			span := func(count int64, part int) (int64, int64) {
				return SpanRange(count, esize, tc.span, part, tc.parts)
			}
			maxCount := tc.span / int64(esize)
			counts := []int64{0, 1, 2, 7, 8, 9, 15, 16, 17, maxCount / 3, maxCount/2 + 1, maxCount - 1, maxCount}
			full := owner(span, maxCount, tc.parts)
			for _, c := range counts {
				if c > maxCount {
					continue
				}
				own := owner(span, c, tc.parts)
				for e := range own {
					if own[e] != full[e] {
						t.Fatalf("esize %d, span %d, %d parts: element %d of count %d in part %d, of count %d in part %d",
							esize, tc.span, tc.parts, e, c, own[e], maxCount, full[e])
					}
				}
			}
			// Beyond the span, the last part takes the rest.
			if off, n := SpanRange(maxCount+100, esize, tc.span, tc.parts-1, tc.parts); off+n != maxCount+100 {
				t.Errorf("esize %d, span %d: last part ends at %d, want %d", esize, tc.span, off+n, maxCount+100)
			}
		}
	}
	// Without a span, two counts give an element to different parts.
	part := func(count int64, p int) (int64, int64) { return PartRange(0, count, 1, p, 2) }
	if a, b := owner(part, 100, 2), owner(part, 1000, 2); a[70] == b[70] {
		t.Errorf("PartRange gives element 70 to part %d at 100 and 1000 elements; the test's premise is wrong", a[70])
	}
}

// TestSpanValidate: a span belongs to a group without windows whose
// transfers move whole ranges.
func TestSpanValidate(t *testing.T) {
	base := func() *Plan {
		return &Plan{Name: "span", NRanks: 2, Channels: []Channel{{Peer: 1}}, Threads: 32, Scratch: LL16, ScratchSlots: 1, MaxBytes: 1 << 10,
			Groups: []Group{{Blocks: 2, Span: 1 << 10, Ops: []Op{Transfer(All, 0, []Ref{RS(0, 0)}, L(Input))}}}}
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("valid plan: %v", err)
	}
	for name, edit := range map[string]func(p *Plan){
		"negative": func(p *Plan) { p.Groups[0].Span = -1 },
		"windowed": func(p *Plan) {
			p.Scratch = Simple
			p.Groups[0].Window, p.Groups[0].NChunks = 1024, 1
			p.Groups[0].Ops[0].Chunk, p.Groups[0].Ops[0].NChunks = 0, 1
		},
		"chunked": func(p *Plan) { p.Groups[0].Ops[0].Chunk, p.Groups[0].Ops[0].NChunks = 0, 2 },
	} {
		p := base()
		edit(p)
		if err := p.Validate(); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("%s span: Validate = %v, want ErrInvalidPlan", name, err)
		}
	}
}
