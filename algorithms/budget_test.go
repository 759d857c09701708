package algorithms_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/algorithms"
)

// fitted is every choice of every collective (and the zero-copy AllReduce)
// of rank `rank` under budget b.
func fitted(t *testing.T, c algorithms.Config, b algorithms.BlockBudget) (map[string][]algorithms.Choice, []algorithms.Clamp) {
	t.Helper()
	c.Budget = b
	out := map[string][]algorithms.Choice{}
	var clamps []algorithms.Clamp
	for _, coll := range algorithms.Collectives {
		cs, cl, err := algorithms.FitBlocks(c, coll, c.NRanks-1, false)
		if err != nil {
			t.Fatalf("%v, %v: %v", coll, b, err)
		}
		out[coll.String()] = cs
		clamps = append(clamps, cl...)
	}
	cs, cl, err := algorithms.FitBlocks(c, algorithms.AllReduce, 0, true)
	if err != nil {
		t.Fatalf("zero-copy AllReduce, %v: %v", b, err)
	}
	out["zero-copy"] = cs
	return out, append(clamps, cl...)
}

func names(cs []algorithms.Choice) []string {
	var s []string
	for _, ch := range cs {
		s = append(s, fmt.Sprintf("%s≤%d", ch.Plan.Name, ch.MaxBytes))
	}
	return s
}

// TestFitBlocksMax: under a maximum every plan of every collective holds
// at most that many blocks, or is reported as clamped at the least it can
// hold (one block per group); every rank fits the same shapes (the plans'
// names carry them); plans with blocks to spare reach the budget.
func TestFitBlocksMax(t *testing.T) {
	for _, gpu := range []bool{true, false} {
		for _, n := range []int{2, 3, 8} {
			for _, max := range []int{1, 3, 4, 16, 64} {
				t.Run(fmt.Sprintf("gpu=%v/n%d/max%d", gpu, n, max), func(t *testing.T) {
					var first map[string][]algorithms.Choice
					for rank := 0; rank < n; rank++ {
						c := algorithms.DefaultConfig(rank, n, 132, gpu)
						got, clamps := fitted(t, c, algorithms.BlockBudget{Max: max, SMs: 132})
						minimum := map[string]int{}
						for _, cl := range clamps {
							if cl.Max != max || cl.Blocks <= max {
								t.Errorf("clamp %+v: want one above the budget %d", cl, max)
							}
							minimum[cl.Plan] = cl.Blocks
						}
						for coll, cs := range got {
							for _, ch := range cs {
								b := ch.Plan.Blocks()
								if m, ok := minimum[ch.Plan.Name]; ok {
									// Clamped: every group is down to one block.
									for gi, g := range ch.Plan.Groups {
										if g.Blocks != 1 {
											t.Errorf("%s: clamped plan %s group %d has %d blocks, want 1", coll, ch.Plan.Name, gi, g.Blocks)
										}
									}
									if b > m {
										t.Errorf("%s: plan %s holds %d blocks, above its reported minimum %d", coll, ch.Plan.Name, b, m)
									}
								} else if b > max {
									t.Errorf("%s: plan %s holds %d blocks, budget %d", coll, ch.Plan.Name, b, max)
								}
							}
						}
						if rank == 0 {
							first = got
							continue
						}
						for coll, cs := range got {
							if d := cmp.Diff(names(first[coll]), names(cs)); d != "" {
								t.Errorf("%s: rank %d fitted other plans than rank 0 (-0 +%d):\n%s", coll, rank, rank, d)
							}
						}
					}
				})
			}
		}
	}
	// Plans with blocks to spare use the budget: the windowed AllGather
	// (a send and a receive group) of 2 GPUs holds exactly 16 of 16, with
	// 1024 threads per block.
	c := algorithms.DefaultConfig(0, 2, 132, true)
	got, _ := fitted(t, c, algorithms.BlockBudget{Max: 16, SMs: 132})
	hb := got["all_gather"][len(got["all_gather"])-1].Plan
	if hb.Blocks() != 16 || hb.Threads != 1024 {
		t.Errorf("windowed AllGather under 16 blocks: %s holds %d × %d threads, want 16 × 1024", hb.Name, hb.Blocks(), hb.Threads)
	}
	// The 128 × 512, unroll 2 zero-copy 2PA becomes 16 × 1024, unroll 4.
	zc := got["zero-copy"]
	if last := zc[len(zc)-1].Plan; last.Blocks() != 16 || last.Threads != 1024 || last.Unroll != 4 {
		t.Errorf("large zero-copy AllReduce under 16 blocks: %s (%d blocks, %d threads, unroll %d), want 16 × 1024, unroll 4", last.Name, last.Blocks(), last.Threads, last.Unroll)
	}
}

