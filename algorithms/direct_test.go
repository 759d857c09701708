package algorithms

import (
	"errors"
	"strings"
	"testing"
)

// TestDirectPlans: the direct AllGather and ReduceScatter of 2, 4 and 8
// ranks are valid plans, one per two-phase AllReduce tier with its launch
// shape and bound, naming the peers' buffers they need (the AllGather the
// outputs, the ReduceScatter the inputs) and no scratch; a block budget
// caps their blocks; another collective has none.
func TestDirectPlans(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		c := DefaultConfig(0, n, 132, true)
		var twoPhase []Tier
		for _, tr := range c.AllReduceTiers() {
			if tr.Algo != Algo1PA {
				twoPhase = append(twoPhase, tr)
			}
		}
		for _, k := range []struct {
			coll            Collective
			wantIn, wantOut bool
			name            string
		}{{AllGather, false, true, "all_gather-direct-"}, {ReduceScatter, true, false, "reduce_scatter-direct-"}} {
			choices, err := DirectPlans(c, k.coll)
			if err != nil {
				t.Fatalf("%d ranks, %v: %v", n, k.coll, err)
			}
			if len(choices) != len(twoPhase) {
				t.Fatalf("%d ranks, %v: %d plans, want one per two-phase tier (%d)", n, k.coll, len(choices), len(twoPhase))
			}
			for i, ch := range choices {
				p := ch.Plan
				if err := p.Validate(); err != nil {
					t.Errorf("%d ranks, %s: %v", n, p.Name, err)
				}
				if in, out := p.Needs(); in != k.wantIn || out != k.wantOut {
					t.Errorf("%d ranks, %s: Needs = %v, %v, want %v, %v", n, p.Name, in, out, k.wantIn, k.wantOut)
				}
				if !strings.HasPrefix(p.Name, k.name) || p.ScratchSlots != 0 || len(p.Channels) != n-1 {
					t.Errorf("%d ranks, %s: name, %d scratch slots, %d channels: want %s…, none, %d", n, p.Name, p.ScratchSlots, len(p.Channels), k.name, n-1)
				}
				if tr := twoPhase[i]; p.Blocks() != tr.Blocks || ch.MaxBytes != tr.MaxBytes {
					t.Errorf("%d ranks, %s: %d blocks up to %d B, want the tier's %d up to %d", n, p.Name, p.Blocks(), ch.MaxBytes, tr.Blocks, tr.MaxBytes)
				}
			}
		}
		c.Budget = BlockBudget{Max: 8}
		choices, err := DirectPlans(c, AllGather)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range choices {
			if ch.Plan.Blocks() > 8 {
				t.Errorf("%d ranks, budget 8: %s holds %d blocks", n, ch.Plan.Name, ch.Plan.Blocks())
			}
		}
		if _, err := DirectPlans(c, Broadcast); !errors.Is(err, ErrNoPlan) {
			t.Errorf("%d ranks: direct Broadcast: %v, want ErrNoPlan", n, err)
		}
	}
}