// TestFitBlocksKeepsSizes: a budget changes blocks, never which sizes a
// choice serves: every size selects a choice whose plan serves it, and a
// budget above every plan's blocks changes nothing.
func TestFitBlocksKeepsSizes(t *testing.T) {
	c := algorithms.DefaultConfig(0, 2, 132, true)
	base, _ := fitted(t, c, algorithms.BlockBudget{})
	wide, clamps := fitted(t, c, algorithms.BlockBudget{Max: 1 << 20, SMs: 132})
	if len(clamps) != 0 {
		t.Errorf("clamps under a budget of 2^20 blocks: %v", clamps)
	}
	for coll := range base {
		if d := cmp.Diff(names(base[coll]), names(wide[coll])); d != "" {
			t.Errorf("%s: a budget above every plan changed the plans (-none +budget):\n%s", coll, d)
		}
	}
	small, _ := fitted(t, c, algorithms.BlockBudget{Max: 4, SMs: 132})
	for coll, cs := range small {
		for _, ch := range cs {
			if ch.Plan.MaxBytes > 0 && (ch.MaxBytes == 0 || ch.MaxBytes > ch.Plan.MaxBytes) {
				t.Errorf("%s: %s is chosen up to %d bytes (0: unbounded), its plan takes up to %d", coll, ch.Plan.Name, ch.MaxBytes, ch.Plan.MaxBytes)
			}
		}
		for _, bytes := range []int64{8, 64 << 10, 300 << 10, 3 << 20, 1 << 30} {
			b, f := base[coll][algorithms.Select(base[coll], bytes)], cs[algorithms.Select(cs, bytes)]
			if b.Plan.Scratch != f.Plan.Scratch {
				t.Errorf("%s: %d bytes take %s (%v) by default but %s (%v) under 4 blocks", coll, bytes, b.Plan.Name, b.Plan.Scratch, f.Plan.Name, f.Plan.Scratch)
			}
		}
	}
}

// TestFitBlocksMin: a minimum raises the plans with fewer blocks where
// their shapes grow, within the maximum and the SMs; without a known SM
// count nothing is raised.
func TestFitBlocksMin(t *testing.T) {
	c := algorithms.DefaultConfig(0, 2, 132, true)
	cases := []struct {
		b    algorithms.BlockBudget
		coll string
		want int // blocks of the smallest-message plan
	}{
		{algorithms.BlockBudget{Min: 16, SMs: 132}, "all_gather", 16},          // 8 → 16
		{algorithms.BlockBudget{Min: 12, Max: 12, SMs: 132}, "all_gather", 12}, // 8 → 12
		{algorithms.BlockBudget{Min: 16}, "all_gather", 8},                     // SMs unknown: kept
		{algorithms.BlockBudget{Min: 4, SMs: 132}, "all_gather", 8},            // already above
		{algorithms.BlockBudget{Min: 200, SMs: 132}, "all_gather", 132},        // never past the SMs
	}
	for _, k := range cases {
		got, _ := fitted(t, c, k.b)
		if b := got[k.coll][0].Plan.Blocks(); b != k.want {
			t.Errorf("%v: %s %s holds %d blocks, want %d", k.b, k.coll, got[k.coll][0].Plan.Name, b, k.want)
		}
		for coll, cs := range got {
			for _, ch := range cs {
				if k.b.SMs > 0 && ch.Plan.Blocks() > max(k.b.SMs, 132) {
					t.Errorf("%v: %s %s holds %d blocks, past %d SMs", k.b, coll, ch.Plan.Name, ch.Plan.Blocks(), k.b.SMs)
				}
			}
		}
	}
}

func TestBlockBudgetValidate(t *testing.T) {
	for _, b := range []algorithms.BlockBudget{{Max: -1}, {Min: -2}, {Min: 8, Max: 4}, {SMs: -1}} {
		if err := b.Validate(); err == nil {
			t.Errorf("%+v: Validate accepted it", b)
		}
		c := algorithms.DefaultConfig(0, 2, 132, true)
		c.Budget = b
		if b.Set() {
			if _, err := algorithms.Plans(c, algorithms.AllGather, 0); err == nil {
				t.Errorf("%+v: Plans accepted it", b)
			}
		}
	}
	for _, b := range []algorithms.BlockBudget{{}, {Max: 1}, {Min: 4, Max: 4}, {Min: 3, SMs: 10}} {
		if err := b.Validate(); err != nil {
			t.Errorf("%+v: %v", b, err)
		}
	}
}

// A budget of 16 thread blocks per launch on 2 GPUs of 132 SMs: the
// windowed AllGather keeps a send and a receive group of 8 blocks each.
func ExampleFitBlocks() {
	c := algorithms.DefaultConfig(0, 2, 132, true)
	c.Budget = algorithms.BlockBudget{Max: 16, SMs: 132}
	choices, clamps, err := algorithms.FitBlocks(c, algorithms.AllGather, 0, false)
	if err != nil {
		panic(err)
	}
	for _, ch := range choices {
		fmt.Printf("%s: %d blocks\n", ch.Plan.Name, ch.Plan.Blocks())
	}
	fmt.Println("clamped:", len(clamps))
	// Output:
	// all_gather-LL16: 8 blocks
	// all_gather-LL16-16x1024: 16 blocks
	// all_gather-hb-8x1024-w8388608: 16 blocks
	// clamped: 0
}
